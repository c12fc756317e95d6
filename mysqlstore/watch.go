package mysqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/leash-go/leash/driver"
)

// MySQL and MariaDB have no notification channel a release could publish
// on (nothing like LISTEN/NOTIFY or pub/sub), so a Store tells its waiters
// of releases in two ways:
//
//   - a release, or force release, made through the Store wakes the
//     Store's waiters of that name at once, with no round trip;
//   - a release made elsewhere (another process, another Store) is seen by
//     polling: one poller per Store per watched name, shared by all the
//     Store's waiters of that name, reads the name's row (a consistent,
//     non-locking read by primary key) at an interval of a quarter of the
//     time since it last saw the lock change hands, at least
//     Options.PollMin and at most Options.PollMax, and never past the
//     holder's lease as last seen. It wakes the waiters when it sees the
//     lock free after having seen it held, or free with a later fencing
//     token than it last knew (someone took it and gave it back between
//     two looks).
//
// The poller learns of holders from its own reads and from the Store's
// grants and refusals of that name, which carry the blocking lease.

// A group is the locks of a name that block one another's waiters: the
// lock family (Mutex, FairMutex, RWMutex) or the semaphore.
type group uint8

const (
	groupLock group = iota
	groupPermit
	groups
)

func groupOf(k driver.Kind) group {
	if k == driver.KindPermit {
		return groupPermit
	}
	return groupLock
}

// watchKind is the kind a watch of kind k is kept under: readers and
// writers share one.
func watchKind(k driver.Kind) driver.Kind {
	if k == driver.KindRead {
		return driver.KindWrite
	}
	return k
}

// freed is the wake-up for the watchers of kind k (as watchKind gives it)
// when the name may have been freed, without knowing more: one waiter per
// client for a mutex or a permit, every waiter otherwise.
func freed(k driver.Kind) driver.Wake {
	if k == driver.KindMutex || k == driver.KindPermit {
		return driver.Wake{To: driver.WakeOne}
	}
	return driver.Wake{To: driver.WakeAll}
}

// A note is a wake-up for the Store's watchers of one kind on a name.
type note struct {
	kind driver.Kind
	msg  driver.Wake
}

// pollers are a Store's pollers, one per watched name.
type pollers struct {
	s      *Store
	id     string // the Store's random id, the start of its pollers' registrations
	seq    int    // numbers the pollers; guarded by mu
	mu     sync.Mutex
	names  map[string]*poller
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool
}

// A poller watches one name for the Store's waiters. Its fields other than
// nudge and stop are guarded by pollers.mu.
type poller struct {
	name     string
	id       string // registration id in <table>_waiters
	watchers []*watcher
	state    [groups]seen
	fence    int64  // the name's last token, as last seen (by a poll or the Store's own acquire)
	polled   bool   // fence is a poll's: a poll seeing a later one means someone took the name since
	gen      uint64 // counts what the Store learnt of the name, so that a poll overtaken by it is dropped
	nudge    chan struct{}
	stop     context.CancelFunc
}

// seen is what a poller last knew of one group of a name's locks.
type seen struct {
	blocked bool      // a waiter of the group could not get in
	until   time.Time // when the blocking lease ends, by this process's clock
}

type watcher struct {
	kind driver.Kind // as watchKind gives it
	wake func(driver.Wake)
}

var errClosed = errors.New("mysqlstore: store closed")

func (ps *pollers) init(s *Store) {
	ps.s = s
	var b [8]byte
	_, _ = rand.Read(b[:])
	ps.id = hex.EncodeToString(b[:])
	ps.names = make(map[string]*poller)
	ps.ctx, ps.cancel = context.WithCancel(context.Background())
}

// Watch implements driver.Watcher. It starts the name's poller if the Store
// has none yet and returns at once. A release, withdrawal, resize or force
// release of the name through this Store after Watch returns wakes wake at
// once (every watcher of the name, whatever its kind: see released). One
// made elsewhere is seen by polling: a poll wakes wake when it finds wake's
// group (the locks, or the semaphore) not blocked, and either it was last
// known blocked (by a poll, or by this Store's own acquire refused by a
// holder, which also tells the holder's lease) or the name's token grew
// since it was last known (by a poll or by this Store's own acquire).
//
// So, in the core's order (Watch, then Acquire): if that Acquire is refused
// by a holder, the first poll after the holder releases (or its lease
// ends; polls never wait past it) wakes wake, unless another owner took the
// name in between; if it is refused only because of another's fair queue
// place or a writer's mark, the first poll after that owner took the name
// and gave it back wakes wake. A place or mark that ends without a grant
// (withdrawn by another process) wakes no one: the waiter retries at the
// Remaining its refusal gave. Polls come every quarter of the time since a
// poll last saw the name change, within [PollMin, PollMax].
func (s *Store) Watch(ctx context.Context, kind driver.Kind, name string, wake func(driver.Wake)) (func(), error) {
	if s.err != nil {
		return nil, s.err
	}
	if kind > driver.KindPermit {
		return nil, driver.Unsupported(s, "lock kind "+kind.String())
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.watch.watch(watchKind(kind), name, wake)
}

func (ps *pollers) watch(kind driver.Kind, name string, wake func(driver.Wake)) (func(), error) {
	w := &watcher{kind: kind, wake: wake}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil, errClosed
	}
	p := ps.names[name]
	if p == nil {
		ctx, cancel := context.WithCancel(ps.ctx)
		ps.seq++
		p = &poller{name: name, id: ps.id + ":" + strconv.Itoa(ps.seq), nudge: make(chan struct{}, 1), stop: cancel}
		ps.names[name] = p
		// Owner: the Store. Stops when the name's last watcher leaves or
		// the Store closes.
		ps.wg.Go(func() { ps.run(ctx, p) })
	}
	p.watchers = append(p.watchers, w)
	var once sync.Once
	return func() { once.Do(func() { ps.unwatch(p, w) }) }, nil
}

func (ps *pollers) unwatch(p *poller, w *watcher) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p.watchers = slices.DeleteFunc(p.watchers, func(x *watcher) bool { return x == w })
	if len(p.watchers) == 0 && ps.names[p.name] == p {
		delete(ps.names, p.name)
		p.stop()
	}
}

// close stops every poller and waits for them.
func (ps *pollers) close() {
	ps.mu.Lock()
	ps.closed = true
	ps.mu.Unlock()
	ps.cancel()
	ps.wg.Wait()
}

// observe records what one of the Store's own round trips showed of name's
// group g: blocked (or not) for remaining (negative: unknown). It never
// wakes anyone.
func (ps *pollers) observe(name string, g group, blocked bool, remaining time.Duration) {
	ps.mu.Lock()
	p := ps.names[name]
	if p != nil {
		p.gen++
		if remaining < 0 {
			remaining = ps.s.opts.PollMax
		}
		p.state[g] = seen{blocked: blocked, until: time.Now().Add(remaining)}
	}
	ps.mu.Unlock()
	if p != nil {
		select {
		case p.nudge <- struct{}{}:
		default:
		}
	}
}

// sawFence records the name's last token as one of the Store's own
// acquires of it reported it, so that the next poll that sees a later one
// knows the name was taken since, though it may be free again.
func (ps *pollers) sawFence(name string, fence int64) {
	ps.mu.Lock()
	if p := ps.names[name]; p != nil && fence > p.fence {
		p.fence, p.polled = fence, true
	}
	ps.mu.Unlock()
}

// released delivers, at once, the wake-ups a release, withdrawal, resize or
// force release through the Store is due to cause on name.
func (ps *pollers) released(name string, notes []note) {
	ps.mu.Lock()
	var calls []func()
	if p := ps.names[name]; p != nil {
		p.gen++
		for _, n := range notes {
			for _, w := range p.watchers {
				if w.kind == watchKind(n.kind) {
					calls = append(calls, func() { w.wake(n.msg) })
				}
			}
		}
	}
	ps.mu.Unlock()
	for _, call := range calls {
		call()
	}
}

// waitingTTL is how long a poller's registration in <table>_waiters lasts;
// the poller refreshes it every third of that.
const waitingTTL = 10 * time.Second

// run is the loop of one poller. The interval is a quarter of the time
// since the poller last saw the name change (a grant, a release), at least
// PollMin and at most PollMax: a release is seen within about a quarter of
// the hold it ends, and a long hold costs one read a PollMax. The poller is
// registered in <table>_waiters while it runs.
func (ps *pollers) run(ctx context.Context, p *poller) {
	lo, hi := ps.s.opts.PollMin, ps.s.opts.PollMax
	since := time.Now()
	interval := func() time.Duration { return min(max(time.Since(since)/4, lo), hi) }
	registered := ps.register(ctx, p, waitingTTL)
	defer func() {
		// Bounded by the Store's life: a closing Store leaves the
		// registration to expire.
		uctx, cancel := context.WithTimeout(ps.ctx, time.Second)
		defer cancel()
		ps.register(uctx, p, 0)
	}()
	timer := time.NewTimer(lo)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.nudge:
			// A round trip of the Store told of a holder: look at its lease
			// again.
			timer.Reset(ps.delay(p, interval()))
			continue
		case <-timer.C:
		}
		if ps.poll(ctx, p) {
			since = time.Now()
		}
		if time.Since(registered) > waitingTTL/3 {
			registered = ps.register(ctx, p, waitingTTL)
		}
		timer.Reset(ps.delay(p, interval()))
	}
}

// register records p in <table>_waiters for ttl, or removes it (ttl 0), and
// returns when it did. A failure is left to the next refresh: the count is
// for operators, and no lock depends on it.
func (ps *pollers) register(ctx context.Context, p *poller, ttl time.Duration) time.Time {
	at := time.Now()
	if st, err := ps.s.ready(ctx); err == nil {
		_, _ = st.waiting.ExecContext(ctx, []byte(p.name), []byte(p.id), micros(ttl))
	}
	return at
}

// delay is how long to wait before the next poll: interval, but not past a
// blocking lease (plus a millisecond, for the server to see it ended).
func (ps *pollers) delay(p *poller, interval time.Duration) time.Duration {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	d := interval
	for _, st := range p.state {
		if st.blocked {
			d = min(d, max(time.Until(st.until)+time.Millisecond, time.Millisecond))
		}
	}
	return d
}

// pollQuery reads, in one consistent (non-locking) statement, what blocks
// each group of a name's waiters.
func pollQuery(n names) string {
	live := "h.`name` = l.`name` AND h.`expires_us` > " + now
	return "SELECT l.`kind`, l.`fence`, l.`owner` IS NOT NULL AND l.`expires_us` > " + now + ", l.`expires_us` - " + now + ", l.`permits`," +
		" (SELECT COUNT(*) FROM " + n.holders + " h WHERE " + live + " AND h.`role` = 2)," +
		" (SELECT COALESCE(MAX(h.`expires_us`) - " + now + ", 0) FROM " + n.holders + " h WHERE " + live + " AND h.`role` = 2)," +
		" (SELECT COUNT(*) FROM " + n.holders + " h WHERE " + live + " AND h.`role` = 4)," +
		" (SELECT COALESCE(MIN(h.`expires_us`) - " + now + ", 0) FROM " + n.holders + " h WHERE " + live + " AND h.`role` = 4)" +
		" FROM " + n.locks + " l WHERE l.`name` = ?"
}

// poll reads the name's state once and wakes the watchers of each group it
// shows not blocked, if it was seen blocked before or the name's token grew
// since it was last seen (someone took the name in between, and may have
// given it back). It reports whether the name changed.
func (ps *pollers) poll(ctx context.Context, p *poller) bool {
	st, err := ps.s.ready(ctx)
	if err != nil {
		return false
	}
	ps.mu.Lock()
	gen := p.gen
	ps.mu.Unlock()
	var (
		kind, permits, readers, held     int
		fence, exclRem, readRem, permRem int64
		excl                             bool
	)
	err = st.poll.QueryRowContext(ctx, []byte(p.name)).Scan(&kind, &fence, &excl, &exclRem, &permits, &readers, &readRem, &held, &permRem)
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	if err != nil {
		return false // a failed read changes nothing; the next one may tell
	}
	var now [groups]seen
	at := time.Now()
	switch {
	case kind == 0 && excl:
		now[groupLock] = seen{true, at.Add(time.Duration(exclRem) * time.Microsecond)}
	case kind == 0 && readers > 0:
		now[groupLock] = seen{true, at.Add(time.Duration(readRem) * time.Microsecond)}
	case kind == int(driver.KindPermit) && held >= permits && held > 0:
		now[groupPermit] = seen{true, at.Add(time.Duration(permRem) * time.Microsecond)}
	}
	ps.mu.Lock()
	if p.gen != gen {
		// The Store learnt of the name in the meantime, more recently than
		// this read did.
		ps.mu.Unlock()
		return true
	}
	var calls []func()
	changed := fence != p.fence
	// The name was taken since the last look (and may have been given back
	// already): its waiters may have missed their turn.
	moved := p.polled && fence > p.fence
	for g := range groups {
		if p.state[g].blocked != now[g].blocked {
			changed = true
		}
		if (p.state[g].blocked || moved) && !now[g].blocked {
			for _, w := range p.watchers {
				if groupOf(w.kind) == g {
					msg := freed(w.kind)
					calls = append(calls, func() { w.wake(msg) })
				}
			}
		}
	}
	p.state, p.fence, p.polled = now, max(p.fence, fence), true
	ps.mu.Unlock()
	for _, call := range calls {
		call()
	}
	return changed
}
