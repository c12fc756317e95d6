package leash

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/leash-go/leash/driver"
)

// waiters groups the Client's waiting calls by the store watch they need,
// so that one watch per (kind, name) serves every local waiter, and each
// notification wakes exactly the waiters it is for. A watch stays
// established for watchLinger after a waiter that waited left it: a Lock of
// that name in the meantime joins it before its first attempt (see warm),
// and so needs no second attempt after subscribing, where a name is
// contended again and again. (A Lock that joins and is granted at once does
// not extend the linger: a name that stopped being contended loses its
// watch.)
type waiters struct {
	c      *Client
	mu     sync.Mutex
	groups map[watchKey]*waitGroup
	closed bool // the Client closed: watches end with their last waiter
}

// watchLinger is how long a watch stays established after a waiter that
// waited left it. A lingering watch costs what the store's watch costs: a
// subscribed channel on Redis (redisstore keeps it subscribed as long
// anyway, see its Options.Linger), server-side watches on etcd and
// ZooKeeper, a name in the poll on MySQL.
const watchLinger = time.Second

// watchKey names one store watch: readers and writers share one, as do the
// holds that are one lock in the store but notify differently.
type watchKey struct {
	kind driver.Kind
	name string
}

func watchKeyOf(kind driver.Kind, name string) watchKey {
	if kind == driver.KindRead {
		kind = driver.KindWrite
	}
	return watchKey{kind, name}
}

// A waitGroup is the local waiters of one watch.
type waitGroup struct {
	key   watchKey
	ready chan struct{} // closed once the watch is established or failed
	err   error         // why the watch failed; set before ready is closed
	stop  func()        // ends the watch; set before ready is closed
	list  []*waiter     // in arrival order
	// The fields below are guarded by waiters.mu.
	// until is when the watch ends once it has no waiter: watchLinger after
	// the last waiter that waited left.
	until time.Time
	// idle ends the watch at until; nil while the group has waiters.
	idle *time.Timer
	// starved is when a Lock of this Client last started starving on the
	// name (this group's key is the name's KindFair watch), or zero.
	starved time.Time
}

// A waiter is one waiting call. ch holds at most one pending wake-up, so a
// notification that arrives while the waiter is busy trying is kept. A
// MultiLock waiter sits in one group per name.
type waiter struct {
	groups []*waitGroup
	kind   driver.Kind
	owner  string
	ch     chan struct{}
	poll   bool // no watch: the waiter polls
	// waited is set once the call had an attempt refused (from the start
	// for a waiter that joins after one): its leaving extends its groups'
	// linger.
	waited bool
	// handed is the last grant a release handed to this waiter's owner
	// (see handoff.go): its fencing token (0: none) and lease. Guarded by
	// waiters.mu, like the group lists.
	handed driver.Wake
}

func (ws *waiters) init(c *Client) {
	ws.c = c
	ws.groups = make(map[watchKey]*waitGroup)
}

// polling returns a waiter that no notification wakes.
func (ws *waiters) polling() *waiter { return &waiter{ch: make(chan struct{}, 1), poll: true} }

// watchFor joins the watches for kind on names. When the store cannot watch,
// it logs and returns a polling waiter: waiting degrades, it does not fail.
// The error is ctx's or ErrClosed.
func (c *Client) watchFor(ctx context.Context, kind driver.Kind, names []string, owner string) (*waiter, error) {
	if c.caps.watch == nil {
		// The store sends no notifications: waiters try again when the
		// holder's lease runs out, or after a second.
		return c.waiters.polling(), nil
	}
	w, err := c.waiters.join(ctx, kind, names, owner)
	switch {
	case err == nil:
		return w, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case c.closed.Load():
		return nil, ErrClosed
	}
	c.log.Warn("cannot watch for releases; polling", slog.String(attrLock, names[0]), slog.Any(attrError, err))
	return c.waiters.polling(), nil
}

// A sleeper is the reusable timer of one waiting call.
type sleeper struct{ t *time.Timer }

func (s *sleeper) stop() {
	if s.t != nil {
		s.t.Stop()
	}
}

// sleep waits until w is woken or d passes. It returns ctx's error or
// ErrClosed when the wait ends because ctx or the Client did.
func (c *Client) sleep(ctx context.Context, w *waiter, s *sleeper, d time.Duration) error {
	if s.t == nil {
		s.t = time.NewTimer(d)
	} else {
		s.t.Reset(d)
	}
	select {
	case <-w.ch:
	case <-s.t.C:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrClosed
	}
	return nil
}

// join adds a waiter for kind on names and returns once the store's watches
// are established, so that any notification from then on reaches it.
func (ws *waiters) join(ctx context.Context, kind driver.Kind, names []string, owner string) (*waiter, error) {
	// Joined after a refused attempt: the call waits.
	w := &waiter{kind: kind, owner: owner, ch: make(chan struct{}, 1), waited: true}
	for _, name := range names {
		if err := ws.joinOne(ctx, w, watchKeyOf(kind, name)); err != nil {
			ws.leave(w)
			return nil, err
		}
	}
	return w, nil
}

func (ws *waiters) joinOne(ctx context.Context, w *waiter, key watchKey) error {
	for {
		ws.mu.Lock()
		g := ws.groups[key]
		creator := g == nil
		if creator {
			g = &waitGroup{key: key, ready: make(chan struct{})}
			ws.groups[key] = g
		}
		ws.addLocked(w, g)
		ws.mu.Unlock()

		if creator {
			stop, err := ws.c.watch(ctx, key, func(msg driver.Wake) { ws.wake(g, msg) })
			ws.mu.Lock()
			g.stop, g.err = stop, err
			close(g.ready)
			if err != nil && ws.groups[key] == g {
				delete(ws.groups, key)
			}
			ws.mu.Unlock()
			return err
		}
		select {
		case <-g.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
		if g.err != nil {
			ws.leaveGroup(w, g)
			if errors.Is(g.err, context.Canceled) || errors.Is(g.err, context.DeadlineExceeded) {
				continue // the first waiter gave up while subscribing; try ourselves
			}
			return g.err
		}
		return nil
	}
}

// addLocked adds w to g; a lingering group has waiters again. ws.mu must
// be held.
func (ws *waiters) addLocked(w *waiter, g *waitGroup) {
	if g.idle != nil {
		g.idle.Stop()
		g.idle = nil
	}
	g.list = append(g.list, w)
	w.groups = append(w.groups, g)
}

// warm returns a waiter for kind on name when the watch it needs is
// established already (another waiter has it, or it lingers, see waiters),
// nil otherwise: it never waits for a watch. A Lock that joins before its
// first attempt hears every release from then on, and need not try again
// after subscribing.
func (ws *waiters) warm(kind driver.Kind, name, owner string) *waiter {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	g := ws.warmLocked(watchKeyOf(kind, name), false)
	if g == nil {
		return nil // an uncontended Lock allocates nothing here
	}
	w := &waiter{kind: kind, owner: owner, ch: make(chan struct{}, 1)}
	ws.addLocked(w, g)
	return w
}

// joinWarm adds w to the group of key, and reports true, when that group's
// watch is established (see warmLocked); it never waits for a watch.
func (ws *waiters) joinWarm(w *waiter, key watchKey, hot bool) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	g := ws.warmLocked(key, hot)
	if g != nil {
		ws.addLocked(w, g)
	}
	return g != nil
}

// warmLocked returns the group of key when its watch is established, nil
// otherwise. With hot set, only a group on which a Lock started starving
// less than watchLinger ago counts (see starved). ws.mu must be held.
func (ws *waiters) warmLocked(key watchKey, hot bool) *waitGroup {
	g := ws.groups[key]
	if g == nil || ws.closed || hot && (g.starved.IsZero() || time.Since(g.starved) >= watchLinger) {
		return nil
	}
	select {
	case <-g.ready:
	default:
		return nil // still subscribing
	}
	if g.err != nil {
		return nil
	}
	return g
}

// starvedOn records that a Lock started starving on the name whose KindFair
// watch key is: a Lock of the name soon after marks it at once (see
// Client.acquire).
func (ws *waiters) starvedOn(key watchKey) {
	ws.mu.Lock()
	if g := ws.groups[key]; g != nil {
		g.starved = time.Now()
	}
	ws.mu.Unlock()
}

// close ends the lingering watches, and makes every other end with its last
// waiter.
func (ws *waiters) close() {
	ws.mu.Lock()
	ws.closed = true
	var stops []func()
	for key, g := range ws.groups {
		if g.idle != nil {
			g.idle.Stop()
			g.idle = nil
			delete(ws.groups, key)
			stops = append(stops, g.stop)
		}
	}
	ws.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// watch starts the store's watch of key for this Client: through
// WatchClient when the store has it, so that a wake-up for a queue head of
// this Client reaches it (and the wake-ups of other Clients' heads do not).
func (c *Client) watch(ctx context.Context, key watchKey, wake func(driver.Wake)) (func(), error) {
	return driver.WatchClient(ctx, c.caps.watch, key.kind, key.name, c.id, wake)
}

// leave removes a waiter from its groups. A wake-up it received but did not
// use passes to another waiter; the last waiter out of a group ends its watch.
// It is one critical section with wake, so that no wake-up can reach the
// waiter after its pending one was looked for.
func (ws *waiters) leave(w *waiter) {
	ws.mu.Lock()
	var stops []func()
	for _, g := range w.groups {
		if stop := ws.leaveGroupLocked(w, g); stop != nil {
			stops = append(stops, stop)
		}
	}
	select {
	case <-w.ch:
		for _, g := range w.groups {
			ws.wakeLocked(g, driver.Wake{To: driver.WakeOne})
		}
	default:
	}
	w.groups = nil
	ws.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

func (ws *waiters) leaveGroup(w *waiter, g *waitGroup) {
	ws.mu.Lock()
	stop := ws.leaveGroupLocked(w, g)
	ws.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// leaveGroupLocked removes w from g. When w was its last waiter, g's watch
// lingers until g.until (see waiters), or is returned to stop when that has
// passed or the Client closed. ws.mu must be held.
func (ws *waiters) leaveGroupLocked(w *waiter, g *waitGroup) (stop func()) {
	if i := slices.Index(g.list, w); i >= 0 {
		g.list = slices.Delete(g.list, i, i+1)
	}
	now := time.Now()
	if w.waited {
		g.until = now.Add(watchLinger)
	}
	if len(g.list) == 0 && ws.groups[g.key] == g && g.idle == nil {
		select {
		case <-g.ready:
			left := g.until.Sub(now)
			if ws.closed || left <= 0 {
				delete(ws.groups, g.key)
				return g.stop
			}
			g.idle = time.AfterFunc(left, func() { ws.expire(g) })
		default: // the creator is still subscribing and will clean up
		}
	}
	return nil
}

// expire ends g's watch when it is idle and its linger has passed. A timer
// of an earlier idle spell, stopped too late, finds the linger not passed
// (until only moves later) or the group with waiters.
func (ws *waiters) expire(g *waitGroup) {
	ws.mu.Lock()
	if g.idle == nil || time.Now().Before(g.until) || ws.groups[g.key] != g {
		ws.mu.Unlock()
		return // a waiter came back, close ended it, or the linger was extended
	}
	g.idle = nil
	delete(ws.groups, g.key)
	ws.mu.Unlock()
	g.stop()
}

// wake delivers a notification to g's waiters. It never blocks, as
// driver.Watcher requires.
func (ws *waiters) wake(g *waitGroup, msg driver.Wake) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.wakeLocked(g, msg)
}

// wakeLocked is wake with ws.mu held.
func (ws *waiters) wakeLocked(g *waitGroup, msg driver.Wake) {
	signal := func(w *waiter) bool {
		select {
		case w.ch <- struct{}{}:
			return true
		default:
			return false
		}
	}
	switch msg.To {
	case driver.WakeOne: // the longest-waiting waiter without a pending wake-up
		for _, w := range g.list {
			if signal(w) {
				return
			}
		}
	case driver.WakeReaders:
		for _, w := range g.list {
			if w.kind == driver.KindRead {
				signal(w)
			}
		}
	case driver.WakeWriter:
		for _, w := range g.list {
			if w.kind == driver.KindWrite && signal(w) {
				return
			}
		}
	case driver.WakeHead: // the owner at the head of a fair queue
		for _, w := range g.list {
			if w.owner == msg.Head {
				if msg.Fence != 0 {
					w.handed = msg // kept even when a wake-up is already pending
				}
				signal(w)
				return
			}
		}
	default: // WakeAll, and a message this version does not know
		for _, w := range g.list {
			signal(w)
		}
	}
}
