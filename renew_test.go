package leash_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/leash-go/leash/driver"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leash-go/leash"
)

func TestWatchdogKeepsLockPastLease(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		h := mustLock(t, c.Mutex("long-work"), context.Background())
		for range 50 { // 5s of work, 5 leases
			time.Sleep(100 * time.Millisecond)
			if heldBy(t, s, "long-work") != h.Owner() || h.Err() != nil {
				t.Fatalf("lock not held at %v: Err %v", time.Since(h.ValidUntil()), h.Err())
			}
		}
		if n := s.renewCalls.Load(); n < 13 || n > 17 {
			t.Errorf("renewals over 5s at a 333ms interval = %d, want about 15", n)
		}
		mustUnlock(t, h)
	})
}

func TestFixedLeaseExpires(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		m := c.Mutex("fixed", &leash.LockOptions{Lease: time.Second, RenewInterval: leash.NoRenewal})
		start := time.Now()
		h := mustLock(t, m, context.Background())
		wantLost(t, h, leash.ReasonExpired)
		// Told at lease - margin (1s - 50ms), before the store frees the lock.
		if d := time.Since(start); d != 950*time.Millisecond {
			t.Errorf("told after %v, want 950ms", d)
		}
		if heldBy(t, s, "fixed") != h.Owner() {
			t.Errorf("store freed the lock before the holder was told")
		}
		time.Sleep(100 * time.Millisecond)
		if heldBy(t, s, "fixed") != "" {
			t.Errorf("fixed lease still held after its lease")
		}
		if s.renewCalls.Load() != 0 {
			t.Errorf("fixed lease was renewed")
		}
		if err := h.Unlock(context.Background()); !errors.Is(err, leash.ErrLost) {
			t.Errorf("Unlock after loss = %v, want the LostError", err)
		}
	})
}

func TestFixedLeaseExplicitRenew(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		m := c.Mutex("renewable", &leash.LockOptions{Lease: time.Second, RenewInterval: leash.NoRenewal})
		h := mustLock(t, m, context.Background())
		for range 4 {
			time.Sleep(800 * time.Millisecond)
			before := h.ValidUntil()
			if err := h.Renew(context.Background()); err != nil {
				t.Fatalf("Renew: %v", err)
			}
			if !h.ValidUntil().After(before) {
				t.Errorf("ValidUntil did not move: %v -> %v", before, h.ValidUntil())
			}
		}
		if h.Err() != nil {
			t.Fatalf("renewed fixed lease lost: %v", h.Err())
		}
		mustUnlock(t, h)
	})
}

// TestRenewPartGoneLosesMultiLock: an explicit Renew, or an UnlockAfter, of a
// MultiLock one of whose names is gone while another's round trip fails,
// reports the loss (as the watchdog would), not the other part's error.
func TestRenewPartGoneLosesMultiLock(t *testing.T) {
	for call, renew := range map[string]func(*leash.Hold) error{
		"Renew":       func(h *leash.Hold) error { return h.Renew(context.Background()) },
		"UnlockAfter": func(h *leash.Hold) error { return h.UnlockAfter(context.Background(), time.Minute) },
	} {
		t.Run(call, func(t *testing.T) {
			s := newFaultStore(t)
			c := newClient(t, s, &leash.Options{RenewInterval: leash.NoRenewal})
			defer c.Close()
			h, err := c.MultiLock([]string{"a", "b"}).Lock(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.ForceRelease(context.Background(), "a"); err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			s.renewErr, s.renewErrOf = errors.New("connection reset"), "b"
			s.mu.Unlock()
			var le *leash.LostError
			if err := renew(h); !errors.As(err, &le) || le.Reason != leash.ReasonReleasedElsewhere || le.Name != "a" {
				t.Fatalf("%s with %q gone and %q unreachable = %v; want %q lost, released elsewhere", call, "a", "b", err, "a")
			}
		})
	}
}

func TestUnreachableStoreToldBeforeExpiry(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		start := time.Now()
		h := mustLock(t, c.Mutex("partitioned"), context.Background())
		s.setRenewErr(errors.New("connection refused"))
		le := wantLost(t, h, leash.ReasonUnreachable)
		if le.Err == nil || le.Err.Error() != "connection refused" {
			t.Errorf("LostError.Err = %v, want the last store error", le.Err)
		}
		if d := time.Since(start); d != 950*time.Millisecond {
			t.Errorf("told after %v, want 950ms (lease - margin from the grant)", d)
		}
		// The store still has the lock: nobody else can have it yet.
		if heldBy(t, s, "partitioned") != h.Owner() {
			t.Errorf("store freed the lock before the holder was told")
		}
		if n := s.renewCalls.Load(); n < 3 {
			t.Errorf("renewal attempts = %d, want retries until the deadline", n)
		}
	})
}

func TestTransientRenewFailureKeepsLock(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		h := mustLock(t, c.Mutex("flaky"), context.Background())
		s.setRenewErr(errors.New("reset by peer"))
		time.Sleep(500 * time.Millisecond) // first renewal (333ms) and retries fail
		s.setRenewErr(nil)
		time.Sleep(3 * time.Second)
		if err := h.Err(); err != nil {
			t.Fatalf("lock lost after a transient failure: %v", err)
		}
		mustUnlock(t, h)
	})
}

func TestStoreLossIsReported(t *testing.T) {
	for name, tc := range map[string]struct {
		steal  bool
		reason leash.Reason
	}{
		"released elsewhere": {false, leash.ReasonReleasedElsewhere},
		"taken over":         {true, leash.ReasonTakenOver},
	} {
		t.Run(name, func(t *testing.T) {
			synctestRun(t, func(t *testing.T) {
				s := newFaultStore(t)
				// The holder hears no revocation: its renewal is what
				// reports the loss.
				c := newClient(t, deafStore{s}, &leash.Options{Lease: 3 * time.Second})
				other := newClient(t, s, nil)
				defer c.Close()
				defer other.Close()
				h := mustLock(t, c.Mutex("victim"), context.Background())
				if ok, err := other.ForceUnlockNow(context.Background(), "victim"); !ok || err != nil {
					t.Fatalf("ForceUnlock = %v, %v", ok, err)
				}
				if tc.steal {
					h2 := mustLock(t, other.Mutex("victim"), context.Background())
					defer mustUnlock(t, h2)
				}
				start := time.Now()
				wantLost(t, h, tc.reason)
				if d := time.Since(start); d > time.Second {
					t.Errorf("told after %v, want by the next renewal (1s)", d)
				}
			})
		})
	}
}

func TestUnlockFindsLockGone(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		h := mustLock(t, c.Mutex("gone"), context.Background())
		if _, err := s.ForceRelease(context.Background(), "gone"); err != nil {
			t.Fatal(err)
		}
		err := h.Unlock(context.Background())
		var le *leash.LostError
		if !errors.As(err, &le) || le.Reason != leash.ReasonReleasedElsewhere || !errors.Is(err, leash.ErrNotHeld) {
			t.Errorf("Unlock of a force-released lock = %v, want a LostError (released elsewhere) matching ErrNotHeld", err)
		}
	})
}

func TestMaxHoldStopsRenewal(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second, MaxHold: 4 * time.Second})
		defer c.Close()
		start := time.Now()
		h := mustLock(t, c.Mutex("hung"), context.Background())
		wantLost(t, h, leash.ReasonMaxHold)
		if d := time.Since(start); d != 4*time.Second {
			t.Errorf("told after %v, want 4s", d)
		}
		renewals := s.renewCalls.Load()
		time.Sleep(2 * time.Second)
		if s.renewCalls.Load() != renewals {
			t.Errorf("renewed after MaxHold")
		}
		if heldBy(t, s, "hung") != "" {
			t.Errorf("lock still held a lease after MaxHold")
		}
	})
}

func TestLivenessStopsRenewalOfStalledHolder(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second, Liveness: 2 * time.Second})
		defer c.Close()
		alive := mustLock(t, c.Mutex("alive"), context.Background())
		stalled := mustLock(t, c.Mutex("stalled"), context.Background())
		for range 50 { // 5s: the live holder touches every 100ms
			time.Sleep(100 * time.Millisecond)
			alive.Touch()
		}
		if alive.Err() != nil {
			t.Errorf("touched hold lost: %v", alive.Err())
		}
		wantLost(t, stalled, leash.ReasonStalled)
		if heldBy(t, s, "stalled") != "" {
			t.Errorf("stalled holder's lock still renewed")
		}
		mustUnlock(t, alive)
	})
}

func TestLossCancelsEveryHold(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		m := c.Mutex("nested")
		h1 := mustLock(t, m, context.Background())
		h2 := mustLock(t, m, h1.Context())
		s.setRenewErr(errors.New("down"))
		wantLost(t, h1, leash.ReasonUnreachable)
		wantLost(t, h2, leash.ReasonUnreachable)
		if err := h2.Unlock(context.Background()); !errors.Is(err, leash.ErrLost) {
			t.Errorf("inner Unlock after loss = %v, want ErrLost", err)
		}
	})
}

func TestRenewalBatching(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: 3 * time.Second}) // renewed every 1s
		defer c.Close()
		const n = 1000
		holds := make([]*leash.Hold, 0, n)
		for i := range n {
			holds = append(holds, mustLock(t, c.Mutex(fmt.Sprintf("batch/%d", i)), context.Background()))
			time.Sleep(3 * time.Millisecond) // acquisitions spread over 3s: three intervals
		}
		time.Sleep(3 * time.Second) // cohorts merge within two renewal rounds
		before := len(s.renewCallSizes())
		time.Sleep(10 * time.Second) // ten intervals
		calls := s.renewCallSizes()[before:]
		// One cohort: every call renews every lock. A round comes 0.9 to 1
		// interval after the last (the jitter), so ten intervals hold 10 to
		// 12 rounds; the sizes, not the count, show the batching.
		for i, size := range calls {
			if size != n {
				t.Errorf("renew call %d of %d renewed %d locks, want all %d (one cohort)", i+1, len(calls), size, n)
			}
		}
		if len(calls) < 10 || len(calls) > 12 {
			t.Errorf("renew calls over 10 intervals = %d, want 10 to 12 (one per interval, less jitter)", len(calls))
		}
		for _, h := range holds {
			if h.Err() != nil {
				t.Fatalf("hold lost: %v", h.Err())
			}
			mustUnlock(t, h)
		}
	})
}

// A lock with a short lease taken while the watchdog waits for a long one's
// renewal must still be renewed within its own interval.
func TestShortLeaseAfterLongOneRenewsOnTime(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil) // 30s lease, renewed every 10s
		defer c.Close()
		long := mustLock(t, c.Mutex("long"), context.Background())
		defer mustUnlock(t, long)
		for i := range 100 { // locks taken one after another
			mustUnlock(t, mustLock(t, c.Mutex(fmt.Sprintf("quick/%d", i)), context.Background()))
			time.Sleep(time.Millisecond)
		}
		short := mustLock(t, c.Mutex("short", &leash.LockOptions{Lease: 3 * time.Second}), context.Background())
		defer mustUnlock(t, short)
		time.Sleep(time.Second + time.Millisecond) // one interval of the short lease
		if n := s.renewedOwner(short.Owner()); n == 0 {
			t.Fatalf("short lease not renewed within its interval (1s)")
		}
		time.Sleep(10 * time.Second)
		if err := short.Err(); err != nil {
			t.Fatalf("short lease: %v", err)
		}
		if n := s.renewedOwner(long.Owner()); n == 0 {
			t.Errorf("long lease not renewed within its interval (10s)")
		}
	})
}

func TestNoRenewalAfterUnlock(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		var owners []string
		for i := range 100 {
			h := mustLock(t, c.Mutex(fmt.Sprintf("n/%d", i)), context.Background())
			time.Sleep(time.Duration(i) * time.Millisecond)
			owners = append(owners, h.Owner())
			mustUnlock(t, h)
		}
		seen := make([]int, len(owners))
		for i, o := range owners {
			seen[i] = s.renewedOwner(o)
		}
		time.Sleep(3 * time.Second)
		for i, o := range owners {
			if got := s.renewedOwner(o); got != seen[i] {
				t.Errorf("lock %d renewed %d more times after Unlock", i, got-seen[i])
			}
		}
	})
}

func TestGoroutinesDoNotGrowWithLocks(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		synctest.Wait()
		base := runtime.NumGoroutine()
		var holds []*leash.Hold
		for i := range 2000 {
			holds = append(holds, mustLock(t, c.Mutex(fmt.Sprintf("g/%d", i)), context.Background()))
		}
		time.Sleep(2 * time.Second) // several renewal rounds
		synctest.Wait()
		if got := runtime.NumGoroutine(); got > base+2 {
			t.Errorf("goroutines with 2000 held locks = %d, want at most %d", got, base+2)
		}
		for _, h := range holds {
			mustUnlock(t, h)
		}
	})
}

func TestCloseReleasesAndTells(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		other := newClient(t, s, nil)
		defer other.Close()
		h1 := mustLock(t, c.Mutex("a"), context.Background())
		h2 := mustLock(t, c.Mutex("b"), context.Background())
		blocker := mustLock(t, other.Mutex("c"), context.Background())
		defer mustUnlock(t, blocker)
		waitErr := make(chan error, 1)
		go func() {
			_, err := c.Mutex("c").Lock(context.Background())
			waitErr <- err
		}()
		synctest.Wait()
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wantLost(t, h1, leash.ReasonClosed)
		wantLost(t, h2, leash.ReasonClosed)
		if heldBy(t, s, "a") != "" || heldBy(t, s, "b") != "" {
			t.Errorf("locks still held after Close")
		}
		if err := <-waitErr; !errors.Is(err, leash.ErrClosed) {
			t.Errorf("waiting Lock after Close = %v, want ErrClosed", err)
		}
		if _, err := c.Mutex("a").Lock(context.Background()); !errors.Is(err, leash.ErrClosed) {
			t.Errorf("Lock after Close = %v, want ErrClosed", err)
		}
		if _, err := c.Inspect(context.Background(), "a"); !errors.Is(err, leash.ErrClosed) {
			t.Errorf("Inspect after Close = %v, want ErrClosed", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close = %v, want nil", err)
		}
		if err := h1.Unlock(context.Background()); !errors.Is(err, leash.ErrLost) {
			t.Errorf("Unlock after Close = %v, want ErrLost", err)
		}
	})
}

// deafStore is a store whose clients hear no revocations, as when the
// message is lost: they learn of a forced release at their next renewal.
type deafStore struct{ *faultStore }

func (deafStore) WatchRevokes(context.Context, string, func(driver.Revocation)) (func(), error) {
	return nil, errors.New("this test's store delivers no revocations")
}

// TestRenewalValidityFromSend: a watchdog renewal whose answer comes late
// extends the validity from the renewal's send time, not from when the
// answer arrived: the store counted the lease from no later than the send.
func TestRenewalValidityFromSend(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second}) // margin 50ms, interval 333ms
		defer c.Close()
		h := mustLock(t, c.Mutex("slow"), context.Background())
		sent := make(chan time.Time, 1)
		s.mu.Lock()
		s.renewHook = func([]driver.Request) {
			s.mu.Lock()
			s.renewHook = nil
			s.mu.Unlock()
			sent <- time.Now()
			time.Sleep(200 * time.Millisecond) // the answer is late
		}
		s.mu.Unlock()
		at := <-sent
		time.Sleep(250 * time.Millisecond)
		if want := at.Add(950 * time.Millisecond); !h.ValidUntil().Equal(want) {
			t.Errorf("validity after a renewal sent at +0 and answered at +200ms ends %v after the send, want 950ms",
				h.ValidUntil().Sub(at))
		}
		mustUnlock(t, h)
	})
}

// TestHoldRenewValidityFromSend: the same for Hold.Renew.
func TestHoldRenewValidityFromSend(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second, RenewInterval: leash.NoRenewal})
		defer c.Close()
		h := mustLock(t, c.Mutex("slow"), context.Background())
		time.Sleep(100 * time.Millisecond)
		s.mu.Lock()
		s.renewHook = func([]driver.Request) { time.Sleep(200 * time.Millisecond) }
		s.mu.Unlock()
		at := time.Now()
		if err := h.Renew(context.Background()); err != nil {
			t.Fatal(err)
		}
		if want := at.Add(950 * time.Millisecond); !h.ValidUntil().Equal(want) {
			t.Errorf("validity after Renew sent at +0 and answered at +200ms ends %v after the send, want 950ms",
				h.ValidUntil().Sub(at))
		}
		mustUnlock(t, h)
	})
}
