package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors about a server whose configuration can lose locks. Each is
// returned, wrapped with the setting and its fix, by every acquire until the
// configuration changes or the Options opt out; nothing is granted.
var (
	// ErrEvictable reports a server that may evict lock keys: maxmemory is
	// set with a maxmemory-policy other than noeviction. Every volatile-*
	// policy evicts locks too, since they carry a TTL. Fix the server
	// (CONFIG SET maxmemory-policy noeviction), use a Redis of its own for
	// locks, or set Options.AllowEviction.
	ErrEvictable = errors.New("redisstore: the server may evict lock keys")
	// ErrNotDurable reports Options.RestartGrace = NoRestartGrace on a server
	// that loses acknowledged writes in a crash (appendonly no, or an
	// appendfsync other than always).
	ErrNotDurable = errors.New("redisstore: the server does not persist every write, so the restart grace cannot be off")
	// ErrNoServerInfo reports that the server refused INFO to this user, so
	// the store cannot tell whether the server restarted (and forgot leases)
	// or may evict lock keys. Allow it (ACL SETUSER <user> +info), or opt out
	// of both checks with NoRestartGrace and AllowEviction.
	ErrNoServerInfo = errors.New("redisstore: the server refuses INFO, which the store needs to tell a restarted or evicting server")
)

// DefaultCheckInterval is how often, at most, renewal rounds re-read a
// server's memory settings and eviction count, and how old the Store's view
// of a server process may grow before an acquire reads it anew.
const DefaultCheckInterval = 5 * time.Second

// serverWatch is what the Store knows of the server processes it talks to
// (one, or one per Cluster primary): their identity (INFO server run_id),
// start, memory and persistence settings. It owns the dial counter and the
// facts; nothing else changes them.
//
// The identity it passes to the acquire scripts must be that of the process
// that runs them. It is read with INFO on one connection and the script runs
// on another; a connection dialed before INFO was sent talks to the process
// INFO answered from (or to one that has died, and fails), so the facts are
// stale when a connection was dialed after: every dial bumps the counter,
// the next acquire re-reads INFO first, and an acquire during which a dial
// happened checks afterwards that the process is still the one it named
// (see Store.runAcquire). A process can also change under a connection that
// stays open: a primary that is made a replica, resynced (losing the grants
// only it had made) and promoted again keeps its run_id and its clients'
// connections, and only INFO shows its new replication id. So facts are also
// read anew once they are maxAge (CheckInterval) old: a Store that holds no
// lock, and so has no renewal rounds to re-read them, grants on such a view
// for at most that long.
type serverWatch struct {
	dials  atomic.Uint64 // connections dialed by the hooked clients
	nodes  sync.Map      // *redis.Client → *serverFacts; Cluster: per primary's client, else one under nil
	maxAge time.Duration // facts this old are read anew by the next acquire; 0 for never (tests' negative control)

	mu      sync.Mutex // guards hooked and checked, and orders the stores into nodes
	hooked  map[*redis.Client]bool
	checked time.Time // last check of the settings by a renewal round

	logger     *slog.Logger // the Store's (Options.Logger)
	myIDDenied sync.Once    // logs, once, an ACL that denies CLUSTER MYID
}

// serverFacts is one server process as INFO described it.
type serverFacts struct {
	gen      uint64      // dials before the INFO that read them
	aging    atomic.Bool // an acquire is reading them anew, being maxAge old (see facts)
	runID    string      // INFO server run_id; empty when INFO was refused
	id       string      // the process in its current role: run_id, "/", master_replid (see identity)
	read     time.Time
	startUS  int64  // latest possible start, µs by the server's clock, in whole seconds; 0 when it may have been promoted
	node     string // CLUSTER MYID of the Cluster node; empty on a single server or when the ACL denies it
	view     string // "<start>:<run id>[#<node id>]", which the acquire scripts compare with the marker
	fsync    fsyncCheck
	maxmem   int64
	policy   string
	evicted  int64
	aof      bool
	infoErr  error // INFO refused to this user (NOPERM)
	fetchErr error // INFO failed otherwise (a transport error, BUSY, LOADING)
}

// fsyncCheck is the appendfsync setting of a process, read once, when
// NoRestartGrace needs it (CONFIG GET, which the ACL may deny: then "").
type fsyncCheck struct {
	once  sync.Once
	value string
}

// dialCounter is the go-redis hook that counts dials.
type dialCounter struct{ n *atomic.Uint64 }

func (d dialCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := next(ctx, network, addr)
		if err == nil {
			// Counted once connected: a connection made before INFO was
			// sent talks to the process INFO answers from, or to a dead one.
			d.n.Add(1)
		}
		return cn, err
	}
}

func (d dialCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (d dialCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// node returns the client that serves marker: the Store's own client, or on
// Cluster the primary of marker's slot.
func (s *Store) node(ctx context.Context, marker string) (*redis.Client, redis.UniversalClient, error) {
	cc, ok := s.rdb.(*redis.ClusterClient)
	if !ok {
		return nil, s.rdb, nil
	}
	n, err := cc.MasterForKey(ctx, marker)
	return n, n, err
}

// facts returns what is known of the process behind key (nil: the single
// server), reading INFO first when no facts are known, a connection was
// dialed since they were read, or they are maxAge old. Only the hook's first
// use counts dials from then on: connections made before talk to the process
// INFO then reads. Of the acquires that find the facts maxAge old, one reads
// them anew while the others use them meanwhile, for one more round trip.
func (w *serverWatch) facts(ctx context.Context, key *redis.Client, c redis.UniversalClient) *serverFacts {
	if v, ok := w.nodes.Load(key); ok {
		if f := v.(*serverFacts); f.gen == w.dials.Load() && f.fetchErr == nil {
			if w.maxAge <= 0 || time.Since(f.read) < w.maxAge || !f.aging.CompareAndSwap(false, true) {
				return f // the hot path: no lock, no round trip
			}
		}
	} else {
		w.mu.Lock()
		if !w.hooked[key] {
			if w.hooked == nil {
				w.hooked = map[*redis.Client]bool{}
			}
			w.hooked[key] = true
			c.AddHook(dialCounter{&w.dials})
		}
		w.mu.Unlock()
	}
	return w.refresh(ctx, key, c)
}

// refresh reads INFO from c, and on Cluster (key not nil) the node's id
// with it (CLUSTER MYID, in the same round trip), and records them as the
// facts of key. An ACL that denies CLUSTER MYID only leaves the node out of
// the view: the scripts then cannot tell a marker MIGRATE brought from
// another node (see grace_at in lua/lib.lua), which is logged once.
func (w *serverWatch) refresh(ctx context.Context, key *redis.Client, c redis.UniversalClient) *serverFacts {
	f := &serverFacts{gen: w.dials.Load(), read: time.Now()}
	var info *redis.StringCmd
	var myID *redis.StringCmd
	if key == nil {
		info = c.Info(ctx, "server", "memory", "stats", "persistence", "replication")
	} else {
		pipe := c.Pipeline()
		info = pipe.Info(ctx, "server", "memory", "stats", "persistence", "replication")
		myID = pipe.ClusterMyID(ctx)
		_, _ = pipe.Exec(ctx) // errors are read per command
	}
	err := info.Err()
	switch {
	case redis.IsPermissionError(err):
		f.infoErr = err // kept until CheckInterval passes (see usable)
	case err != nil:
		f.fetchErr = err // BUSY, LOADING, a timeout: read again by the next acquire
	default:
		parseFacts(f, info.Val())
		f.view = ":" + f.id // no start: the grace starts when the script runs
		if f.startUS > 0 {
			f.view = strconv.FormatInt(f.startUS, 10) + f.view
		}
	}
	if myID != nil && err == nil {
		switch id, err := myID.Result(); {
		case err == nil:
			f.node = id
			f.view += "#" + id
		case redis.IsPermissionError(err):
			w.myIDDenied.Do(func() {
				w.logger.Warn("redisstore: the server denies CLUSTER MYID to this user, so the restart grace cannot tell a slot's marker that a migration brought from another node; allow it with ACL SETUSER <user> +cluster|myid",
					slog.String("error", err.Error()))
			})
		default:
			f.fetchErr = err // read again by the next acquire
		}
	}
	w.mu.Lock()
	if old, ok := w.nodes.Load(key); !ok || old.(*serverFacts).gen <= f.gen {
		w.nodes.Store(key, f)
	}
	w.mu.Unlock()
	return f
}

// parseFacts fills f from an INFO reply.
func parseFacts(f *serverFacts, info string) {
	var now, up int64 = -1, -1
	promoted, primary := false, false
	var replID string
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "run_id":
			f.runID = v
		case "master_replid":
			replID = v
		case "server_time_usec":
			now, _ = strconv.ParseInt(v, 10, 64)
		case "uptime_in_seconds":
			up, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory":
			f.maxmem, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory_policy":
			f.policy = v
		case "evicted_keys":
			f.evicted, _ = strconv.ParseInt(v, 10, 64)
		case "aof_enabled":
			f.aof = v == "1"
		case "role":
			primary = v == "master"
		case "second_repl_offset":
			// Set when the process was promoted from a replica: it may lack
			// grants its old primary made until then, not only until its start.
			promoted = v != "-1"
		}
	}
	// Redis computes uptime_in_seconds as a difference of whole seconds, so
	// the real uptime is within a second of it either way; taking the later
	// bound means the grace never ends early. It is taken in whole seconds,
	// the second after the one the bound falls in, so that every client of
	// one process reads the same start (Redis 7.0 answers server_time_usec
	// and uptime_in_seconds from one cached clock) and the marker one of them
	// writes is the view of all (see grace_at in lua/lib.lua); a version that
	// reads them apart only makes views differ, which costs the scripts the
	// longer check. The start is then up to two seconds later than the real
	// one, and ahead of the server's clock in its first two seconds, where
	// the scripts count the grace from their own time instead.
	if !promoted {
		replID = "" // see identity
	}
	f.id = identity(f.runID, replID)
	if now > 0 && up >= 0 && primary && !promoted {
		f.startUS = (now/1_000_000 - up + 2) * 1_000_000 // a second or two ahead of now while up < 2
	}
}

// identity names a server process in its current role, as the restart
// marker records it: its run_id and, once it has been promoted from a
// replica (INFO's second_repl_offset is set), the replication id it serves
// under. A process keeps its run_id when it is demoted to a replica (and
// loses, in the resync, grants only it had made) and promoted again; its
// replication id changes with every promotion, so the marker it wrote before
// is not taken for its own. A primary never promoted is named by its run_id
// alone: its replication id also changes when its first replica attaches,
// which loses nothing.
func identity(runID, replID string) string {
	if runID == "" || replID == "" {
		return runID
	}
	return runID + "/" + replID
}

// evicting reports whether a server with these facts may evict keys.
func (f *serverFacts) evicting() bool {
	return f.maxmem > 0 && f.policy != "" && f.policy != "noeviction"
}

// usable returns the facts of the process behind key if the Store may grant
// on it, or why not. A refusal is judged again on facts read anew once they
// are CheckInterval old, so that a client refused for the server's
// configuration (or for INFO denied) sees the operator's fix without having
// to hold a lock for renewal rounds to re-read it.
func (s *Store) usable(ctx context.Context, key *redis.Client, c redis.UniversalClient, f *serverFacts) (*serverFacts, error) {
	err := s.check(ctx, c, f)
	if err != nil && time.Since(f.read) >= s.opts.CheckInterval {
		f = s.watch.refresh(ctx, key, c)
		err = s.check(ctx, c, f)
	}
	s.reloadSlots(ctx, err)
	return f, err
}

// reloadSlots asks a Cluster client to reload its slot map, in the
// background, when err is a transport error (not a reply from Redis).
// go-redis reloads it on a MOVED or ASK reply, but not when a node cannot be
// reached: a master that died and whose replica was promoted would be asked
// again by every acquire and renewal of its slots until the client's
// periodic reload (ClusterStateReloadInterval, a minute by default), and the
// holders of the locks that survived on the promoted replica would be told
// they lost them.
func (s *Store) reloadSlots(ctx context.Context, err error) {
	if cc, ok := s.rdb.(*redis.ClusterClient); ok && err != nil && !isReply(err) && ctx.Err() == nil {
		cc.ReloadState(ctx)
	}
}

// check returns why the Store must not grant on the process f describes,
// or nil.
func (s *Store) check(ctx context.Context, c redis.UniversalClient, f *serverFacts) error {
	off := s.opts.RestartGrace == NoRestartGrace
	switch {
	case f.fetchErr != nil:
		return f.fetchErr
	case f.infoErr != nil && !(off && s.opts.AllowEviction):
		return fmt.Errorf("%w (%v): allow it with ACL SETUSER <user> +info, or, for a server that loses no acknowledged write and never evicts, set Options.RestartGrace = NoRestartGrace and Options.AllowEviction", ErrNoServerInfo, f.infoErr)
	case f.infoErr != nil:
		return nil
	case f.evicting() && !s.opts.AllowEviction:
		return fmt.Errorf("%w: maxmemory is %d bytes with maxmemory-policy %s, so a full server deletes locks whose holders still run; run CONFIG SET maxmemory-policy noeviction (and set it in redis.conf), or use a Redis of its own for locks (or set Options.AllowEviction, knowing an evicted lock is granted again while its holder runs)",
			ErrEvictable, f.maxmem, f.policy)
	case off && !f.aof:
		return fmt.Errorf("%w: the server has appendonly no, so a crash loses recent grants; set appendonly yes and appendfsync always, or keep the grace (remove Options.RestartGrace = NoRestartGrace)", ErrNotDurable)
	case off:
		// INFO does not show appendfsync; CONFIG GET does, where the ACL
		// allows. Read once per process.
		f.fsync.once.Do(func() {
			if v, err := c.ConfigGet(ctx, "appendfsync").Result(); err == nil {
				f.fsync.value = v["appendfsync"]
			}
		})
		if v := f.fsync.value; v != "" && v != "always" {
			return fmt.Errorf("%w: the server has appendfsync %s, so a crash loses up to a second of grants; set appendfsync always, or keep the grace (remove Options.RestartGrace = NoRestartGrace)", ErrNotDurable, v)
		}
	}
	return nil
}

// recheck re-reads, at most every CheckInterval, the settings of every
// server the Store has used, so that a CONFIG SET at run time is caught by
// the next acquire, and logs the keys the servers evicted since the last
// look. Renewal rounds call it: the Store has no timer of its own.
func (s *Store) recheck(ctx context.Context) {
	w := &s.watch
	w.mu.Lock()
	if time.Since(w.checked) < s.opts.CheckInterval {
		w.mu.Unlock()
		return
	}
	w.checked = time.Now()
	w.mu.Unlock()
	type node struct {
		key  *redis.Client
		prev *serverFacts
	}
	var nodes []node
	w.nodes.Range(func(k, f any) bool {
		nodes = append(nodes, node{k.(*redis.Client), f.(*serverFacts)})
		return true
	})
	for _, n := range nodes {
		var c redis.UniversalClient = s.rdb
		if n.key != nil {
			c = n.key
		}
		f := w.refresh(ctx, n.key, c)
		if f.fetchErr != nil || f.infoErr != nil {
			continue
		}
		if n.prev.infoErr == nil && f.runID == n.prev.runID && f.evicted > n.prev.evicted {
			s.opts.Logger.Warn("redisstore: the lock server evicted keys: a lock among them can be granted again while its holder runs, until the holder's next renewal tells it",
				slog.Int64("evicted", f.evicted-n.prev.evicted), slog.Int64("maxmemory", f.maxmem), slog.String("maxmemory_policy", f.policy))
		}
	}
}
