package leash_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
)

// TestHolderSeesDeadlineBeforeScheduler checks that every way a holder can
// ask "do I still hold it?" consults the validity deadline itself, so that a
// process resuming from a pause learns of the loss on its first look, even
// before the scheduler goroutine runs.
func TestHolderSeesDeadlineBeforeScheduler(t *testing.T) {
	for name, look := range map[string]func(c *leash.Client, h *leash.Hold) bool{
		"Err":           func(_ *leash.Client, h *leash.Hold) bool { return errors.Is(h.Err(), leash.ErrLost) },
		"Context().Err": func(_ *leash.Client, h *leash.Hold) bool { return h.Context().Err() != nil },
		"Lost": func(_ *leash.Client, h *leash.Hold) bool {
			select {
			case <-h.Lost():
				return true
			default:
				return false
			}
		},
		"Lock re-entry": func(c *leash.Client, h *leash.Hold) bool {
			_, err := c.Mutex("paused").TryLock(h.Context())
			return err != nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			// An hour's lease: the scheduler's own timer is far away.
			c := newClient(t, memstore.New(), &leash.Options{Lease: time.Hour})
			defer c.Close()
			h := mustLock(t, c.Mutex("paused"), context.Background())
			leash.ExpireLocally(h)
			if !look(c, h) {
				t.Fatalf("%s after the deadline passed reports the lock held", name)
			}
			var le *leash.LostError
			if !errors.As(h.Err(), &le) || le.Reason != leash.ReasonExpired {
				t.Errorf("Err = %v, want lost: expired", h.Err())
			}
		})
	}
}

func TestUnlockAfterLeavesLockUntilThen(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		h := mustLock(t, c.Mutex("job"), context.Background())
		inner := mustLock(t, c.Mutex("job"), h.Context())
		if err := inner.UnlockAfter(context.Background(), time.Minute); err != nil {
			t.Fatalf("inner UnlockAfter: %v", err)
		}
		start := time.Now()
		if err := h.UnlockAfter(context.Background(), 5*time.Second); err != nil {
			t.Fatalf("UnlockAfter: %v", err)
		}
		if !errors.Is(h.Err(), leash.ErrReleased) || context.Cause(h.Context()) != leash.ErrReleased {
			t.Errorf("after UnlockAfter: Err %v, cause %v; want ErrReleased", h.Err(), context.Cause(h.Context()))
		}
		renewals := s.renewCalls.Load()
		other := newClient(t, s, nil)
		defer other.Close()
		h2 := mustLock(t, other.Mutex("job"), context.Background()) // waits for the lease to run out
		defer mustUnlock(t, h2)
		if d := time.Since(start); d < 5*time.Second || d > 5*time.Second+200*time.Millisecond {
			t.Errorf("lock free %v after UnlockAfter(5s), want 5s", d)
		}
		if s.renewCalls.Load() != renewals {
			t.Errorf("the watchdog renewed after UnlockAfter")
		}
		if err := h.UnlockAfter(context.Background(), time.Second); !errors.Is(err, leash.ErrNotHeld) {
			t.Errorf("second UnlockAfter = %v, want ErrNotHeld", err)
		}
	})
}

func TestUnlockAfterZeroIsUnlock(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		h := mustLock(t, c.Mutex("job"), context.Background())
		if err := h.UnlockAfter(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		if heldBy(t, s, "job") != "" {
			t.Errorf("lock held after UnlockAfter(0)")
		}
	})
}

// TestUnlockAfterWaitsForRoundInFlight: a watchdog renewal sent before
// UnlockAfter, with the full lease, is answered before UnlockAfter sets the
// tail, so that it cannot land last and cut the tail short.
func TestUnlockAfterWaitsForRoundInFlight(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		h := mustLock(t, c.Mutex("tail"), context.Background())
		gate, entered := make(chan struct{}), make(chan struct{})
		s.mu.Lock()
		s.renewHook = func(reqs []driver.Request) {
			if reqs[0].Lease != time.Second {
				return // UnlockAfter's own renewal
			}
			s.mu.Lock()
			s.renewHook = nil
			s.mu.Unlock()
			close(entered)
			<-gate
		}
		s.mu.Unlock()
		<-entered // the watchdog's round (at 333ms) is in the store, not yet applied
		done := make(chan error, 1)
		go func() { done <- h.UnlockAfter(context.Background(), 5*time.Second) }()
		synctest.Wait() // UnlockAfter is waiting for the round, or has sent its tail
		close(gate)     // the round's 1s lease is applied now
		if err := <-done; err != nil {
			t.Fatalf("UnlockAfter: %v", err)
		}
		start := time.Now()
		for heldBy(t, s, "tail") != "" {
			time.Sleep(10 * time.Millisecond)
		}
		if d := time.Since(start); d < 4900*time.Millisecond {
			t.Errorf("lock free %v after UnlockAfter(5s), want 5s: the round in flight cut the tail short", d)
		}
	})
}

// TestHoldContextCause checks each hold's context against its history,
// whether the context was first asked for before or after each event (it is
// made on demand): cancelled with the *LostError when the lock was lost while
// the hold was live, with ErrReleased when the hold was unlocked first, and
// live otherwise; a context derived from it before the end ends with it.
func TestHoldContextCause(t *testing.T) {
	type step int
	const (
		ask    step = iota // call Context and derive a context from it
		unlock             // unlock the re-entry (the outer hold stays)
		lose               // the tenure passes its validity deadline
	)
	for name, tc := range map[string]struct {
		steps    []step
		wantLost bool // the re-entry's context ends with the *LostError
		wantLive bool // it is still live
	}{
		"asked, then lost":             {steps: []step{ask, lose}, wantLost: true},
		"lost, then asked":             {steps: []step{lose, ask}, wantLost: true},
		"asked, then unlocked":         {steps: []step{ask, unlock}},
		"unlocked, then asked":         {steps: []step{unlock, ask}},
		"unlocked, lost, then asked":   {steps: []step{unlock, lose, ask}},
		"asked, unlocked, then lost":   {steps: []step{ask, unlock, lose}},
		"lost, unlocked, then asked":   {steps: []step{lose, unlock, ask}, wantLost: true},
		"asked, lost, then unlocked":   {steps: []step{ask, lose, unlock}, wantLost: true},
		"asked while live":             {steps: []step{ask}, wantLive: true},
		"asked twice, then unlocked":   {steps: []step{ask, ask, unlock}},
		"asked, lost, asked, unlocked": {steps: []step{ask, lose, ask, unlock}, wantLost: true},
	} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, memstore.New(), &leash.Options{Lease: time.Hour})
			defer c.Close()
			outer := mustLock(t, c.Mutex("ctx"), context.WithValue(context.Background(), ctxTestKey{}, "v"))
			defer outer.Unlock(context.Background())
			h := mustLock(t, c.Mutex("ctx"), outer.Context())
			var derived []context.Context
			for _, s := range tc.steps {
				switch s {
				case ask:
					d, cancel := context.WithCancel(h.Context())
					defer cancel()
					derived = append(derived, d)
				case unlock:
					_ = h.Unlock(context.Background())
				case lose:
					leash.ExpireLocally(outer)
					_ = outer.Err()
				}
			}
			for _, ctx := range append(derived, h.Context()) {
				if got := ctx.Value(ctxTestKey{}); got != "v" {
					t.Errorf("Value = %v, want the Lock context's value", got)
				}
				cause := context.Cause(ctx)
				var le *leash.LostError
				switch {
				case tc.wantLive:
					if ctx.Err() != nil || cause != nil {
						t.Errorf("Err, Cause = %v, %v; want a live context", ctx.Err(), cause)
					}
				case tc.wantLost:
					if !errors.As(cause, &le) || !errors.Is(ctx.Err(), context.Canceled) {
						t.Errorf("Err, Cause = %v, %v; want canceled by the loss", ctx.Err(), cause)
					}
				default:
					if !errors.Is(cause, leash.ErrReleased) {
						t.Errorf("Cause = %v, want ErrReleased", cause)
					}
				}
			}
		})
	}
}

type ctxTestKey struct{}

// TestCloseAfterPauseSaysExpired: a hold whose validity passed during a
// pause, before the watchdog ran, is reported expired by a Close on resume,
// not closed: it was not held until then.
func TestCloseAfterPauseSaysExpired(t *testing.T) {
	c := newClient(t, newFaultStore(t), &leash.Options{Lease: time.Hour})
	h := mustLock(t, c.Mutex("paused"), context.Background())
	leash.ExpireLocally(h)
	_ = c.Close()
	var le *leash.LostError
	if !errors.As(h.Err(), &le) || le.Reason != leash.ReasonExpired {
		t.Errorf("Err after a pause past the validity, then Close = %v, want lost: expired", h.Err())
	}
}
