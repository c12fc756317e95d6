package leash_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
)

// TestHandoffNoRoundTrip: a FairMutex waiter woken by a release that handed
// it the lock returns from Lock with the handed grant's token without an
// acquire, holding a validity counted from its own place-taking request and
// cut to the short lease, and its watchdog renews it to the full lease
// before that validity ends.
func TestHandoffNoRoundTrip(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		m := c.FairMutex("hand", nil)
		h := mustLock(t, m, context.Background())
		placed := time.Now()
		got := lockAsync(t, m, context.Background())
		synctest.Wait() // queued
		acquires, renewals := s.acquires.Load(), s.renewCalls.Load()
		time.Sleep(100 * time.Millisecond)
		mustUnlock(t, h)
		h2 := <-got
		if h2 == nil {
			return
		}
		if n := s.acquires.Load() - acquires; n != 0 {
			t.Errorf("acquires to take a handed-off lock = %d, want 0", n)
		}
		if h2.Fence() <= h.Fence() {
			t.Errorf("handed-off fence %d, want above %d", h2.Fence(), h.Fence())
		}
		// Counted from the place's request, for the short lease.
		if v, most := h2.ValidUntil(), placed.Add(leash.DefaultQueueLease); v.After(most) {
			t.Errorf("validity of the handed-off lock ends %v after the place was taken, want at most the queue lease %v",
				v.Sub(placed), leash.DefaultQueueLease)
		}
		if n := s.renewCalls.Load() - renewals; n != 0 {
			t.Errorf("renewals as the hand-off returns = %d, want 0", n)
		}
		time.Sleep(time.Until(h2.ValidUntil()) - time.Millisecond)
		synctest.Wait()
		if n := s.renewCalls.Load() - renewals; n != 1 {
			t.Errorf("renewals within the handed-off validity = %d, want 1 (the pick-up)", n)
		}
		if v, least := h2.ValidUntil(), time.Now().Add(leash.DefaultLease/2); v.Before(least) {
			t.Errorf("validity after the pick-up ends in %v, want the full lease's", time.Until(v))
		}
		mustUnlock(t, h2)
	})
}

// TestHandoffCancelledWaiterLeavesNothing: a waiter whose ctx ends as the
// release hands it the lock, whichever it sees first, leaves no lock behind:
// the next Lock gets the name at once.
func TestHandoffCancelledWaiterLeavesNothing(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		m := c.FairMutex("cancel", nil)
		for range 20 { // the waiter's select sees either first
			h := mustLock(t, m, context.Background())
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				h, err := m.Lock(ctx)
				if err == nil {
					err = h.Unlock(context.Background())
					if err == nil {
						err = errors.New("granted")
					}
				}
				errc <- err
			}()
			synctest.Wait() // queued
			cancel()
			mustUnlock(t, h)
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Lock = %v, want context.Canceled", err)
			}
			synctest.Wait()
			if who := heldBy(t, s, "cancel"); who != "" {
				t.Fatalf("after the cancelled waiter, the name is held by %q, want free", who)
			}
		}
	})
}

// TestHandoffMissedWakeUp: a waiter whose wake-up is lost (a reconnect)
// finds the grant on its next attempt, with the handed grant's token, and
// keeps its turn before a waiter that queued after it. With a long queue
// place its attempts would come every third of the place, long after the
// grant's short lease (and the place with it) ran out: a waiter on a store
// that hands off tries again within half the hand-off's lease.
func TestHandoffMissedWakeUp(t *testing.T) {
	for _, queueLease := range []time.Duration{0, 30 * time.Second} {
		t.Run(fmt.Sprintf("queue lease %v", queueLease), func(t *testing.T) {
			synctestRun(t, func(t *testing.T) {
				s := &lossyStore{Store: memstore.New()}
				c := newClient(t, s, nil)
				defer c.Close()
				q := &leash.QueueOptions{QueueLease: queueLease}
				h := mustLock(t, c.FairMutex("missed", q), context.Background())
				first := lockAsync(t, c.FairMutex("missed", q), context.Background())
				synctest.Wait()
				time.Sleep(time.Millisecond) // queued after the first
				second := lockAsync(t, c.FairMutex("missed", q), context.Background())
				synctest.Wait()
				s.drop.Store(true)
				mustUnlock(t, h)
				synctest.Wait()
				s.drop.Store(false)
				fence := s.dropped()
				if fence == 0 {
					t.Fatal("no wake-up with a grant was sent")
				}
				var h1 *leash.Hold
				select {
				case h1 = <-first: // its fallback attempt picks the grant up
				case h2 := <-second:
					t.Fatalf("the second waiter was served first (fence %d): the first lost its turn with its wake-up", h2.Fence())
				}
				if h1 == nil {
					return
				}
				if h1.Fence() != fence {
					t.Errorf("fence after a missed wake-up = %d, want the handed grant's %d", h1.Fence(), fence)
				}
				mustUnlock(t, h1)
				if h2 := <-second; h2 != nil {
					mustUnlock(t, h2)
				}
				if who := heldBy(t, s, "missed"); who != "" {
					t.Errorf("after the Unlocks the name is held by %q, want free (no second hold)", who)
				}
			})
		})
	}
}

// TestHandoffHoldBeginsWhenTaken: a handed-over lock's validity counts from
// the waiter's place-taking request, but its hold begins when the waiter
// takes the grant: a Liveness shorter than the wait does not find the new
// holder stalled the moment its Lock returns. The control is the same wait
// on a store that does not hand off.
func TestHandoffHoldBeginsWhenTaken(t *testing.T) {
	for _, handoff := range []bool{true, false} {
		t.Run(fmt.Sprintf("hand-off %v", handoff), func(t *testing.T) {
			synctestRun(t, func(t *testing.T) {
				var s driver.Store = newFaultStore(t)
				if !handoff {
					s = noHandoffStore{s.(*faultStore)}
				}
				c := newClient(t, s, &leash.Options{Liveness: time.Second, SafetyMargin: 50 * time.Millisecond})
				defer c.Close()
				m := c.FairMutex("live", nil)
				h := mustLock(t, m, context.Background())
				got := lockAsync(t, m, context.Background())
				synctest.Wait() // queued
				for range 12 {  // the holder works 1.2 s, a Liveness and more, touching its hold
					time.Sleep(100 * time.Millisecond)
					h.Touch()
				}
				mustUnlock(t, h)
				h2 := <-got
				if h2 == nil {
					return
				}
				synctest.Wait() // no time passes: the new holder has not touched it yet
				if err := h2.Err(); err != nil {
					t.Errorf("the hold as its Lock returned: %v, want held", err)
				}
				mustUnlock(t, h2)
			})
		})
	}
}

// noHandoffStore is a faultStore that does not hand locks over.
type noHandoffStore struct{ *faultStore }

func (noHandoffStore) Handoff() bool { return false }

// lossyStore drops the wake-ups that carry a grant while drop is set.
type lossyStore struct {
	*memstore.Store
	drop atomic.Bool
	mu   sync.Mutex
	lost int64 // the last dropped grant's token
}

func (s *lossyStore) dropped() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

func (s *lossyStore) Watch(ctx context.Context, kind driver.Kind, name string, wake func(driver.Wake)) (func(), error) {
	return s.Store.Watch(ctx, kind, name, func(msg driver.Wake) {
		if msg.Fence != 0 && s.drop.Load() {
			s.mu.Lock()
			s.lost = msg.Fence
			s.mu.Unlock()
			return
		}
		wake(msg)
	})
}

// TestHandoffValidityNegativeControl is why a handed-off lock's validity
// counts from the waiter's own place-taking request, not from when the
// wake-up arrived. The waiter's connection stalls as the release hands it
// the lock: its wake-up and its attempt wait while the grant's short lease
// runs out and another client takes the name. When the stall ends, the
// attempt's answer (held) comes first and the wake-up after it, as when the
// subscriber connection lags behind the command connection: a waiter
// counting from the wake-up's arrival would think it holds the lock beside
// the new holder (the control, which must see that overlap); one counting
// from its place's request sees no validity left, asks the store, and
// waits.
func TestHandoffValidityNegativeControl(t *testing.T) {
	for _, tc := range []struct {
		name        string
		fromReceipt bool
		wakeFirst   bool
		overlap     bool
	}{
		{"from the place's request", false, false, false},
		{"from the wake-up (unsafe control)", true, false, true},
		// When the wake-up arrives before the answer of the attempt that
		// found the name held, the waiter drops the grant it announced,
		// even under the unsafe rule.
		{"from the wake-up, an attempt found the name held after it", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			overlap := handoffAfterStall(t, tc.fromReceipt, tc.wakeFirst)
			if overlap != tc.overlap {
				t.Errorf("two valid holders at once = %v, want %v", overlap, tc.overlap)
			}
		})
	}
}

// handoffAfterStall runs the scenario above and reports whether two holds
// were valid at once. wakeFirst delivers the stalled wake-up before the
// stalled attempt's answer.
func handoffAfterStall(t *testing.T, fromReceipt, wakeFirst bool) (overlap bool) {
	synctestRun(t, func(t *testing.T) {
		s := memstore.New()
		ws := &stallStore{Store: s, gate: make(chan struct{}), renewGate: make(chan struct{})}
		holder, other := newClient(t, s, nil), newClient(t, s, nil)
		defer holder.Close()
		defer other.Close()
		waiter := newClient(t, ws, nil)
		defer waiter.Close()
		if fromReceipt {
			leash.CountHandoffFromReceipt(waiter)
		}
		h := mustLock(t, holder.FairMutex("stall", nil), context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		got := make(chan *leash.Hold, 1)
		go func() {
			h, _ := waiter.FairMutex("stall", &leash.QueueOptions{QueueLease: 30 * time.Second}).Lock(ctx)
			got <- h
		}()
		synctest.Wait() // queued
		ws.stall()
		mustUnlock(t, h) // handed to the stalled waiter
		// The grant's lease (what its place had left, at most the queue
		// lease) runs out, the waiter's next attempt waiting on the stall
		// meanwhile; another client takes the name.
		h2 := mustLock(t, other.Mutex("stall"), context.Background())
		if wakeFirst {
			ws.deliver()
			synctest.Wait()
		}
		close(ws.gate) // the attempt's answer: held
		synctest.Wait()
		ws.deliver()
		synctest.Wait()
		// The history at this instant: whom each client believes holds
		// the name. The waiter's first renewal, which would tell it the
		// truth, is still on its slow connection.
		var hw *leash.Hold
		select {
		case hw = <-got:
			overlap = hw.Err() == nil && h2.Err() == nil
		default: // still waiting: the store said the name is held
		}
		close(ws.renewGate)
		if hw != nil {
			_ = hw.Unlock(context.Background())
		}
		cancel()
		mustUnlock(t, h2)
	})
	return overlap
}

// stallStore stalls a client's connection: while stalled, its acquires wait
// for gate to close and its wake-ups are held until deliver, which ends the
// stall. Its renewals wait until renewGate is closed.
type stallStore struct {
	*memstore.Store
	mu        sync.Mutex
	stalled   bool
	held      []func()
	gate      chan struct{}
	renewGate chan struct{}
}

func (s *stallStore) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	<-s.renewGate
	return s.Store.Renew(ctx, reqs)
}

func (s *stallStore) stall() {
	s.mu.Lock()
	s.stalled = true
	s.mu.Unlock()
}

// deliver ends the stall of the wake-ups and delivers those held.
func (s *stallStore) deliver() {
	s.mu.Lock()
	held := s.held
	s.stalled, s.held = false, nil
	s.mu.Unlock()
	for _, f := range held {
		f()
	}
}

func (s *stallStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	s.mu.Lock()
	stalled := s.stalled
	s.mu.Unlock()
	if stalled {
		<-s.gate
	}
	return s.Store.Acquire(ctx, r)
}

func (s *stallStore) Watch(ctx context.Context, kind driver.Kind, name string, wake func(driver.Wake)) (func(), error) {
	return s.Store.Watch(ctx, kind, name, func(msg driver.Wake) {
		s.mu.Lock()
		if s.stalled {
			s.held = append(s.held, func() { wake(msg) })
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		wake(msg)
	})
}

// TestUnknownPlaceTakingAttemptWithdrawn: a FairMutex Lock whose first
// (place-taking) attempt has an unknown outcome returns the error and
// withdraws the place the server may have made for it: the next waiter is
// served as soon as the holder releases, not after the place's QueueLease.
func TestUnknownPlaceTakingAttemptWithdrawn(t *testing.T) {
	for _, handoff := range []bool{true, false} {
		name := "handoff"
		if !handoff {
			name = "no handoff"
		}
		t.Run(name, func(t *testing.T) {
			synctestRun(t, func(t *testing.T) {
				s := newFaultStore(t)
				var st driver.Store = s
				if !handoff {
					st = noHandoffStore{s}
				}
				holder := newClient(t, st, nil)
				defer holder.Close()
				b := newClient(t, st, nil)
				defer b.Close()
				other := newClient(t, st, nil)
				defer other.Close()
				q := &leash.QueueOptions{QueueLease: time.Minute}
				h := mustLock(t, holder.FairMutex("q", q), context.Background())
				// b's first attempt: the server queues b, the reply is lost.
				s.mu.Lock()
				s.acquireHook = func(driver.Grant) error { return errors.New("i/o timeout") }
				s.mu.Unlock()
				if _, err := b.FairMutex("q", q).Lock(context.Background()); err == nil {
					t.Fatal("Lock succeeded, want the store error")
				}
				s.mu.Lock()
				s.acquireHook = nil
				s.mu.Unlock()
				time.Sleep(time.Second)
				info, _ := s.Inspect(context.Background(), "q")
				if info.Queued != 0 {
					t.Errorf("queue places 1s after b's Lock returned an error = %d, want 0 (b gave up)", info.Queued)
				}
				got := grantedAt(t, other.FairMutex("q", q), context.Background())
				time.Sleep(time.Second)
				released := time.Now()
				mustUnlock(t, h)
				if d := (<-got).Sub(released); d > 100*time.Millisecond {
					t.Errorf("the next waiter got the free lock %v after its release, want at once", d)
				}
			})
		})
	}
}
