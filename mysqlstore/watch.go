package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
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
//     non-locking read by primary key) at an interval that starts at
//     Options.PollMin, doubles up to Options.PollMax, and never runs past
//     the holder's lease as last seen. It wakes the waiters when it sees
//     the lock free after having seen it held.
//
// The poller learns of holders from its own reads and from the Store's
// acquires, renewals and refusals of that name, which carry the holder's
// token and remaining lease.

// pollers are a Store's pollers, one per watched name.
type pollers struct {
	s      *Store
	mu     sync.Mutex
	names  map[string]*poller
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool
}

// A poller watches one name for the Store's waiters. Its fields other than
// nudge are guarded by pollers.mu.
type poller struct {
	name     string
	watchers []*watcher
	held     bool      // the lock was last seen held
	fence    int64     // the holder's token, when held
	until    time.Time // the holder's lease end, by this process's clock, when held
	gen      uint64    // counts observations, so that a poll overtaken by one is dropped
	nudge    chan struct{}
	stop     context.CancelFunc
}

type watcher struct{ wake func(driver.Wake) }

var errClosed = errors.New("mysqlstore: store closed")

func (ps *pollers) init(s *Store) {
	ps.s = s
	ps.names = make(map[string]*poller)
	ps.ctx, ps.cancel = context.WithCancel(context.Background())
}

// Watch implements driver.Watcher for KindMutex. It starts the name's
// poller if the Store has none yet and returns at once: a release through
// this Store after Watch returns wakes wake at once, one made elsewhere at
// the poller's next read.
func (s *Store) Watch(ctx context.Context, kind driver.Kind, name string, wake func(driver.Wake)) (func(), error) {
	if s.err != nil {
		return nil, s.err
	}
	if kind != driver.KindMutex {
		return nil, driver.Unsupported(s, "lock kind "+kind.String())
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.watch.watch(name, wake)
}

func (ps *pollers) watch(name string, wake func(driver.Wake)) (func(), error) {
	w := &watcher{wake: wake}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil, errClosed
	}
	p := ps.names[name]
	if p == nil {
		ctx, cancel := context.WithCancel(ps.ctx)
		p = &poller{name: name, nudge: make(chan struct{}, 1), stop: cancel}
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
	for i, x := range p.watchers {
		if x == w {
			p.watchers = append(p.watchers[:i], p.watchers[i+1:]...)
			break
		}
	}
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

// observe records what the Store learnt of name from a round trip of its
// own: held (by the holder with token fence, or the same holder when fence
// is negative) for remaining. It never wakes anyone: the caller's round
// trip shows the lock held.
func (ps *pollers) observe(name string, held bool, fence int64, remaining time.Duration) {
	ps.mu.Lock()
	p := ps.names[name]
	if p != nil {
		p.gen++
		p.held = held
		if fence >= 0 {
			p.fence = fence
		}
		p.until = time.Now().Add(remaining)
	}
	ps.mu.Unlock()
	if p != nil {
		p.poke()
	}
}

// released records a release of name through the Store and wakes its
// watchers at once with msg.
func (ps *pollers) released(name string, msg driver.Wake) {
	ps.mu.Lock()
	p := ps.names[name]
	var ws []*watcher
	if p != nil {
		p.gen++
		p.held = false
		ws = append(ws, p.watchers...)
	}
	ps.mu.Unlock()
	for _, w := range ws {
		w.wake(msg)
	}
}

// poke makes the poller look at its schedule again.
func (p *poller) poke() {
	select {
	case p.nudge <- struct{}{}:
	default:
	}
}

// run is the loop of one poller.
func (ps *pollers) run(ctx context.Context, p *poller) {
	lo, hi := ps.s.opts.PollMin, ps.s.opts.PollMax
	interval := lo
	timer := time.NewTimer(lo)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.nudge:
			// An observation changed the holder or its lease: start again
			// from the shortest interval, within the new lease.
			interval = lo
			timer.Reset(ps.delay(p, interval))
			continue
		case <-timer.C:
		}
		changed := ps.poll(ctx, p)
		if changed {
			interval = lo
		} else {
			interval = min(2*interval, hi)
		}
		timer.Reset(ps.delay(p, interval))
	}
}

// delay is how long to wait before the next poll: interval, but not past
// the holder's lease (plus a millisecond, for the server to see it ended).
func (ps *pollers) delay(p *poller, interval time.Duration) time.Duration {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p.held {
		if left := time.Until(p.until) + time.Millisecond; left < interval {
			return max(left, ps.s.opts.PollMin/4, time.Millisecond)
		}
	}
	return interval
}

// poll reads the name's row once and wakes the watchers when it shows the
// lock free after it was seen held. It reports whether the state changed.
func (ps *pollers) poll(ctx context.Context, p *poller) bool {
	st, err := ps.s.ready(ctx)
	if err != nil {
		return false
	}
	ps.mu.Lock()
	gen := p.gen
	ps.mu.Unlock()
	var (
		held             bool
		fence, remaining int64
	)
	err = st.poll.QueryRowContext(ctx, []byte(p.name)).Scan(&held, &fence, &remaining)
	if errors.Is(err, sql.ErrNoRows) {
		held, err = false, nil
	}
	if err != nil {
		return false // a failed read changes nothing; the next one may tell
	}
	ps.mu.Lock()
	if p.gen != gen {
		// The Store saw the name in the meantime, more recently than this
		// read did.
		ps.mu.Unlock()
		return true
	}
	wasHeld, wasFence := p.held, p.fence
	p.held, p.fence = held, fence
	if held {
		p.until = time.Now().Add(time.Duration(remaining) * time.Microsecond)
	}
	var ws []*watcher
	if wasHeld && !held {
		ws = append(ws, p.watchers...)
	}
	ps.mu.Unlock()
	for _, w := range ws {
		w.wake(driver.Wake{To: driver.WakeOne})
	}
	return wasHeld != held || (held && wasFence != fence)
}
