package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leash-go/leash/driver"
)

// Watch watches kind on name on every member that is a driver.Watcher and
// passes each member's notifications on to wake. A release frees the lock on
// every member that held it, a majority, so a watch on any members but a
// minority hears of it: Watch returns once that many members' watches are
// established (the others join when they are, or not at all), and fails
// when too few members are Watchers or too few watches could be
// established; a leash Client then polls.
func (s *Store) Watch(ctx context.Context, kind driver.Kind, name string, wake func(driver.Wake)) (func(), error) {
	need := len(s.members) - s.quorum + 1
	var ws []driver.Watcher
	for _, m := range s.members {
		if w, ok := m.(driver.Watcher); ok {
			ws = append(ws, w)
		}
	}
	if len(ws) < need {
		return nil, fmt.Errorf("redlock: watch %q: %d members send release notifications, %d needed", name, len(ws), need)
	}
	st := &watchState{}
	// A member's notification after stop (one whose watch was still being
	// established when stop ran) is not passed on.
	pass := func(w driver.Wake) {
		if !st.done.Load() {
			wake(w)
		}
	}
	co := &coalescer{pass: pass, after: s.after}
	var (
		mu      sync.Mutex
		settled int
		ok      int
		errs    []error
		enough  = make(chan struct{})
	)
	for _, w := range ws {
		// Owner: Watch. Stops when the member's Watch returns (bounded by
		// ctx); a watch established after Watch returned is kept, or ended
		// at once if the watch has been stopped.
		go func() {
			stop, err := w.Watch(ctx, kind, name, co.notify)
			mu.Lock()
			defer mu.Unlock()
			settled++
			if err == nil {
				ok++
				st.add(stop)
			} else {
				errs = append(errs, err)
			}
			if ok == need || settled == len(ws) {
				select {
				case <-enough:
				default:
					close(enough)
				}
			}
		}()
	}
	<-enough
	mu.Lock()
	established := ok
	err := errors.Join(errs...)
	mu.Unlock()
	if established < need {
		st.stop()
		return nil, fmt.Errorf("redlock: watch %q: %d of %d members' watches established, %d needed: %w", name, established, len(ws), need, err)
	}
	return st.stop, nil
}

// watchState is the member watches of one Watch, stopped together.
type watchState struct {
	done    atomic.Bool // set by stop: no wake is passed on
	mu      sync.Mutex
	stops   []func()
	stopped bool
}

// add keeps a member's stop, or calls it at once if the watch has stopped.
func (w *watchState) add(stop func()) {
	w.mu.Lock()
	if !w.stopped {
		w.stops = append(w.stops, stop)
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	stop()
}

// stop ends every member watch established, and any established later.
func (w *watchState) stop() {
	w.done.Store(true)
	w.mu.Lock()
	stops := w.stops
	w.stops, w.stopped = nil, true
	w.mu.Unlock()
	for _, s := range stops {
		s()
	}
}

// A coalescer passes the members' notifications on as one wake-up per
// release. A release frees the lock on every member that held it, and each
// of them notifies: passed on as they come, they would wake a waiter once
// per member, and each wake-up after the first would send it to try again
// while the lock is already taken. So a notification is passed on after a
// short delay, wakeDelay plus a random part of wakeStagger, and the
// notifications that arrive meanwhile are merged into it. None is lost: the
// merged wake-up is passed on after each of them arrived. The random part
// staggers the clients a release wakes, so that they do not all try at
// once.
type coalescer struct {
	pass    func(driver.Wake)
	after   func(time.Duration, func()) // time.AfterFunc, or a test's
	mu      sync.Mutex
	pending bool
	msg     driver.Wake
}

// wakeDelay and wakeStagger set how long a notification is held back (see
// coalescer): long enough for the other members' notifications of the same
// release to arrive on a local network.
const (
	wakeDelay   = time.Millisecond
	wakeStagger = time.Millisecond
)

// notify takes a member's notification; it never blocks.
func (c *coalescer) notify(w driver.Wake) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending {
		c.msg = merge(c.msg, w)
		return
	}
	c.pending, c.msg = true, w
	c.after(wakeDelay+rand.N(wakeStagger), func() {
		c.mu.Lock()
		w := c.msg
		c.pending = false
		c.mu.Unlock()
		c.pass(w)
	})
}

// merge returns one wake-up that wakes every waiter a or b would.
func merge(a, b driver.Wake) driver.Wake {
	if a == b {
		return a
	}
	return driver.Wake{To: driver.WakeAll}
}
