package redisstore

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/redis/go-redis/v9"
)

// ShardedPubSub is how release messages travel on a Redis 7 Cluster (see
// Options.ShardedPubSub).
type ShardedPubSub int

// The values of Options.ShardedPubSub.
const (
	// ShardedAuto publishes with SPUBLISH and listens with SSUBSCRIBE and
	// SUBSCRIBE on a Cluster whose servers have sharded pub/sub (Redis 7 or
	// later: PUBSUB SHARDNUMSUB answers), as Redisson's default does; as on
	// a single server elsewhere.
	ShardedAuto ShardedPubSub = iota
	// ShardedOn publishes with SPUBLISH and listens with SSUBSCRIBE only, on
	// any Cluster client, without asking the servers, which must all be
	// Redis 7 or later.
	ShardedOn
	// ShardedOff publishes with PUBLISH and listens with SUBSCRIBE.
	ShardedOff
)

// pubsubMode is what the Store found out about the servers' sharded
// pub/sub: 0 not yet asked, modePlain or modeSharded.
type pubsubMode struct{ v atomic.Int32 }

const (
	modePlain   = 1
	modeSharded = 2
)

// sharded reports whether release messages go by SPUBLISH and SSUBSCRIBE.
// ShardedAuto asks a server once (PUBSUB SHARDNUMSUB, as Redisson does);
// a server that refuses it (before Redis 7, or an ACL without +pubsub)
// means plain pub/sub. A transport error is returned, and the next call
// asks again.
func (s *Store) sharded(ctx context.Context) (bool, error) {
	if !s.cluster || s.opts.ShardedPubSub == ShardedOff {
		return false, nil
	}
	if s.opts.ShardedPubSub == ShardedOn {
		return true, nil
	}
	switch s.pubsub.v.Load() {
	case modePlain:
		return false, nil
	case modeSharded:
		return true, nil
	}
	err := s.rdb.Do(ctx, "PUBSUB", "SHARDNUMSUB").Err()
	switch {
	case err == nil:
		s.pubsub.v.Store(modeSharded)
		return true, nil
	case isReply(err):
		s.pubsub.v.Store(modePlain)
		return false, nil
	}
	return false, fmt.Errorf("redisstore: ask whether the cluster has sharded pub/sub: %w", err)
}

// A pubScript is a script that publishes release messages on channels of
// the lock's slot, in two versions: [0] with PUBLISH, [1] with SPUBLISH.
// Redisson passes its publish command as an argument; two scripts keep the
// arguments of every script as they were.
type pubScript [2]*redis.Script

// withPub is withLib for a script that publishes on channels in KEYS. Its
// publications on other channels (revocations, named from ARGV, in another
// slot) stay plain in both versions.
func withPub(body string) *pubScript {
	return &pubScript{withLib(body), withLib(shardedPublish(body))}
}

var publishKeysRE = regexp.MustCompile(`redis\.call\('publish', KEYS\[`)

// shardedPublish turns a script's publications on channels in KEYS into
// SPUBLISH.
func shardedPublish(body string) string {
	return publishKeysRE.ReplaceAllLiteralString(body, "redis.call('spublish', KEYS[")
}

// pick returns the version of p for the Store's servers.
func (s *Store) pick(ctx context.Context, p *pubScript) (*redis.Script, error) {
	sharded, err := s.sharded(ctx)
	if err != nil {
		return nil, err
	}
	if sharded {
		return p[1], nil
	}
	return p[0], nil
}

// Watch implements [driver.Watcher]. Each kind has its own channel (readers
// and writers share one, and hear Redisson's RReadWriteLock releases on its
// channel too, see echoOne); the payload is Redisson's wake message (see
// wakeOf). With sharded pub/sub (see Options.ShardedPubSub) the channel is
// subscribed on its slot's master with SSUBSCRIBE, and under ShardedAuto
// with SUBSCRIBE too, both requests sent before either is awaited. A fair
// queue head's wake-up goes to its client's channel (see WatchClient), which
// Watch, naming no client, does not hear.
func (s *Store) Watch(ctx context.Context, kind driver.Kind, name string, wake func(driver.Wake)) (func(), error) {
	return s.watchChannels(ctx, kind, name, "", wake)
}

// WatchClient implements [driver.ClientWatcher]: for KindFair (which a
// starving Mutex waiter watches too) it subscribes the name's fair channel,
// for the wake-ups meant for every waiter, and client's own,
// leash_fair__channel:{name}:<client>, on which release.lua and withdraw.lua
// publish the wake-up (or hand-off) of a queue head whose owner is client's
// ("<client>:<n>"), in one SUBSCRIBE. Other kinds have no head wake-ups: it
// is Watch.
func (s *Store) WatchClient(ctx context.Context, kind driver.Kind, name, client string, wake func(driver.Wake)) (func(), error) {
	if client == "" || strings.Contains(client, ":") {
		return nil, fmt.Errorf("%w: redisstore: WatchClient %q: the client id must be non-empty and hold no ':' (owners are \"<client>:<n>\")",
			leash.ErrInvalidArgument, client)
	}
	return s.watchChannels(ctx, kind, name, client, wake)
}

// watchChannels is Watch and WatchClient.
func (s *Store) watchChannels(ctx context.Context, kind driver.Kind, name, client string, wake func(driver.Wake)) (func(), error) {
	if s.err != nil {
		return nil, s.err
	}
	n := s.key(name)
	chans := []string{watchChannel(kind, n)}
	switch {
	case kind == driver.KindFair && client != "":
		chans = append(chans, clientFairChannel(n, client))
	case kind == driver.KindRead || kind == driver.KindWrite:
		// And Redisson's, for a Java client's releases (see echoOne).
		chans = append(chans, redissonRWChannel(n))
	}
	sharded, err := s.sharded(ctx)
	switch {
	case err != nil:
		return nil, err
	case !sharded:
		return s.notify.watch(ctx, chans, wake)
	case s.opts.ShardedPubSub == ShardedOn:
		return s.shards.watch(ctx, chans, wake)
	}
	type result struct {
		stop func()
		err  error
	}
	plain := make(chan result, 1)
	// Owner: this watch, which waits for it. Ends when the SUBSCRIBE is
	// confirmed or fails (SubscribeTimeout, ctx, Close).
	go func() {
		stop, err := s.notify.watch(ctx, chans, wake)
		plain <- result{stop, err}
	}()
	stopS, errS := s.shards.watch(ctx, chans, wake)
	p := <-plain
	if errS != nil || p.err != nil {
		if stopS != nil {
			stopS()
		}
		if p.stop != nil {
			p.stop()
		}
		if errS != nil {
			return nil, errS
		}
		return nil, p.err
	}
	var once sync.Once
	return func() { once.Do(func() { stopS(); p.stop() }) }, nil
}

// shardNotifiers keeps one sharded notifier per Cluster slot that has
// watched channels. go-redis connects a sharded pub/sub connection to the
// master of its first channel's slot, and reconnects it there after a
// failure, so a connection per slot follows its slot through failovers; a
// slot that moves (migration, demotion of its master) is followed by
// notifier.moved. A slot's notifier, and its connection, is closed Linger
// after its last watch ended.
type shardNotifiers struct {
	s      *Store
	mu     sync.Mutex
	slots  map[int]*shardNotifier
	closed bool
	wg     sync.WaitGroup // lingering closes under way
}

// A shardNotifier is the notifier of one slot and the count of its watches.
type shardNotifier struct {
	n     notifier
	slot  int
	refs  int
	timer *time.Timer // closes it after the linger; nil while watched
}

func (m *shardNotifiers) init(s *Store) {
	m.s = s
	m.slots = make(map[int]*shardNotifier)
}

// watch subscribes wake to chans, all of one slot, on the slot's notifier.
func (m *shardNotifiers) watch(ctx context.Context, chans []string, wake func(driver.Wake)) (func(), error) {
	sl := slot(chans[0])
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errClosed
	}
	e := m.slots[sl]
	if e == nil {
		e = &shardNotifier{slot: sl}
		e.n.init(m.s, true)
		m.slots[sl] = e
	}
	e.refs++
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	m.mu.Unlock()
	stop, err := e.n.watch(ctx, chans, wake)
	if err != nil {
		m.release(e)
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { stop(); m.release(e) }) }, nil
}

// release ends one watch of e; the last one closes e, after the linger.
func (m *shardNotifiers) release(e *shardNotifier) {
	m.mu.Lock()
	e.refs--
	if e.refs > 0 || m.closed || m.slots[e.slot] != e {
		m.mu.Unlock()
		return
	}
	if linger := m.s.opts.Linger; linger > 0 {
		e.timer = time.AfterFunc(linger, func() {
			m.mu.Lock()
			if e.refs > 0 || m.closed || m.slots[e.slot] != e {
				m.mu.Unlock()
				return
			}
			delete(m.slots, e.slot)
			m.wg.Add(1)
			m.mu.Unlock()
			defer m.wg.Done()
			e.n.close()
		})
		m.mu.Unlock()
		return
	}
	delete(m.slots, e.slot)
	m.mu.Unlock()
	e.n.close()
}

// close closes every slot's notifier.
func (m *shardNotifiers) close() {
	m.mu.Lock()
	m.closed = true
	all := make([]*shardNotifier, 0, len(m.slots))
	for _, e := range m.slots {
		if e.timer != nil {
			e.timer.Stop()
		}
		all = append(all, e)
	}
	clear(m.slots)
	m.mu.Unlock()
	for _, e := range all {
		e.n.close()
	}
	m.wg.Wait()
}

// awaitSlotMap reloads the Cluster client's slot map until the master it
// names for key's slot says it serves the slot (CLUSTER SHARDS asked of
// that node: a node knows best which slots it lost), or ctx ends. A sharded
// pub/sub connection dials the master its client's map names: one dialed on
// a stale map lands on the node that just unsubscribed it, which after a
// failover is a replica that accepts SSUBSCRIBE but does not hear the new
// master's SPUBLISH.
func (s *Store) awaitSlotMap(ctx context.Context, key string) {
	cc, ok := s.rdb.(*redis.ClusterClient)
	if !ok {
		return
	}
	sl := slot(key)
	for {
		cc.ReloadState(ctx)
		if have, err := cc.MasterForKey(ctx, key); err == nil {
			if want, err := clusterMaster(ctx, have, sl); err == nil && want == have.Options().Addr {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// clusterMaster returns the address of slot's master as node sees it
// (CLUSTER SHARDS: Redis 7, as sharded pub/sub is).
func clusterMaster(ctx context.Context, node *redis.Client, sl int) (string, error) {
	shards, err := node.ClusterShards(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, sh := range shards {
		if !slices.ContainsFunc(sh.Slots, func(r redis.SlotRange) bool { return r.Start <= int64(sl) && int64(sl) <= r.End }) {
			continue
		}
		for _, n := range sh.Nodes {
			if n.Role == "master" {
				return net.JoinHostPort(n.Endpoint, strconv.FormatInt(n.Port, 10)), nil
			}
		}
	}
	return "", fmt.Errorf("redisstore: slot %d has no master", sl)
}
