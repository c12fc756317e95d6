package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/redis/go-redis/v9"
)

// notifier multiplexes every watched lock of a Store over one pub/sub
// connection, read by one goroutine. A channel is subscribed while at least
// one watch needs it; Watch returns only once Redis has confirmed the
// SUBSCRIBE, so a release after Watch returns is never missed. The
// connection is pinged when idle and replaced when a ping goes unanswered;
// after a replacement or a reconnect, every watcher is woken, because a
// release may have been published while no one was listening. A sharded
// notifier does the same for the shard channels of one Cluster slot (see
// shardNotifiers).
type notifier struct {
	s *Store
	// sharded makes this the notifier of one Cluster slot's shard channels
	// (SSUBSCRIBE on the slot's master; see shard.go) rather than of plain
	// channels.
	sharded bool
	mu      sync.Mutex
	ps      *redis.PubSub
	chans   map[string]*channel
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closed  bool
}

// A channel is the state of one subscribed channel.
type channel struct {
	watchers    []*watcher
	outstanding int           // SUBSCRIBE requests not yet confirmed
	ready       chan struct{} // closed on the first confirmation
	confirmed   bool
	// rewake makes the next confirmation wake every watcher: it answers a
	// replacement connection's SUBSCRIBE, before which a release may have
	// been published with no one listening.
	rewake    bool
	idleSince time.Time // when the last watcher left; zero while watched
}

// A watcher is one Watch's, which hears wake messages, or one
// WatchRevokes's, which hears raw payloads (revocations) and nothing of a
// reconnect.
type watcher struct {
	wake func(driver.Wake)
	raw  func(payload string)
}

func (n *notifier) init(s *Store, sharded bool) {
	n.s, n.sharded = s, sharded
	n.chans = make(map[string]*channel)
	life, cancel := context.WithCancel(context.Background())
	n.ctx = context.WithValue(life, pubsubLife{}, &pubsubOwner{s: s, life: life})
	n.cancel = cancel
}

// pubsubLife is the context key under which a notifier's contexts carry
// its pubsubOwner, for the dial hook.
type pubsubLife struct{}

// A pubsubOwner is the Store and the life of the notifier a pub/sub
// connection is dialed for.
type pubsubOwner struct {
	s    *Store
	life context.Context
}

// pubsubCloser is the go-redis hook that closes a notifier's pub/sub
// connections when the notifier ends. go-redis bounds the reads of a
// connection it is setting up (HELLO, SUBSCRIBE) by its ReadTimeout and a
// context's deadline, not by the context's cancellation: a notifier whose
// server is black-holed would otherwise keep Close waiting that long for the
// subscription under way (replace runs it holding n.mu, which close takes).
// A closed connection fails those reads at once.
type pubsubCloser struct{ s *Store }

func (h pubsubCloser) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := next(ctx, network, addr)
		if o, ok := ctx.Value(pubsubLife{}).(*pubsubOwner); ok && err == nil && o.s == h.s {
			raw := cn // the AfterFunc may run at once: it must not read cn, written below
			stop := context.AfterFunc(o.life, func() { _ = raw.Close() })
			cn = &lifeConn{Conn: raw, stop: stop}
		}
		return cn, err
	}
}

func (pubsubCloser) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (pubsubCloser) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// lifeConn is a pub/sub connection that, closed before its notifier ends,
// stops waiting for the end.
type lifeConn struct {
	net.Conn
	stop func() bool
}

func (c *lifeConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

// hookPubSub adds the pubsubCloser to the clients that dial rdb's pub/sub
// connections: rdb itself, or every Cluster node's client made from now on.
func hookPubSub(s *Store, rdb redis.UniversalClient) {
	switch c := rdb.(type) {
	case *redis.Client:
		c.AddHook(pubsubCloser{s})
	case *redis.ClusterClient:
		c.OnNewNode(func(node *redis.Client) { node.AddHook(pubsubCloser{s}) })
	}
}

// lifeCtx returns ctx carrying the notifier's owner, so that a connection
// the call dials is closed when the notifier ends.
func (n *notifier) lifeCtx(ctx context.Context) context.Context {
	return context.WithValue(ctx, pubsubLife{}, n.ctx.Value(pubsubLife{}))
}

var errClosed = errors.New("redisstore: store closed")

func (n *notifier) watch(ctx context.Context, chans []string, wake func(driver.Wake)) (func(), error) {
	return n.add(ctx, chans, &watcher{wake: wake})
}

// add subscribes w to chans, with one SUBSCRIBE for those not subscribed
// yet, and returns once every subscription is confirmed.
func (n *notifier) add(ctx context.Context, chans []string, w *watcher) (func(), error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errClosed
	}
	n.startLocked()
	readies := make([]chan struct{}, 0, len(chans))
	var send []string
	for _, ch := range chans {
		c := n.chans[ch]
		if c == nil {
			c = &channel{ready: make(chan struct{})}
			n.chans[ch] = c
		}
		c.watchers = append(c.watchers, w)
		c.idleSince = time.Time{}
		if !c.confirmed && c.outstanding == 0 {
			c.outstanding++
			send = append(send, ch)
		}
		readies = append(readies, c.ready)
	}
	var err error
	if len(send) > 0 {
		// Issued under n.mu so that SUBSCRIBE and UNSUBSCRIBE of one channel
		// reach Redis in the order of the state changes. It only writes to
		// the connection; the confirmations are read by the reader goroutine.
		if err = n.subscribe(ctx, n.ps, send...); err != nil {
			for _, ch := range send {
				n.chans[ch].outstanding--
			}
		}
	}
	n.mu.Unlock()
	stop := func() { n.unwatch(chans, w) }
	if err != nil {
		stop()
		return nil, fmt.Errorf("redisstore: subscribe %q: %w", strings.Join(chans, " "), err)
	}
	timer := time.NewTimer(n.s.opts.SubscribeTimeout)
	defer timer.Stop()
	for i, ready := range readies {
		select {
		case <-ready:
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-timer.C:
			stop()
			return nil, fmt.Errorf("redisstore: subscribe %q: not confirmed within %v", chans[i], n.s.opts.SubscribeTimeout)
		case <-n.ctx.Done():
			stop()
			return nil, errClosed
		}
	}
	var once sync.Once
	return func() { once.Do(stop) }, nil
}

// startLocked opens the pub/sub connection and starts its reader, once.
func (n *notifier) startLocked() {
	if n.ps != nil {
		return
	}
	n.ps = n.newPubSub()
	// Owner: the Store. Stops when Close cancels n.ctx.
	n.wg.Go(n.read)
}

// newPubSub returns a pub/sub connection, not yet dialed: it connects on
// the first subscription, a sharded one to the master of that channel's slot.
func (n *notifier) newPubSub() *redis.PubSub {
	if n.sharded {
		return n.s.rdb.(*redis.ClusterClient).SSubscribe(n.ctx)
	}
	return n.s.rdb.Subscribe(n.ctx)
}

// subscribe sends SSUBSCRIBE or SUBSCRIBE.
func (n *notifier) subscribe(ctx context.Context, ps *redis.PubSub, chans ...string) error {
	ctx = n.lifeCtx(ctx)
	if n.sharded {
		return ps.SSubscribe(ctx, chans...)
	}
	return ps.Subscribe(ctx, chans...)
}

// unwatch removes a watcher from chans; the last one out of a channel
// unsubscribes it, unless a SUBSCRIBE is still unconfirmed (then the
// confirmation does it).
func (n *notifier) unwatch(chans []string, w *watcher) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ch := range chans {
		c := n.chans[ch]
		if c == nil {
			continue
		}
		if i := slices.Index(c.watchers, w); i >= 0 {
			c.watchers = slices.Delete(c.watchers, i, i+1)
		}
		n.dropIfIdleLocked(ch, c)
	}
}

func (n *notifier) dropIfIdleLocked(ch string, c *channel) {
	if len(c.watchers) > 0 || c.outstanding > 0 || n.closed {
		return
	}
	if n.s.opts.Linger > 0 && c.confirmed {
		if c.idleSince.IsZero() {
			c.idleSince = time.Now() // sweep unsubscribes it after the linger
		}
		return
	}
	n.unsubscribeLocked(ch)
}

// unsubscribeLocked forgets ch and unsubscribes it.
func (n *notifier) unsubscribeLocked(ch string) {
	delete(n.chans, ch)
	ctx, cancel := context.WithTimeout(n.ctx, n.s.opts.SubscribeTimeout)
	defer cancel()
	// On failure the connection is replaced, without ch.
	if n.sharded {
		_ = n.ps.SUnsubscribe(ctx, ch)
	} else {
		_ = n.ps.Unsubscribe(ctx, ch)
	}
}

// sweep unsubscribes the channels that lingered unwatched long enough.
func (n *notifier) sweep(now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch, c := range n.chans {
		if !c.idleSince.IsZero() && now.Sub(c.idleSince) >= n.s.opts.Linger {
			n.unsubscribeLocked(ch)
		}
	}
}

// read is the reader goroutine: it routes confirmations and messages, keeps
// the connection healthy, and sweeps lingering channels. When nothing has
// been heard for HealthCheck it pings; when the ping goes unanswered for
// another HealthCheck, the connection is dead and is replaced.
func (n *notifier) read() {
	hc, linger := n.s.opts.HealthCheck, n.s.opts.Linger
	wait := hc
	if linger > 0 {
		wait = min(wait, max(linger/2, 10*time.Millisecond))
	}
	var (
		lastHeard = time.Now()
		pingSent  time.Time // zero when no ping is outstanding
		lastSweep = time.Now()
	)
	for {
		now := time.Now()
		if linger > 0 && now.Sub(lastSweep) >= linger/2 {
			n.sweep(now)
			lastSweep = now
		}
		n.mu.Lock()
		ps := n.ps
		n.mu.Unlock()
		msg, err := ps.ReceiveTimeout(n.ctx, wait)
		if n.ctx.Err() != nil {
			return
		}
		now = time.Now()
		if err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				switch {
				case !pingSent.IsZero() && now.Sub(pingSent) >= hc:
					n.replace(ps) // the ping went unanswered: the connection is dead
					pingSent, lastHeard = time.Time{}, now
				case pingSent.IsZero() && now.Sub(lastHeard) >= hc:
					// Quiet for a while: ask for a sign of life.
					pctx, cancel := context.WithTimeout(n.ctx, hc)
					_ = ps.Ping(pctx)
					cancel()
					pingSent = now
				}
			default:
				// go-redis reconnects and resubscribes on the next receive;
				// do not spin while the server is down. On Cluster the slot
				// map is reloaded first: the node may have failed over.
				n.s.reloadSlots(n.ctx, err)
				select {
				case <-time.After(100 * time.Millisecond):
				case <-n.ctx.Done():
					return
				}
				if n.sharded && isReply(err) && !n.s.stayOnMoves {
					// MOVED: the slot's channels went to another node
					// while this connection subscribed them.
					n.moved(ps)
				}
			}
			continue
		}
		lastHeard, pingSent = now, time.Time{}
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				n.confirmed(m.Channel)
			case "sunsubscribe":
				if n.unsubscribedByServer(m.Channel) && !n.s.stayOnMoves {
					n.moved(ps)
				}
			}
		case *redis.Message:
			payload := m.Payload
			if strings.HasPrefix(m.Channel, redissonRWPrefix+":") {
				var java bool
				if payload, java = redissonRWWake(payload); !java {
					continue // leash's own release, heard on leash's channel
				}
			}
			n.deliver(m.Channel, payload)
		}
	}
}

// confirmed handles a SUBSCRIBE confirmation. One that no request is waiting
// for is a resubscription after a reconnect: messages may have been missed.
func (n *notifier) confirmed(ch string) {
	n.mu.Lock()
	c := n.chans[ch]
	if c == nil {
		n.mu.Unlock()
		return
	}
	resub := c.outstanding == 0 || c.rewake
	if c.outstanding > 0 {
		c.outstanding--
	}
	c.rewake = false
	if !c.confirmed {
		c.confirmed = true
		close(c.ready)
	}
	n.dropIfIdleLocked(ch, c)
	n.mu.Unlock()
	if resub {
		n.wakeAll(ch)
	}
}

// unsubscribedByServer reports whether an SUNSUBSCRIBE notice for ch is the
// server's, not the answer to the Store's own SUNSUBSCRIBE: a node that
// loses a slot (migrated, or the node demoted by a failover) unsubscribes
// every client from the slot's shard channels.
func (n *notifier) unsubscribedByServer(ch string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.chans[ch]
	return c != nil && c.confirmed && c.outstanding == 0
}

// moved follows the slot of a sharded notifier to its new master: once the
// master the client's slot map names says it serves the slot (see
// awaitSlotMap), the channels are subscribed on a new connection, which
// wakes every watcher (a release may have been published on the new master
// before they were subscribed there).
func (n *notifier) moved(ps *redis.PubSub) {
	n.mu.Lock()
	var ch string
	for c := range n.chans {
		ch = c
		break
	}
	n.mu.Unlock()
	if ch != "" {
		ctx, cancel := context.WithTimeout(n.ctx, n.s.opts.SubscribeTimeout)
		n.s.awaitSlotMap(ctx, ch)
		cancel()
	}
	n.replace(ps)
}

// Wake messages on the wire, as Redisson's lock, fair lock and read-write
// lock publish them; any other payload is the owner at the head of a fair
// queue.
const (
	msgOne     = "0" // one waiter: a lock or a permit was released
	msgAll     = "1" // every waiter
	msgReaders = "r" // every waiting reader
	msgWriter  = "w" // one waiting writer
)

// Leash's RWMutex releases are published on Redisson's RReadWriteLock
// channel, redisson_rwlock:{name}, as well as on leash's, so that Java
// waiters are woken by them; a Watch of a readers-writer lock subscribes
// both, to be woken by Java releases too. Leash publishes "00" and "01"
// there, which Redisson's waiters parse as its numbers 0 (wake one) and 1
// (wake all), and which leash's waiters skip: they were woken by the
// release's message on leash's channel, which says whom to wake. Anything
// else on that channel is a Java client's release, and wakes every leash
// waiter (Redisson's "0" is not for a particular leash waiter).
const (
	echoOne = "00"
	echoAll = "01"
)

// redissonRWWake returns the wake message a message on Redisson's
// readers-writer channel stands for, and false for leash's own (see
// echoOne).
func redissonRWWake(payload string) (string, bool) {
	if payload == echoOne || payload == echoAll {
		return "", false
	}
	return msgAll, true
}

// wakeOf decodes a release message.
func wakeOf(payload string) driver.Wake {
	switch payload {
	case msgOne:
		return driver.Wake{To: driver.WakeOne}
	case msgAll, "":
		return driver.Wake{To: driver.WakeAll}
	case msgReaders:
		return driver.Wake{To: driver.WakeReaders}
	case msgWriter:
		return driver.Wake{To: driver.WakeWriter}
	}
	if isHandoff(payload) {
		return handoffWake(payload)
	}
	return driver.Wake{To: driver.WakeHead, Head: payload}
}

// deliver passes a message to the watchers of ch: a wake message, decoded,
// to Watch's (the leash core turns it into the local waiters it is for:
// one, all, the readers, one writer, a queue head), and the payload as it
// is to WatchRevokes's.
func (n *notifier) deliver(ch, payload string) {
	for _, w := range n.watchers(ch) {
		if w.raw != nil {
			w.raw(payload)
		} else {
			w.wake(n.s.givenBack.filter(wakeOf(payload)))
		}
	}
}

// wakeAll wakes every Watch of ch: messages may have been missed.
func (n *notifier) wakeAll(ch string) {
	for _, w := range n.watchers(ch) {
		if w.wake != nil {
			w.wake(driver.Wake{To: driver.WakeAll})
		}
	}
}

// watchers returns the watchers of ch.
func (n *notifier) watchers(ch string) []*watcher {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c := n.chans[ch]; c != nil {
		return slices.Clone(c.watchers)
	}
	return nil
}

// replace closes a dead pub/sub connection and subscribes every watched
// channel on a new one. It wakes every watcher at once (a release may have
// been published while the old connection was dead), and again when the
// new subscription is confirmed (one may have been published before it
// was live); a Watch that starts meanwhile returns once it is.
func (n *notifier) replace(old *redis.PubSub) {
	n.mu.Lock()
	if n.ps != old || n.closed {
		n.mu.Unlock()
		return
	}
	_ = old.Close()
	n.ps = n.newPubSub()
	var chans []string
	for ch, c := range n.chans {
		chans = append(chans, ch)
		c.outstanding, c.rewake = 1, true
		if c.confirmed {
			c.confirmed, c.ready = false, make(chan struct{})
		}
	}
	if len(chans) > 0 {
		ctx, cancel := context.WithTimeout(n.ctx, n.s.opts.SubscribeTimeout)
		if err := n.subscribe(ctx, n.ps, chans...); err != nil {
			for _, c := range n.chans {
				c.outstanding = 0 // go-redis resubscribes on reconnect; those confirmations wake
			}
		}
		cancel()
	}
	n.mu.Unlock()
	for _, ch := range chans {
		n.wakeAll(ch)
	}
}

func (n *notifier) close() {
	// Cancel first: a replacement subscribing under n.mu (replace) to a
	// server that does not answer gives up at once, instead of holding
	// the lock, and Close, for its SubscribeTimeout.
	n.cancel()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	ps := n.ps
	n.mu.Unlock()
	n.cancel()
	if ps != nil {
		_ = ps.Close()
	}
	n.wg.Wait()
}
