package leash_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
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
