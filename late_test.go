package leash_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// takeOnceFree takes name on c as soon as the store lets it (its holder's
// lease ran out), awaiting the condition rather than a time.
func takeOnceFree(t *testing.T, c *leash.Client, name string) *leash.Hold {
	t.Helper()
	for {
		h, err := c.Mutex(name).TryLock(context.Background())
		if err == nil {
			return h
		}
		if !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("TryLock: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLateGrantIsNotReturned: an acquire whose answer arrives after the
// grant's validity ended (the server stalled past the lease) is not turned
// into a hold: by then another owner may hold the lock. TryLock reports why
// and gives the grant back without freeing the new owner's lock.
func TestLateGrantIsNotReturned(t *testing.T) {
	s := newFaultStore(t)
	const lease = 200 * time.Millisecond
	a := newClient(t, s, &leash.Options{Lease: lease})
	defer a.Close()
	b := newClient(t, s, &leash.Options{Lease: time.Minute})
	defer b.Close()
	var bHold atomic.Pointer[leash.Hold]
	var stalled atomic.Bool
	s.acquireHook = func(driver.Grant) error {
		if stalled.CompareAndSwap(false, true) {
			// The answer to a's acquire is held back until its lease ran
			// out on the store and b took the lock.
			bHold.Store(takeOnceFree(t, b, "late"))
		}
		return nil
	}
	h, err := a.Mutex("late").TryLock(context.Background())
	var late *leash.LateGrantError
	if h != nil || !errors.Is(err, leash.ErrNotAcquired) || !errors.As(err, &late) {
		t.Fatalf("TryLock = %v, %v; want a NotAcquiredError with a LateGrantError", h, err)
	}
	if late.Took < lease-late.Margin {
		t.Errorf("LateGrantError.Took = %v, want at least the validity %v", late.Took, lease-late.Margin)
	}
	if got := err.Error(); got == "" || errors.Is(err, leash.ErrRestartGrace) {
		t.Errorf("error %q", got)
	}
	// b still holds the lock: a's give-back named a's owner only.
	if err := bHold.Load().Err(); err != nil {
		t.Errorf("b's hold: %v, want held", err)
	}
	if _, err := a.Mutex("late").TryLock(context.Background()); !errors.Is(err, leash.ErrNotAcquired) {
		t.Errorf("a's second TryLock = %v, want refused while b holds", err)
	}
}

// TestLockRetriesLateGrant: Lock, which waits, gives a late grant back and
// tries again, returning a hold that is valid when it returns.
func TestLockRetriesLateGrant(t *testing.T) {
	s := newFaultStore(t)
	const lease = 200 * time.Millisecond
	a := newClient(t, s, &leash.Options{Lease: lease})
	defer a.Close()
	probe := newClient(t, s, &leash.Options{Lease: time.Minute})
	defer probe.Close()
	var stalled atomic.Bool
	s.acquireHook = func(driver.Grant) error {
		if stalled.CompareAndSwap(false, true) {
			// Held back until the grant's lease ran out on the store.
			if err := takeOnceFree(t, probe, "late").Unlock(context.Background()); err != nil {
				t.Errorf("probe Unlock: %v", err)
			}
		}
		return nil
	}
	h, err := a.Mutex("late").Lock(context.Background())
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	defer h.Unlock(context.Background())
	if err := h.Err(); err != nil {
		t.Errorf("the hold Lock returned: %v, want valid", err)
	}
	// the late grant, the probe's grant, and the retry
	if n := s.acquires.Load(); n < 3 {
		t.Errorf("%d acquires, want the late one, the probe's and a retry", n)
	}
}

// TestStarvingLockAfterLateGrantHearsItsTurn: a starving Mutex Lock whose
// marked attempt was granted too late gives the grant back and tries again;
// refused, it waits with a mark, subscribed to its turn's wake-ups too, so
// the release that follows wakes it at once, not its fallback timer.
func TestStarvingLockAfterLateGrantHearsItsTurn(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		const lease = 200 * time.Millisecond
		ctx := context.Background()
		holder := newClient(t, s, nil)
		leash.SetHandoff(holder, false) // a release wakes the first mark; the waiter takes the lock itself
		waiter := newClient(t, s, &leash.Options{Lease: lease})
		defer holder.Close()
		defer waiter.Close()
		var (
			armed  atomic.Bool
			second = make(chan *leash.Hold, 1)
		)
		s.acquireHook = func(g driver.Grant) error {
			if g.Acquired && armed.CompareAndSwap(true, false) {
				// The waiter's grant is answered after its lease ran out,
				// and the holder has taken the lock again meanwhile.
				time.Sleep(lease + time.Millisecond)
				h, err := holder.Mutex("late/starving").Lock(ctx)
				if err != nil {
					t.Errorf("holder's second Lock: %v", err)
				}
				second <- h
			}
			return nil
		}
		h := mustLock(t, holder.Mutex("late/starving"), ctx)
		got := lockAsync(t, waiter.Mutex("late/starving"), ctx)
		time.Sleep(10 * time.Millisecond) // the waiter starved and marked the name
		synctest.Wait()
		armed.Store(true)
		mustUnlock(t, h) // wakes the waiter, whose marked attempt is granted late
		h2 := <-second
		if h2 == nil {
			t.FailNow()
		}
		synctest.Wait() // the waiter gave the grant back and waits again
		handOver(t, h2, got)
	})
}
