package leash_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
)

// sessionStore is memstore's session store, counting keep-alives and
// renewal calls and failing keep-alives on demand.
type sessionStore struct {
	*memstore.Sessions
	keepAlives, renewCalls atomic.Int64

	mu      sync.Mutex
	keepErr error
	relErr  error // when set, every release fails with it
}

func (s *sessionStore) Release(ctx context.Context, req driver.Request) error {
	s.mu.Lock()
	err := s.relErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Sessions.Release(ctx, req)
}

func (s *sessionStore) setRelErr(err error) {
	s.mu.Lock()
	s.relErr = err
	s.mu.Unlock()
}

func newSessionStore() *sessionStore { return &sessionStore{Sessions: memstore.NewSessions()} }

func (s *sessionStore) KeepAlive(ctx context.Context, client string) error {
	s.keepAlives.Add(1)
	s.mu.Lock()
	err := s.keepErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Sessions.KeepAlive(ctx, client)
}

func (s *sessionStore) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	s.renewCalls.Add(1)
	return s.Sessions.Renew(ctx, reqs)
}

func (s *sessionStore) setKeepErr(err error) {
	s.mu.Lock()
	s.keepErr = err
	s.mu.Unlock()
}

// TestSessionKeepsEveryLockWithOneKeepAlive holds twenty locks for five
// leases on a session store: the watchdog keeps them with one keep-alive per
// round, not twenty renewals, and every hold stays valid.
func TestSessionKeepsEveryLockWithOneKeepAlive(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newSessionStore()
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		var hs []*leash.Hold
		for i := range 20 {
			hs = append(hs, mustLock(t, c.Mutex(fmt.Sprintf("job/%d", i)), context.Background()))
		}
		for range 50 { // 5s of work, 5 leases
			time.Sleep(100 * time.Millisecond)
			for _, h := range hs {
				if heldBy(t, s, h.Name()) != h.Owner() || h.Err() != nil {
					t.Fatalf("%s not held: Err %v", h.Name(), h.Err())
				}
			}
		}
		// One round per 333ms interval: about 15 keep-alives for all twenty
		// locks, each round with one call that checks them.
		if n := s.keepAlives.Load(); n < 13 || n > 17 {
			t.Errorf("keep-alives over 5s at a 333ms interval = %d, want about 15 (one per round, not one per lock)", n)
		}
		if k, r := s.keepAlives.Load(), s.renewCalls.Load(); r != k {
			t.Errorf("renewal calls = %d, keep-alives = %d: want one check per keep-alive", r, k)
		}
		for _, h := range hs {
			mustUnlock(t, h)
		}
	})
}

// TestSessionLockForcedFreeIsLostAlone forces one of two locks of a session
// free: its holder is told (released elsewhere), and the other lock, kept
// by the same session, stays held.
func TestSessionLockForcedFreeIsLostAlone(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newSessionStore()
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		forced := mustLock(t, c.Mutex("forced"), context.Background())
		kept := mustLock(t, c.Mutex("kept"), context.Background())
		if ok, err := s.ForceRelease(context.Background(), "forced"); err != nil || !ok {
			t.Fatalf("ForceRelease = %v, %v", ok, err)
		}
		wantLost(t, forced, leash.ReasonReleasedElsewhere)
		time.Sleep(3 * time.Second)
		if err := kept.Err(); err != nil || heldBy(t, s, "kept") != kept.Owner() {
			t.Fatalf("the other lock of the session: Err %v, held by %q", err, heldBy(t, s, "kept"))
		}
		mustUnlock(t, kept)
	})
}

// TestSessionKeepAliveFailureToldBeforeExpiry cuts the keep-alives: the
// holder is told at its validity deadline (the grant plus the lease, less
// the margin), while the store still has the lock.
func TestSessionKeepAliveFailureToldBeforeExpiry(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newSessionStore()
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		start := time.Now()
		h := mustLock(t, c.Mutex("partitioned"), context.Background())
		s.setKeepErr(errors.New("connection refused"))
		time.Sleep(940 * time.Millisecond)
		// The store still has the lock: nobody else can have it yet.
		if h.Err() != nil || heldBy(t, s, "partitioned") != h.Owner() {
			t.Fatalf("at 940ms: Err %v, held by %q; want held and not yet told", h.Err(), heldBy(t, s, "partitioned"))
		}
		le := wantLost(t, h, leash.ReasonUnreachable)
		if le.Err == nil || !errors.Is(le.Err, s.keepErr) {
			t.Errorf("LostError.Err = %v, want the keep-alive's error", le.Err)
		}
		if d := time.Since(start); d != 950*time.Millisecond {
			t.Errorf("told after %v, want 950ms (lease - margin from the grant)", d)
		}
	})
}

// TestSessionEndedLosesEveryHold: a keep-alive that finds the session ended
// (the server let it expire) loses every lock it kept at once, those of
// later renewal rounds too.
func TestSessionEndedLosesEveryHold(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newSessionStore()
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		a := mustLock(t, c.Mutex("a"), context.Background()) // renewed every 333ms
		// renewed every second, and not yet eligible in a's first round
		b := mustLock(t, c.Mutex("b", &leash.LockOptions{Lease: 3 * time.Second}), context.Background())
		start := time.Now()
		s.setKeepErr(fmt.Errorf("lease not found: %w", driver.ErrNotHeld))
		for _, h := range []*leash.Hold{a, b} {
			le := wantLost(t, h, leash.ReasonReleasedElsewhere)
			if !errors.Is(le.Err, driver.ErrNotHeld) {
				t.Errorf("%s: LostError.Err = %v, want the keep-alive's answer", h.Name(), le.Err)
			}
			if d := time.Since(start); d > 400*time.Millisecond {
				t.Errorf("%s told %v after the session ended, want at the first round (333ms)", h.Name(), d)
			}
		}
	})
}

// TestSessionExplicitRenewKeepsAlive: Hold.Renew on a session store sends a
// keep-alive and checks the lock, and extends the hold's validity.
func TestSessionExplicitRenewKeepsAlive(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newSessionStore()
		c := newClient(t, s, &leash.Options{Lease: time.Second, RenewInterval: leash.NoRenewal})
		defer c.Close()
		h := mustLock(t, c.Mutex("fixed"), context.Background())
		time.Sleep(800 * time.Millisecond)
		before := h.ValidUntil()
		if err := h.Renew(context.Background()); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		if n := s.keepAlives.Load(); n != 1 {
			t.Errorf("keep-alives = %d, want 1", n)
		}
		if !h.ValidUntil().After(before) {
			t.Errorf("ValidUntil %v not extended past %v", h.ValidUntil(), before)
		}
		time.Sleep(800 * time.Millisecond) // past the first lease: kept by the keep-alive
		if err := h.Err(); err != nil || heldBy(t, s, "fixed") != h.Owner() {
			t.Fatalf("after Renew: Err %v, held by %q", err, heldBy(t, s, "fixed"))
		}
		mustUnlock(t, h)
	})
}

// TestSessionUnlockAfterIsRefused: a lock kept by a session cannot be left to
// expire on its own later; UnlockAfter says so and the hold stays held.
func TestSessionUnlockAfterIsRefused(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newSessionStore()
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		h := mustLock(t, c.Mutex("tail"), context.Background())
		err := h.UnlockAfter(context.Background(), time.Minute)
		if !errors.Is(err, leash.ErrUnsupported) {
			t.Fatalf("UnlockAfter = %v, want ErrUnsupported", err)
		}
		if h.Err() != nil || heldBy(t, s, "tail") != h.Owner() {
			t.Fatalf("after the refusal: Err %v, held by %q; want still held", h.Err(), heldBy(t, s, "tail"))
		}
		mustUnlock(t, h)
	})
}

// TestSessionLockPastMaxHoldIsReleased: a lock whose holder stopped renewing
// it (MaxHold) is not kept alive by the keep-alives of the Client's other
// locks: the core releases it, and another client takes it about when its
// lease would have ended on any other store.
func TestSessionLockPastMaxHoldIsReleased(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newSessionStore()
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		other := newClient(t, s, nil)
		defer other.Close()
		kept := mustLock(t, c.Mutex("kept"), context.Background())
		capped := mustLock(t, c.Mutex("capped", &leash.LockOptions{MaxHold: 1500 * time.Millisecond}), context.Background())
		start := time.Now()
		wantLost(t, capped, leash.ReasonMaxHold)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h, err := other.Mutex("capped").Lock(ctx)
		if err != nil {
			t.Fatalf("other client's Lock: %v (the session kept the lock alive after its holder stopped)", err)
		}
		if d := time.Since(start); d > 2500*time.Millisecond {
			t.Errorf("other client took the lock %v after the grant, want by MaxHold + one lease (2.5s)", d)
		}
		if kept.Err() != nil {
			t.Errorf("the other lock of the session was lost: %v", kept.Err())
		}
		mustUnlock(t, h)
		mustUnlock(t, kept)
	})
}

// TestSessionFailedReleaseIsRetriedPastTheLease: an unlock whose release
// fails is retried in the background; on a session store it goes on past
// the lease (the Client's keep-alives keep the lock), until the store
// answers, and then another client takes the lock.
func TestSessionFailedReleaseIsRetriedPastTheLease(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newSessionStore()
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		other := newClient(t, s, nil)
		defer other.Close()
		kept := mustLock(t, c.Mutex("kept"), context.Background())
		h := mustLock(t, c.Mutex("released"), context.Background())
		s.setRelErr(errors.New("connection reset"))
		if err := h.Unlock(context.Background()); err == nil {
			t.Fatalf("Unlock with the store failing = nil, want its error")
		}
		time.Sleep(3 * time.Second) // three leases: the keep-alives keep the lock
		if heldBy(t, s, "released") == "" {
			t.Fatalf("the lock ended while releases failed; the test needs the session to keep it")
		}
		s.setRelErr(nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		o, err := other.Mutex("released").Lock(ctx)
		if err != nil {
			t.Fatalf("other client's Lock: %v (the background release gave up while the session kept the lock)", err)
		}
		mustUnlock(t, o)
		mustUnlock(t, kept)
	})
}
