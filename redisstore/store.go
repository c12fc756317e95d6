// Package redisstore is the Redis [driver.Store]. It works with go-redis v9
// (redis.UniversalClient: a single server, Sentinel or Cluster) and keeps
// Redisson's RLock layout, so Go services using leash and Java services using
// Redisson's RLock or RFencedLock exclude each other on the same name:
//
//   - the lock is a hash named exactly as the lock, field "<client-uuid>:<n>"
//     → hold count, key TTL = lease;
//   - a release publishes "0" on redisson_lock__channel:{name}: on a Redis 7
//     Cluster with SPUBLISH, as Redisson 3.22.0 and later do there by
//     default (see Options.ShardedPubSub);
//   - the fencing counter is redisson_lock_token:{name};
//   - a release's idempotency latch is redisson_unlock_latch:{name}:<request id>.
//
// leash's own fair queue (FairMutex waiters' places, starving Mutex waiters'
// marks) is leash_fair_queue:{name} and leash_fair_places:{name}; a release
// wakes the queue's first waiter, or hands it the lock, on that waiter's
// client's channel, leash_fair__channel:{name}:<client-uuid>, which only that
// client subscribes (see WatchClient), and wakes every fair waiter on
// leash_fair__channel:{name}.
//
// Companion keys share the lock's hash slot (a name that carries its own
// {hash tag} keeps it), so every script touches one slot, and every key a
// script touches is passed in KEYS. Scripts are embedded .lua files run with
// EVALSHA and reloaded on NOSCRIPT. Concurrent acquires and releases share
// round trips: beyond two in flight, the calls that wait go together in one
// pipeline, and the acquires of a Mutex or FairMutex, or their releases,
// among them go as one script call carrying every request, each with its
// own reply or error (on Cluster, those of one hash slot).
//
// Fencing tokens are max(counter + 1, server time in µs): they keep growing
// even when Redis loses the counter (a restart without persistence, a
// failover to a lagging replica), provided the server clock never steps back
// past a token issued before the loss and fewer than a million grants of one
// name are made per second.
//
// Lease expiry itself is only as durable as the server's memory of its
// grants. A restart without persistence forgets every lock; one from an RDB
// snapshot, or from an AOF without appendfsync always, forgets the last
// grants; a failover can promote a replica that has not yet received them
// (replication is asynchronous). So after any restart or promotion the store
// grants nothing until the server process has been up for one lease
// (Options.RestartGrace), by which time every forgotten lease has ended: the
// restart is told by INFO's run_id, recorded in a marker key the scripts
// compare, and a refusal matches leash.ErrRestartGrace. This costs one lease
// without grants after every restart and in a new server's first lease
// (MarkFresh declares a new server); a server with appendonly yes and
// appendfsync always may turn the grace off (NoRestartGrace, checked). The
// user needs INFO (ACL +info), and on Cluster CLUSTER MYID (ACL
// +cluster|myid), by which a script tells that a redirect brought it to
// another node than the one the Store read (without it, that check alone is
// skipped, and a warning logged once; see ErrStaleView). A server that may evict keys (maxmemory with
// a policy other than noeviction) is refused with ErrEvictable unless
// Options.AllowEviction. Options.Replicas makes every grant and renewal wait
// for replicas' acknowledgements (WAIT) before it counts.
//
// # Opening by URL
//
// Importing the package registers its URL schemes with driver.Register, so
// that driver.Open (and the leash CLI's --store) opens a Store, with a
// go-redis client of its own, from a URL:
//
//	redis://[user[:password]@]host[:port][/db]      one server
//	rediss://…                                      the same over TLS
//	redis+sentinel://[user[:password]@]host[:port][,host[:port]…]/master[/db]
//	redis+cluster://[user[:password]@]host[:port][,host[:port]…]
//
// rediss+sentinel:// and rediss+cluster:// use TLS throughout. The user and
// password are those of a Redis ACL user (or a password alone, for
// requirepass); Sentinels that need credentials of their own take them as
// the query parameters sentinel_username and sentinel_password. An IPv6
// address goes in brackets, in a host list too ([::1]:26379,[::2]); hosts
// may also be added as addr=host:port query parameters. go-redis's URL
// options (dial_timeout=1s, read_timeout, pool_size, …) are accepted, and
// these parameters of the Store's own:
//
//	ca_file=FILE     PEM file of the CAs that sign the server's certificate
//	                 (TLS only; default: the system's)
//	cert_file=FILE   PEM client certificate, for servers that verify clients
//	key_file=FILE    its PEM private key (cert_file and key_file go together)
//	key_prefix=P     Options.KeyPrefix: the lock NAME is the key P+NAME
//	replicas=N       Options.Replicas: the replication guard (not on Cluster)
//
// Unless the URL says otherwise, the client dials with a 3s timeout
// (dial_timeout) and once per try (dialer_retries), so that a server that
// is down is reported at once, and a command's context bounds each command.
// Opening makes no network call, and a URL that cannot name a Store is an
// error that matches driver.ErrBadURL. The opened store's Close closes the Store
// and its go-redis client; its String is the URL without passwords; its
// Ping(ctx) method checks that the server answers.
package redisstore

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/redis/go-redis/v9"
)

// Defaults for Options.
const (
	// DefaultBatchSize is how many locks one renewal script renews.
	DefaultBatchSize = 500
	// DefaultHealthCheck is how often an idle pub/sub connection is pinged.
	DefaultHealthCheck = time.Second
	// DefaultSubscribeTimeout bounds waiting for a SUBSCRIBE to be confirmed.
	DefaultSubscribeTimeout = 5 * time.Second
	// DefaultLinger is how long a channel no one watches stays subscribed.
	DefaultLinger = time.Second
	// NoLinger, as Options.Linger, unsubscribes a channel as soon as no one
	// watches it.
	NoLinger time.Duration = -1
	// MaxBatchSize is the largest BatchSize accepted.
	MaxBatchSize = 10000
	// DefaultReplicaTimeout is how long a grant or renewal waits for its
	// replicas' acknowledgements when Options.Replicas is set.
	DefaultReplicaTimeout = time.Second
)

// Options configures a Store. A nil *Options means all defaults; a zero
// field means that field's default.
type Options struct {
	// BatchSize is how many locks one renewal script renews. The scripts of
	// one renewal round are pipelined, and on Cluster run concurrently per
	// node. Default DefaultBatchSize (500); at most MaxBatchSize.
	BatchSize int
	// HealthCheck is how often the pub/sub connection is pinged when idle; a
	// connection that misses a ping is replaced, and every waiter is woken
	// in case a release was missed. Default DefaultHealthCheck (1s).
	HealthCheck time.Duration
	// SubscribeTimeout bounds the wait for a SUBSCRIBE confirmation. Default
	// DefaultSubscribeTimeout (5s). When it passes, the waiting Lock falls
	// back to polling at the holder's remaining lease.
	SubscribeTimeout time.Duration
	// Linger is how long a release channel stays subscribed after its last
	// waiter left, so that a client that waits for the same lock again soon
	// (a contended lock taken in a loop) needs no new SUBSCRIBE round trip.
	// Default DefaultLinger (1s); NoLinger unsubscribes at once.
	Linger time.Duration
	// RestartGrace protects against a server that lost grants: one that
	// restarted without persistence, or from an RDB snapshot or an AOF
	// without appendfsync always (both lose the last writes), or a replica
	// promoted before it received them. Such a server has forgotten locks
	// whose leases may still run, and would grant them again. So no lock of
	// any kind is granted until the server process has been up for the
	// grace (a promoted replica: since the Store first saw it promoted),
	// by which time every lease the old process granted has ended. The
	// process is told apart by INFO's run_id, recorded in a marker key
	// (leash:epoch, one per Cluster slot) and compared by the acquire
	// scripts with the run_id the Store read when it connected, so every
	// client sees the restart, including one that starts after it. A refusal
	// in the grace is a NotAcquiredError matching leash.ErrRestartGrace;
	// waiting calls wait it out. Zero means the lease of the lock being
	// acquired, which is enough when every client uses the same lease for a
	// name; otherwise set it to the longest lease in use. The cost: nothing
	// is granted in the first grace of a server process's life, including a
	// brand-new server's (a provisioning step that knows no lease predates
	// the server can call MarkFresh, or run leash mark-fresh). The Store
	// needs INFO for this (the ACL category @dangerous holds it: grant the
	// user +info); without it every acquire fails with ErrNoServerInfo. On
	// Cluster it also reads CLUSTER MYID (+cluster|myid), so that an acquire
	// redirected to another node than the one it read is refused there and
	// retried with that node's identity (ErrStaleView if that does not
	// settle); without it only that check is skipped, with a warning.
	// NoRestartGrace turns the grace off, declaring that the server loses no
	// acknowledged write (appendonly yes with appendfsync always, no
	// failover to a lagging replica): the Store checks appendonly (INFO) and
	// appendfsync (CONFIG GET, where the ACL allows it) and fails every
	// acquire with ErrNotDurable when they do not agree.
	RestartGrace time.Duration
	// Replicas turns on the replication guard: a grant or a renewal counts
	// only once at least this many replicas have acknowledged it (WAIT, sent
	// in the same pipeline as the script, so one round trip plus the
	// replicas' delay). Without it, a failover to a replica that had not yet
	// received a grant (Redis replicates asynchronously) loses the lock while
	// its holder believes it holds it, and another client may take it. A
	// grant too few replicas acknowledge within ReplicaTimeout is undone and
	// the acquire fails with ErrNotReplicated; such a renewal fails with it,
	// so the holder is told the lock is lost if no later renewal succeeds
	// within its validity. WAIT narrows the window, it does not close it: a
	// failover may still promote a replica that missed the write, and the
	// fencing token remains the guard of record. A replica that has just
	// (re)connected counts only from its first acknowledgement, which Redis
	// replicas send every second. Zero (the default) turns the guard off.
	// Not supported on Cluster.
	Replicas int
	// AllowEviction accepts a server that may evict keys (maxmemory set with
	// a maxmemory-policy other than noeviction; volatile-* policies evict
	// locks too, since they carry a TTL). By default every acquire on such a
	// server fails with ErrEvictable. The cost of allowing it: a full server
	// deletes held locks like any other key, and grants them again while
	// their holders still run, until each holder's next renewal tells it the
	// lock is lost. Evictions the Store notices (INFO's evicted_keys growing)
	// are logged to Logger.
	AllowEviction bool
	// CheckInterval is how often, at most, the Store re-reads the server's
	// memory settings and eviction count (INFO): on a renewal round, so that
	// a CONFIG SET made at run time fails the next acquire; and on an
	// acquire the settings refused, so that a client holding no lock sees
	// the operator's fix. It is also the age at which an acquire re-reads
	// the identity of the server process (the restart grace's view), which
	// a failover can change without closing the Store's connections.
	// Default DefaultCheckInterval (5s).
	CheckInterval time.Duration
	// Logger receives the Store's warnings (evictions). Default
	// slog.Default().
	Logger *slog.Logger
	// ReplicaTimeout bounds the wait for the replicas' acknowledgements.
	// Default DefaultReplicaTimeout (1s); it must be shorter than the redis
	// client's ReadTimeout and well under the leases in use.
	ReplicaTimeout time.Duration
	// KeyPrefix, when set, keeps leash's keys apart from an application's
	// data on a shared server, as Redisson's NameMapper does: the lock
	// "orders" lives in the key KeyPrefix+"orders", every companion key and
	// channel is named from that key (redisson_lock_token:{<prefix>orders}),
	// and the restart marker is KeyPrefix+"leash:epoch". Lock names given to
	// leash and returned by it (Info.Name, List) are the unprefixed ones.
	// Redisson clients exclude leash's locks only when they use a NameMapper
	// that adds the same prefix. It may not contain '{' or '}' (a name's
	// hash tag decides its Cluster slot) and is at most 128 bytes. Default
	// "": none.
	KeyPrefix string
	// ShardedPubSub says how release messages travel on a Redis 7 Cluster.
	// Redisson 3.22.0 and later publish them there with SPUBLISH and listen
	// with SSUBSCRIBE when the cluster answers PUBSUB SHARDNUMSUB (its
	// shardedSubscriptionMode setting, since 3.29.0, defaults to that:
	// AUTO). With ShardedAuto (the default) the Store asks the same once: on
	// a Cluster that answers, releases publish with SPUBLISH on the lock's
	// shard, and waiters listen both with SSUBSCRIBE (one connection per
	// watched slot, to its master) and with SUBSCRIBE, so they hear
	// Redisson in either mode and older leash versions alike; a server that
	// refuses the question (before Redis 7, or an ACL user without it)
	// means plain pub/sub. ShardedOn publishes with SPUBLISH and listens
	// with SSUBSCRIBE only, saving the SUBSCRIBE of each watched channel
	// where every client publishes sharded. ShardedOff publishes and listens
	// as on a single server (PUBLISH, SUBSCRIBE), as Redisson before 3.22.0
	// or with shardedSubscriptionMode OFF does. Outside a Cluster it changes
	// nothing. Revocations always travel on plain channels. The cost,
	// measured by TestClusterShardedPubSub: a sharded release sends one
	// cluster-bus message (to each replica of the lock's shard), a plain one
	// a message to every other node; a sharded watch holds a connection per
	// watched slot, closed Linger after its last watch ends, which follows
	// its slot through migrations and failovers, waking its waiters when it
	// moves.
	ShardedPubSub ShardedPubSub
}

// ErrNotReplicated reports that fewer replicas than Options.Replicas
// acknowledged a grant or a renewal in time. A grant that fails so is
// undone before the error is returned.
var ErrNotReplicated = errors.New("redisstore: not acknowledged by enough replicas")

// Store is a Redis lock store. Create it with New; it is safe for concurrent
// use. A Store belongs to one leash.Client, which closes it (its pub/sub
// connection, not the redis client you passed) on Close.
type Store struct {
	rdb     redis.UniversalClient
	cluster bool
	batch   int
	opts    Options
	err     error // construction error, reported by Validate and every call
	reqID   string
	reqSeq  atomic.Uint64
	notify  notifier
	shards  shardNotifiers
	pubsub  pubsubMode
	pipe    pipeliner
	guard   replicaGuard
	watch   serverWatch
	// givenBack are the grants confirm gave back, whose hand-off wake-ups
	// may still be on their way (see handoff.go).
	givenBack givenBack
	// The last boxed lease and grace arguments (see args.go): they rarely
	// change, and boxing them anew costs an allocation per script call.
	leaseArg, latchArg lastArg[time.Duration]
	waitArg            lastArg[time.Duration] // a place lifetime (fairArgs, handoffArgs)
	graceArgs          lastArg[graceKey]
	// markerOnly keeps the restart grace's rule of earlier versions (the
	// marker alone, no server identity): tests' negative control.
	markerOnly bool
	// stayOnMoves keeps a sharded subscription where it is when its slot
	// moves (earlier versions' behaviour): tests' negative control.
	stayOnMoves bool
}

var (
	//go:embed lua/lib.lua
	libLua string
	//go:embed lua/batch_latch.lua
	batchLatchLua string
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/acquire_fair.lua
	acquireFairLua string
	//go:embed lua/acquire_read.lua
	acquireReadLua string
	//go:embed lua/acquire_write.lua
	acquireWriteLua string
	//go:embed lua/acquire_permit.lua
	acquirePermitLua string
	//go:embed lua/acquire_many.lua
	acquireManyLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/renew_lease.lua
	renewLeaseLua string
	//go:embed lua/renew_write.lua
	renewWriteLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/release_read.lua
	releaseReadLua string
	//go:embed lua/release_write.lua
	releaseWriteLua string
	//go:embed lua/release_permit.lua
	releasePermitLua string
	//go:embed lua/withdraw.lua
	withdrawLua string
	//go:embed lua/force.lua
	forceLua string
	//go:embed lua/revoke.lua
	revokeLua string
	//go:embed lua/ack_revoke.lua
	ackRevokeLua string
	//go:embed lua/inspect.lua
	inspectLua string
	//go:embed lua/is_lock.lua
	isLockLua string
	//go:embed lua/set_permits.lua
	setPermitsLua string

	acquireScript       = withLib(acquireLua)
	acquireFairScript   = withLib(acquireFairLua)
	acquireReadScript   = withLib(acquireReadLua)
	acquireWriteScript  = withLib(acquireWriteLua)
	acquirePermitScript = withLib(acquirePermitLua)
	acquireManyScript   = withLib(acquireManyLua)
	renewScript         = withLib(renewLua)
	renewLeaseScript    = withLib(renewLeaseLua)
	renewWriteScript    = withLib(renewWriteLua)
	releaseScript       = withPub(releaseLua)
	releaseReadScript   = withPub(releaseReadLua)
	releaseWriteScript  = withPub(releaseWriteLua)
	releasePermitScript = withPub(releasePermitLua)
	withdrawScript      = withPub(withdrawLua)
	forceScript         = withPub(forceLua)
	revokeScript        = withLib(revokeLua)
	ackRevokeScript     = withPub(ackRevokeLua)
	inspectScript       = withLib(inspectLua)
	isLockScript        = withLib(isLockLua)
	setPermitsScript    = withPub(setPermitsLua)
)

// withLib makes a script of body preceded by the lib.lua functions it calls.
func withLib(body string) *redis.Script { return redis.NewScript(withLibSource(body)) }

// withLibSource is the source of withLib's script: libFor(body), then
// body. A body with a line libRest in it is sent in two parts: the lib.lua
// functions the part before the line calls, that part, the other functions
// the script calls, then the rest of body. A call that returns before
// libRest builds only the first functions' closures: the common path of a
// hot script (an uncontended release needs 4 of its 20) is put first.
func withLibSource(body string) string {
	lib, first, libAfter, rest, split := libSplit(body)
	if !split {
		return lib + "\n" + body
	}
	return lib + "\n" + first + "\n" + libRest + "\n" + libAfter + "\n" + rest
}

// libSplit cuts body at its line libRest (split reports whether it has
// one) into first and rest, and returns the lib.lua text that precedes
// first, lib (the functions first calls; all body calls when there is no
// such line), and the text that goes at the line, libAfter (the others body
// calls).
func libSplit(body string) (lib, first, libAfter, rest string, split bool) {
	first, rest, split = strings.Cut(body, "\n"+libRest+"\n")
	if !split {
		return libFor(body), body, "", "", false
	}
	before := libKeep(first)
	after := libKeep(body)
	for i := range after {
		after[i] = after[i] && !before[i]
	}
	return libText(before), first, libText(after), rest, true
}

// perCallLocal matches the line of a top-level local of lib.lua that starts
// nil: state its functions keep for one script call (the TIME reply, the
// INFO replies, memos), which Redis makes anew on every call of a script.
// The first group is the locals' names.
var perCallLocal = regexp.MustCompile(`(?m)^local ([a-z_]+(?:, [a-z_]+)*) = nil(?:, nil)*\b.*$`)

// libRest is the line of a script body after which withLibSource defines
// the lib.lua functions its part before the line does not call.
const libRest = "-- (lib.lua: the functions only the rest calls are defined here, see withLibSource)"

// A libPara is one paragraph of lib.lua: the preamble, or one or two
// functions with their comment.
type libPara struct {
	text    string
	defines []string
	calls   map[string]bool
}

// libParas is lib.lua cut into paragraphs, parsed once.
var libParas = func() []libPara {
	var out []libPara
	for _, text := range strings.Split(libLua, "\n\n") {
		p := libPara{text: text, calls: called(text)}
		for _, m := range libFuncRE.FindAllStringSubmatch(text, -1) {
			p.defines = append(p.defines, m[1])
		}
		out = append(out, p)
	}
	return out
}()

// libFor returns lib.lua's preamble (the paragraph before the first function)
// and the paragraphs that define the functions body calls, directly or
// through other functions, in their lib.lua order. Each function in a script
// is a closure Redis builds on every call, and garbage its Lua GC collects,
// so a script carries only those it uses.
func libFor(body string) string { return libText(libKeep(body)) }

// libKeep reports, per paragraph of lib.lua, whether libFor(body) keeps it.
func libKeep(body string) []bool {
	need := called(body)
	keep := make([]bool, len(libParas))
	keep[0] = true
	for changed := true; changed; {
		changed = false
		for i, p := range libParas {
			if !keep[i] && slices.ContainsFunc(p.defines, func(name string) bool { return need[name] }) {
				keep[i], changed = true, true
				maps.Copy(need, p.calls)
			}
		}
	}
	return keep
}

// libText joins the paragraphs of lib.lua that keep marks, in order.
func libText(keep []bool) string {
	var kept []string
	for i, p := range libParas {
		if keep[i] {
			kept = append(kept, p.text)
		}
	}
	return strings.Join(kept, "\n\n")
}

var (
	libFuncRE    = regexp.MustCompile(`(?m)^local function (\w+)\(`)
	luaCommentRE = regexp.MustCompile(`--[^\n]*`)
	luaCallRE    = regexp.MustCompile(`(\w+)\(`)
)

// called returns the names text calls, leaving out comments and the
// "local function name(" headers of definitions.
func called(text string) map[string]bool {
	code := libFuncRE.ReplaceAllString(luaCommentRE.ReplaceAllString(text, ""), "")
	names := map[string]bool{}
	for _, m := range luaCallRE.FindAllStringSubmatch(code, -1) {
		names[m[1]] = true
	}
	return names
}

var (
	_ driver.Store           = (*Store)(nil)
	_ driver.Watcher         = (*Store)(nil)
	_ driver.ClientWatcher   = (*Store)(nil)
	_ driver.KindStore       = (*Store)(nil)
	_ driver.Withdrawer      = (*Store)(nil)
	_ driver.StarvationStore = (*Store)(nil)
	_ driver.Admin           = (*Store)(nil)
)

// Kinds implements [driver.KindStore]: the Store grants every kind, in
// Redisson's layouts (RLock, RFairLock, RReadWriteLock, and leash's own
// semaphore).
//
// Readers-writer locks are shared with Redisson's RReadWriteLock: a
// Redisson reader or writer keeps leash's writers out (and leash's writers
// never delete a Redisson reader's hold), and a leash writer or reader keeps
// Redisson's writers out. Each leash reader keeps, besides its lease in a set
// of leash's own, a hold where Redisson's readers keep theirs (its field in
// the lock hash and its "{name}:<owner>:rwlock_timeout:1" key, set to its
// lease at each renewal), so a Redisson reader that unlocks last of the
// Redisson readers keeps the hash while leash readers read. A Redisson
// reader's watchdog sets every reader's timeout key to its own timeout,
// leash's too, so keep leash readers' lease below twice Redisson's
// lockWatchdogTimeout (60 s with its default of 30 s) where Java readers
// share a name: a leash reader renews every third of its lease, and must do
// so before the hash a leaving Java reader kept for it (for what its timeout
// key had left) runs out. With another renewal interval, keep it at most
// two thirds of lockWatchdogTimeout (20 s); with none (a fixed lease), keep
// the lease at most lockWatchdogTimeout, which the watchdog then never
// shortens. A leash reader that crashed may keep Java writers
// out until the Java readers' lease after it (leash's writers purge it at
// its own lease's end). Leash's releases are published on Redisson's
// channel, redisson_rwlock:{name}, as Redisson's are ("0" when the last
// reader leaves, "1" when the writer does or the lock is force-released,
// written "00" and "01" so that leash's waiters can tell them apart), so
// Java waiters are woken by them; leash's waiters listen there too, and a
// Java release wakes every one of them (see echoOne).
func (s *Store) Kinds() []driver.Kind {
	return []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindRead, driver.KindWrite, driver.KindPermit}
}

// String names the store in messages: "redis" and the address of the
// server (the first one, for Sentinel and Cluster clients).
func (s *Store) String() string {
	switch c := s.rdb.(type) {
	case *redis.Client:
		if c != nil {
			return "redis " + c.Options().Addr
		}
	case *redis.ClusterClient:
		if c != nil && len(c.Options().Addrs) > 0 {
			return "redis cluster " + c.Options().Addrs[0]
		}
	}
	return "redis"
}

// New returns a Store on rdb. A nil rdb, a *redis.Ring or bad options are
// reported by Validate, which leash.New calls, so they surface before any
// round trip. On first use the Store adds a hook to rdb (to each Cluster
// node's client) that counts new connections, so that it reads INFO again
// after any reconnection (see Options.RestartGrace); the hook stays. New
// adds another (on Cluster, to each node's client made from then on) that
// closes the Store's pub/sub connections when it is closed, so that Close
// does not wait for a black-holed server's reads to time out.
func New(rdb redis.UniversalClient, opts *Options) *Store {
	s := &Store{rdb: rdb, reqID: newRequestPrefix()}
	if opts != nil {
		s.opts = *opts
	}
	_, ring := rdb.(*redis.Ring)
	switch {
	case rdb == nil || isNilClient(rdb):
		s.err = errors.New("redisstore: New: the redis client is nil; pass one such as redis.NewClient(&redis.Options{Addr: \"127.0.0.1:6379\"})")
	case ring:
		// A Ring shards by its own hash of each key, not by Cluster slot,
		// so the keys of one script (a renewal batch, a MultiLock group)
		// could live on several shards, and a script run on one of them
		// would find locks that are held elsewhere gone.
		s.err = errors.New("redisstore: New: a *redis.Ring is not supported: its shards do not keep a lock's keys, or a script's, together; use a single server (redis.NewClient), Sentinel (redis.NewFailoverClient) or Cluster (redis.NewClusterClient)")
	case s.opts.BatchSize < 0 || s.opts.BatchSize > MaxBatchSize:
		s.err = fmt.Errorf("redisstore: Options.BatchSize = %d: must be between 1 and %d (zero means %d)", s.opts.BatchSize, MaxBatchSize, DefaultBatchSize)
	case s.opts.HealthCheck < 0:
		s.err = fmt.Errorf("redisstore: Options.HealthCheck = %v: must be positive (zero means %v)", s.opts.HealthCheck, DefaultHealthCheck)
	case s.opts.RestartGrace < NoRestartGrace || s.opts.RestartGrace > leash.MaxLease:
		s.err = fmt.Errorf("redisstore: Options.RestartGrace = %v: must be between 0 and %v, or NoRestartGrace (zero means the lease of each lock)", s.opts.RestartGrace, leash.MaxLease)
	case s.opts.Linger < NoLinger:
		s.err = fmt.Errorf("redisstore: Options.Linger = %v: must be positive, or NoLinger (zero means %v)", s.opts.Linger, DefaultLinger)
	case s.opts.CheckInterval < 0:
		s.err = fmt.Errorf("redisstore: Options.CheckInterval = %v: must be positive (zero means %v)", s.opts.CheckInterval, DefaultCheckInterval)
	case s.opts.SubscribeTimeout < 0:
		s.err = fmt.Errorf("redisstore: Options.SubscribeTimeout = %v: must be positive (zero means %v)", s.opts.SubscribeTimeout, DefaultSubscribeTimeout)
	case strings.ContainsAny(s.opts.KeyPrefix, "{}") || len(s.opts.KeyPrefix) > maxKeyPrefix:
		s.err = fmt.Errorf("redisstore: Options.KeyPrefix = %q: must be at most %d bytes without '{' or '}' (a name's own hash tag decides its Cluster slot)", s.opts.KeyPrefix, maxKeyPrefix)
	case s.opts.ShardedPubSub < ShardedAuto || s.opts.ShardedPubSub > ShardedOff:
		s.err = fmt.Errorf("redisstore: Options.ShardedPubSub = %d: must be ShardedAuto, ShardedOn or ShardedOff", s.opts.ShardedPubSub)
	default:
		s.err = s.initGuard(rdb)
	}
	if s.opts.BatchSize == 0 {
		s.opts.BatchSize = DefaultBatchSize
	}
	if s.opts.HealthCheck == 0 {
		s.opts.HealthCheck = DefaultHealthCheck
	}
	if s.opts.CheckInterval == 0 {
		s.opts.CheckInterval = DefaultCheckInterval
	}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.Default()
	}
	s.watch.logger = s.opts.Logger
	s.watch.maxAge = s.opts.CheckInterval
	if s.opts.SubscribeTimeout == 0 {
		s.opts.SubscribeTimeout = DefaultSubscribeTimeout
	}
	switch s.opts.Linger {
	case 0:
		s.opts.Linger = DefaultLinger
	case NoLinger:
		s.opts.Linger = 0
	}
	s.batch = s.opts.BatchSize
	_, s.cluster = rdb.(*redis.ClusterClient)
	s.notify.init(s, false)
	s.shards.init(s)
	if s.err == nil {
		hookPubSub(s, rdb)
	}
	s.pipe = pipeliner{rdb: rdb, max: maxInFlight}
	return s
}

func isNilClient(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// Validate reports a construction error: a nil client, a Ring or bad options.
func (s *Store) Validate() error { return s.err }

// CheckName rejects names whose companion keys would land in another Cluster
// hash slot under Redisson's naming rule: a name with a '{' must contain a
// complete hash tag such as "{orders}", and a name without '{' must not
// contain '}'. It rejects a name that is a hash tag alone, such as
// "{orders}": that rule wraps a name without a tag in braces, so "{orders}"
// would share every companion key (fencing counter, wait queue, channels,
// readers, semaphore size) with "orders", and a release of one would hand
// the other's queued waiter a grant. It also rejects the names of leash's
// (and Redisson's) own keys: the restart marker leash:epoch and every
// companion key, such as redisson_lock_token:{orders}; a lock of that name
// would read or overwrite another lock's bookkeeping. leash calls it before
// any round trip.
func (s *Store) CheckName(name string) error {
	if name == epochKey || strings.HasPrefix(name, epochKey+":") {
		return fmt.Errorf("is the name of leash's restart marker (%s); choose another name", epochKey)
	}
	for _, p := range companionPrefixes {
		if strings.HasPrefix(name, p+":") {
			return fmt.Errorf("starts with %q, the prefix of keys leash and Redisson keep beside the locks; choose another name", p+":")
		}
	}
	open := strings.IndexByte(name, '{')
	if open < 0 {
		if strings.IndexByte(name, '}') >= 0 {
			return errors.New("has a '}' without a '{': its companion keys would not share its hash slot; use a complete hash tag such as {orders} or neither brace")
		}
		return nil
	}
	if end := strings.IndexByte(name[open+1:], '}'); end <= 0 {
		return errors.New("has a '{' without a complete, non-empty hash tag: its companion keys would not share its hash slot; use a complete hash tag such as {orders} or neither brace")
	}
	if k := s.key(name); k[0] == '{' && k[len(k)-1] == '}' && !strings.ContainsAny(k[1:len(k)-1], "{}") {
		other := strings.TrimPrefix(k[1:len(k)-1], s.opts.KeyPrefix)
		return fmt.Errorf("is a hash tag alone, whose companion keys (fencing counter, wait queue, channels, semaphore size) are those of the lock %q too (Redisson's layout puts a name without a hash tag in braces), so the two locks would share them; name it %q, which lives in the same hash slot", other, other)
	}
	return nil
}

// Redis returns the go-redis client the Store runs its commands on.
func (s *Store) Redis() redis.UniversalClient { return s.rdb }

// Close ends the Store's pub/sub connection. It does not close the redis
// client passed to New.
func (s *Store) Close() error {
	s.notify.close()
	s.shards.close()
	s.pipe.close()
	return nil
}

// maxKeyPrefix is the longest Options.KeyPrefix accepted, in bytes.
const maxKeyPrefix = 128

// key is the Redis key of the lock name: name itself, or with
// Options.KeyPrefix before it. Every key and channel of a name derives from
// it; the public methods map each name once, on the way in.
func (s *Store) key(name string) string { return s.opts.KeyPrefix + name }

// prefixName builds a companion key the way Redisson does: "prefix:{name}",
// or "prefix:name" when the name already carries a hash tag.
func prefixName(prefix, name string) string {
	if strings.IndexByte(name, '{') >= 0 {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// readerTimeoutKey is the key that holds a read hold's lease in Redisson's
// RReadWriteLock layout, "{name}:<owner>:rwlock_timeout:1" ("name:<owner>…"
// when the name carries a hash tag): each leash reader keeps one beside its
// field in the lock hash, so that Redisson's readers count its hold (see
// acquire_read.lua).
func readerTimeoutKey(name, owner string) string {
	if strings.IndexByte(name, '{') >= 0 {
		return name + ":" + owner + ":rwlock_timeout:1"
	}
	return "{" + name + "}:" + owner + ":rwlock_timeout:1"
}

// companions appends to dst the companion keys of name for prefixes (see
// prefixName), as substrings of one string: a script call's keys cost one
// allocation instead of one each.
func companions(dst []string, name string, prefixes ...string) []string {
	tag := len(":{}")
	if strings.IndexByte(name, '{') >= 0 {
		tag = len(":")
	}
	size := 0
	for _, p := range prefixes {
		size += len(p) + tag + len(name)
	}
	var b strings.Builder
	b.Grow(size)
	for _, p := range prefixes {
		b.WriteString(p)
		if tag == len(":") {
			b.WriteByte(':')
			b.WriteString(name)
		} else {
			b.WriteString(":{")
			b.WriteString(name)
			b.WriteByte('}')
		}
	}
	all, at := b.String(), 0
	for _, p := range prefixes {
		end := at + len(p) + tag + len(name)
		dst = append(dst, all[at:end])
		at = end
	}
	return dst
}

// The prefixes of the companion keys and channels of a name (see
// prefixName). CheckName refuses names that start with one of them.
const (
	tokenPrefix      = "redisson_lock_token"
	channelPrefix    = "redisson_lock__channel"
	latchPrefix      = "redisson_unlock_latch"
	fairQueuePrefix  = "leash_fair_queue"
	fairPlacesPrefix = "leash_fair_places"
	fairChanPrefix   = "leash_fair__channel"
	readersPrefix    = "leash_rw_readers"
	writersPrefix    = "leash_rw_writers"
	rwChanPrefix     = "leash_rw__channel"
	// redissonRWPrefix names the channel Redisson's RReadWriteLock waiters
	// listen on: leash publishes its RWMutex's releases there too, so that
	// a Java waiter is woken by them. A channel, never a key: not a
	// companion.
	redissonRWPrefix = "redisson_rwlock"
	semSizePrefix    = "leash_semaphore_size"
	semChanPrefix    = "leash_semaphore__channel"
	clientPrefix     = "leash_client" // not a companion: a Client's holder record
	// jobPrefix and jobRunsPrefix (jobs.go) name a scheduled job's state
	// and runs, kept beside its run lock.
)

// companionPrefixes lists every companion prefix, and the holder records'
// for CheckName.
var companionPrefixes = [...]string{tokenPrefix, channelPrefix, latchPrefix, fairQueuePrefix, fairPlacesPrefix,
	fairChanPrefix, readersPrefix, writersPrefix, rwChanPrefix, semSizePrefix, semChanPrefix, clientPrefix,
	jobPrefix, jobRunsPrefix}

// The keys and channels of one name. Every one shares the name's hash slot.
func tokenKey(name string) string          { return prefixName(tokenPrefix, name) }
func channelName(name string) string       { return prefixName(channelPrefix, name) }
func fairQueueKey(name string) string      { return prefixName(fairQueuePrefix, name) }
func fairPlacesKey(name string) string     { return prefixName(fairPlacesPrefix, name) }
func fairChannel(name string) string       { return prefixName(fairChanPrefix, name) }
func readersKey(name string) string        { return prefixName(readersPrefix, name) }
func writersKey(name string) string        { return prefixName(writersPrefix, name) }
func rwChannel(name string) string         { return prefixName(rwChanPrefix, name) }
func redissonRWChannel(name string) string { return prefixName(redissonRWPrefix, name) }
func semSizeKey(name string) string        { return prefixName(semSizePrefix, name) }
func semChannel(name string) string        { return prefixName(semChanPrefix, name) }
func latchKey(name, id string) string      { return string(append(appendLatchPrefix(nil, name), id...)) }

// clientFairChannel is the channel of the fair queue heads of one client's
// owners: leash_fair__channel:{name}:<client> (see WatchClient).
func clientFairChannel(name, client string) string { return fairChannel(name) + ":" + client }

// appendLatchPrefix appends to b the latch key of name up to its request id.
func appendLatchPrefix(b []byte, name string) []byte {
	b = append(b, latchPrefix...)
	if strings.IndexByte(name, '{') >= 0 {
		b = append(append(append(b, ':'), name...), ':')
	} else {
		b = append(append(append(b, ":{"...), name...), "}:"...)
	}
	return b
}

// watchChannel is the channel a watch of kind on name listens to.
func watchChannel(kind driver.Kind, name string) string {
	switch kind {
	case driver.KindFair:
		return fairChannel(name)
	case driver.KindRead, driver.KindWrite:
		return rwChannel(name) // and redissonRWChannel, see watchChannels
	case driver.KindPermit:
		return semChannel(name)
	}
	return channelName(name)
}

// nextLatch returns the latch key of name (see latchKey) for a new request
// id, unique to one release call of this Store: a transport retry of the
// same call reuses it, which is what the latch needs. One allocation.
func (s *Store) nextLatch(name string) string {
	var buf [192]byte
	b := append(appendLatchPrefix(buf[:0], name), s.reqID...)
	return string(strconv.AppendUint(b, s.reqSeq.Add(1), 16))
}

func newRequestPrefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never returns an error (crypto/rand docs)
	return hex.EncodeToString(b[:]) + "-"
}

// ms converts a lease to whole milliseconds, at least 1.
func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }
