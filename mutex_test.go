package leash_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

func synctestRun(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	synctest.Test(t, f)
}

func TestLockUnlock(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		h := mustLock(t, c.Mutex("orders:42"), context.Background())
		if got := heldBy(t, s, "orders:42"); got != h.Owner() {
			t.Fatalf("store owner = %q, want %q", got, h.Owner())
		}
		if h.Err() != nil || h.Context().Err() != nil {
			t.Fatalf("fresh hold: Err %v, ctx.Err %v; want nil", h.Err(), h.Context().Err())
		}
		mustUnlock(t, h)
		if got := heldBy(t, s, "orders:42"); got != "" {
			t.Errorf("store owner after Unlock = %q, want free", got)
		}
		if !errors.Is(h.Err(), leash.ErrReleased) || context.Cause(h.Context()) != leash.ErrReleased {
			t.Errorf("after Unlock: Err %v, cause %v; want ErrReleased", h.Err(), context.Cause(h.Context()))
		}
		select {
		case <-h.Lost():
			t.Errorf("Lost closed by Unlock")
		default:
		}
		if err := h.Unlock(context.Background()); !errors.Is(err, leash.ErrNotHeld) {
			t.Errorf("second Unlock = %v, want ErrNotHeld", err)
		}
	})
}

func TestTryLockReportsHolderLease(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: 10 * time.Second})
		defer c.Close()
		h := mustLock(t, c.Mutex("x"), context.Background())
		defer mustUnlock(t, h)
		time.Sleep(time.Second)
		h2, err := c.Mutex("x").TryLock(context.Background())
		var na *leash.NotAcquiredError
		if h2 != nil || !errors.As(err, &na) || !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("TryLock of a held lock = %v, %v; want *NotAcquiredError", h2, err)
		}
		if na.Remaining <= 0 || na.Remaining > 10*time.Second || na.Err != nil {
			t.Errorf("NotAcquiredError = %+v, want remaining in (0, 10s] and no cause", na)
		}
	})
}

func TestReentryThroughContext(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		m := c.Mutex("reentrant")
		h1 := mustLock(t, m, context.Background())
		h2 := mustLock(t, m, h1.Context())
		ctx3, cancel := context.WithCancel(h2.Context()) // derived contexts re-enter too
		defer cancel()
		h3 := mustLock(t, m, ctx3)
		if h2.Fence() != h1.Fence() || h3.Fence() != h1.Fence() {
			t.Errorf("re-entry fences = %d, %d; want %d", h2.Fence(), h3.Fence(), h1.Fence())
		}
		if n := s.acquires.Load(); n != 1 {
			t.Errorf("store acquires = %d, want 1 (re-entry is local)", n)
		}
		// A different context waits like anyone else, even in this goroutine.
		if _, err := m.TryLock(context.Background()); !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("TryLock with an unrelated context = %v, want ErrNotAcquired", err)
		}
		ctx, cancelWait := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancelWait()
		if _, err := m.Lock(ctx); !errors.Is(err, leash.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock with an unrelated context = %v, want ErrNotAcquired and DeadlineExceeded", err)
		}

		mustUnlock(t, h3)
		if h3.Context().Err() == nil {
			t.Errorf("inner hold context alive after its Unlock")
		}
		mustUnlock(t, h2)
		if heldBy(t, s, "reentrant") != h1.Owner() || h1.Context().Err() != nil {
			t.Fatalf("lock freed before the outermost Unlock")
		}
		mustUnlock(t, h1)
		if heldBy(t, s, "reentrant") != "" {
			t.Errorf("lock still held after the outermost Unlock")
		}
		// The released hold's context no longer re-enters: it takes a new tenure.
		h4, err := m.Lock(h1.Context())
		if err == nil {
			defer mustUnlock(t, h4)
		}
		if !errors.Is(err, leash.ErrNotAcquired) {
			t.Errorf("Lock with a released hold's (cancelled) context = %v, want ErrNotAcquired", err)
		}
	})
}

func TestReentryAnyOrder(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		m := c.Mutex("any-order")
		outer := mustLock(t, m, context.Background())
		inner := mustLock(t, m, outer.Context())
		mustUnlock(t, outer) // the first hold goes first
		if inner.Err() != nil || heldBy(t, s, "any-order") != inner.Owner() {
			t.Fatalf("lock not held by the remaining hold: Err %v", inner.Err())
		}
		mustUnlock(t, inner)
		if heldBy(t, s, "any-order") != "" {
			t.Errorf("lock held after the last Unlock")
		}
	})
}

func TestReentryOtherNameDoesNotLeak(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		a := mustLock(t, c.Mutex("a"), context.Background())
		defer mustUnlock(t, a)
		b := mustLock(t, c.Mutex("b"), a.Context()) // nested, different name: a new tenure
		defer mustUnlock(t, b)
		if b.Fence() == 0 || b.Owner() == a.Owner() {
			t.Errorf("b shares a's tenure: owner %q", b.Owner())
		}
		// Inside b, a re-enters (the context still carries a's tenure).
		a2 := mustLock(t, c.Mutex("a"), b.Context())
		if a2.Fence() != a.Fence() {
			t.Errorf("a re-entered from b's context with fence %d, want %d", a2.Fence(), a.Fence())
		}
		mustUnlock(t, a2)
	})
}

func TestExplicitOwnerSpansGoroutines(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		m := c.Mutex("job-lock")
		ctx := leash.WithOwner(context.Background(), "job-17")
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			holds []*leash.Hold
		)
		for range 5 {
			wg.Go(func() {
				h, err := m.Lock(ctx)
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				mu.Lock()
				holds = append(holds, h)
				mu.Unlock()
			})
		}
		wg.Wait()
		if len(holds) != 5 {
			t.Fatalf("got %d holds, want 5", len(holds))
		}
		if n := s.acquires.Load(); n != 1 {
			t.Errorf("store acquires = %d, want 1", n)
		}
		for _, h := range holds[1:] {
			if h.Fence() != holds[0].Fence() || h.Owner() != holds[0].Owner() {
				t.Errorf("holds differ: %q/%d vs %q/%d", h.Owner(), h.Fence(), holds[0].Owner(), holds[0].Fence())
			}
		}
		other, err := m.TryLock(leash.WithOwner(context.Background(), "job-18"))
		if !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("another owner's TryLock = %v, %v; want ErrNotAcquired", other, err)
		}
		for i, h := range holds {
			mustUnlock(t, h)
			held := heldBy(t, s, "job-lock") != ""
			if last := i == len(holds)-1; held == last {
				t.Fatalf("after %d of %d unlocks: held = %v", i+1, len(holds), held)
			}
		}
		// The owner starts a new tenure now, with a larger token.
		h := mustLock(t, m, ctx)
		defer mustUnlock(t, h)
		if h.Fence() <= holds[0].Fence() {
			t.Errorf("new tenure fence %d, want > %d", h.Fence(), holds[0].Fence())
		}
	})
}

// An owner's next tenure must not begin inside the store hold of its last
// one while that hold's release is still on its way: the release would then
// free the lock under the new holder, and another client could take it while
// the new holder believes it holds it.
func TestExplicitOwnerNextTenureWaitsForRelease(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		m := c.Mutex("job-lock")
		ctx := leash.WithOwner(context.Background(), "job-17")
		first := mustLock(t, m, ctx)
		gate, unlocked := s.unlockStalled(first) // the release is on its way, not yet applied

		next := lockAsync(t, m, ctx)
		synctest.Wait()
		select {
		case h := <-next:
			close(gate)
			<-unlocked
			t.Fatalf("the owner's next Lock returned %q (fence %d) while its last tenure's release was in flight", h.Owner(), h.Fence())
		default:
		}
		if first.Owner() == "" || !strings.HasSuffix(first.Owner(), "@job-17") {
			t.Errorf("Owner() = %q, want it to end in @job-17", first.Owner())
		}
		close(gate)
		if err := <-unlocked; err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		h := <-next
		if h == nil {
			t.FailNow()
		}
		defer mustUnlock(t, h)
		if got := heldBy(t, s, "job-lock"); got != h.Owner() || h.Owner() == first.Owner() {
			t.Errorf("store holder %q, new hold's owner %q, last tenure's %q: want the new, distinct owner", got, h.Owner(), first.Owner())
		}
		if h.Fence() <= first.Fence() {
			t.Errorf("new tenure fence %d, want > %d", h.Fence(), first.Fence())
		}
		other := newClient(t, s, nil)
		defer other.Close()
		if g, err := other.Mutex("job-lock").TryLock(context.Background()); !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("another client's TryLock = %v, %v while the owner holds the lock; want ErrNotAcquired", g, err)
		}
	})
}

func TestFencesGrowAcrossTenures(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c1, c2 := newClient(t, s, nil), newClient(t, s, nil)
		defer c1.Close()
		defer c2.Close()
		var last int64
		for i := range 20 {
			c := c1
			if i%2 == 1 {
				c = c2
			}
			h := mustLock(t, c.Mutex("fenced"), context.Background())
			if h.Fence() <= last {
				t.Fatalf("grant %d fence %d, want > %d", i, h.Fence(), last)
			}
			last = h.Fence()
			mustUnlock(t, h)
		}
	})
}

func TestHandOffWakesWaiter(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		holder, waiter := newClient(t, s, nil), newClient(t, s, nil)
		defer holder.Close()
		defer waiter.Close()
		h := mustLock(t, holder.Mutex("handoff"), context.Background())
		start := time.Now()
		got := make(chan time.Duration, 1)
		go func() {
			h2, err := waiter.Mutex("handoff").Lock(context.Background())
			if err != nil {
				t.Errorf("waiter Lock: %v", err)
				got <- 0
				return
			}
			got <- time.Since(start)
			_ = h2.Unlock(context.Background())
		}()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		mustUnlock(t, h)
		// Fake time: the waiter is woken by the release at 2s, not by its
		// fallback timer at the holder's remaining lease (about 28s later).
		if d := <-got; d != 2*time.Second {
			t.Errorf("waiter acquired after %v, want exactly 2s (at the release)", d)
		}
	})
}

func TestWaitFallsBackToLeaseExpiry(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		holder := newClient(t, s, &leash.Options{Lease: 3 * time.Second, RenewInterval: leash.NoRenewal})
		waiter := newClient(t, s, nil)
		defer holder.Close()
		defer waiter.Close()
		mustLock(t, holder.Mutex("expiring"), context.Background()) // never unlocked: a crashed holder
		start := time.Now()
		h, err := waiter.Mutex("expiring").Lock(context.Background())
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
		defer mustUnlock(t, h)
		if d := time.Since(start); d < 3*time.Second || d > 3*time.Second+200*time.Millisecond {
			t.Errorf("waiter acquired after %v, want just after the 3s lease", d)
		}
	})
}

func TestLocalWaitersShareOneWatch(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		holder, waiters := newClient(t, s, nil), newClient(t, s, nil)
		defer holder.Close()
		defer waiters.Close()
		h := mustLock(t, holder.Mutex("shared"), context.Background())
		const n = 8
		acquired := make(chan *leash.Hold, n)
		for range n {
			go func() {
				h, err := waiters.Mutex("shared").Lock(context.Background())
				if err != nil {
					t.Errorf("Lock: %v", err)
				}
				acquired <- h
			}()
		}
		synctest.Wait()
		if w := s.watches.Load(); w != 1 {
			t.Errorf("store watches for %d local waiters = %d, want 1", n, w)
		}
		before := s.acquires.Load()
		mustUnlock(t, h)
		synctest.Wait()
		// One release wakes one local waiter: one more acquire attempt, not n.
		if got := s.acquires.Load() - before; got != 1 {
			t.Errorf("acquire attempts after one release = %d, want 1", got)
		}
		for i := range n {
			h := <-acquired
			if h == nil {
				t.FailNow()
			}
			synctest.Wait()
			if i < n-1 && len(acquired) != 0 {
				t.Fatalf("two waiters hold the lock")
			}
			mustUnlock(t, h)
		}
		synctest.Wait()
		if info, _ := s.Inspect(context.Background(), "shared"); info.Waiters != 1 || info.Held {
			t.Errorf("after all waiters: %+v, want the watch lingering and the lock free", info)
		}
		time.Sleep(leash.WatchLinger)
		synctest.Wait()
		if info, _ := s.Inspect(context.Background(), "shared"); info.Waiters != 0 || info.Held {
			t.Errorf("after all waiters and the linger: %+v, want no watch and free", info)
		}
	})
}

// TestLingeringWatchSavesAnAttempt: a Lock that must subscribe makes two
// attempts before it waits (the first, and one after subscribing, so that a
// release in between is not missed); a Lock of a name whose watch lingers
// (this Client waited for it less than WatchLinger ago) joins the watch
// before its first attempt and makes that one only. The release reaches
// the waiter either way.
func TestLingeringWatchSavesAnAttempt(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		holder, waiter := newClient(t, s, nil), newClient(t, s, nil)
		defer holder.Close()
		defer waiter.Close()
		ctx := context.Background()
		// waitFor has the holder take the lock and the waiter wait for it;
		// it returns the waiter's attempts before it waited, once the
		// waiter, woken by the holder's Unlock, has the lock and gave it
		// back.
		waitFor := func() int64 {
			h := mustLock(t, holder.FairMutex("linger", nil), ctx)
			before := s.acquires.Load()
			got := lockAsync(t, waiter.FairMutex("linger", nil), ctx)
			synctest.Wait()
			n := s.acquires.Load() - before
			handOver(t, h, got)
			return n
		}
		if n := waitFor(); n != 2 {
			t.Errorf("a first wait made %d attempts before waiting, want 2 (before and after subscribing)", n)
		}
		if n := waitFor(); n != 1 {
			t.Errorf("a wait while the watch lingers made %d attempts before waiting, want 1", n)
		}
		time.Sleep(leash.WatchLinger)
		synctest.Wait()
		if n := waitFor(); n != 2 {
			t.Errorf("a wait after the watch ended made %d attempts before waiting, want 2", n)
		}
		// Closing the Client ends the watch that lingers.
		if info, _ := s.Inspect(ctx, "linger"); info.Waiters != 1 {
			t.Errorf("watches after the wait = %d, want the one lingering", info.Waiters)
		}
		if err := waiter.Close(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if info, _ := s.Inspect(ctx, "linger"); info.Waiters != 0 {
			t.Errorf("watches after Close = %d, want 0", info.Waiters)
		}
	})
}

func TestCancelWhileWaitingLeavesNothing(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		holder, waiter := newClient(t, s, nil), newClient(t, s, nil)
		defer holder.Close()
		defer waiter.Close()
		h := mustLock(t, holder.Mutex("cancel"), context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := waiter.Mutex("cancel").Lock(ctx)
			errc <- err
		}()
		time.Sleep(time.Second)
		cancel()
		err := <-errc
		if !errors.Is(err, leash.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Lock = %v, want ErrNotAcquired and Canceled", err)
		}
		time.Sleep(leash.WatchLinger) // the watch lingers that long
		synctest.Wait()
		info, _ := s.Inspect(context.Background(), "cancel")
		if info.Waiters != 0 {
			t.Errorf("watches left after a cancelled wait and the linger = %d, want 0", info.Waiters)
		}
		mustUnlock(t, h)
		if heldBy(t, s, "cancel") != "" {
			t.Errorf("lock held after the holder's Unlock: the cancelled waiter left one behind")
		}
	})
}

func TestGrantedAsContextEndsIsReleased(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		ctx, cancel := context.WithCancel(context.Background())
		s.acquireHook = func(g driver.Grant) error { cancel(); return nil } // granted, then ctx ends
		h, err := c.Mutex("late").Lock(ctx)
		if h != nil || !errors.Is(err, leash.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock = %v, %v; want ErrNotAcquired and Canceled", h, err)
		}
		if got := heldBy(t, s, "late"); got != "" {
			t.Errorf("lock left behind, held by %q", got)
		}
	})
}

func TestAmbiguousAcquireIsCleanedUp(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		// The server grants the lock, but the reply is lost.
		s.acquireHook = func(g driver.Grant) error { return errors.New("i/o timeout") }
		if _, err := c.Mutex("ambiguous").Lock(context.Background()); err == nil || errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("Lock = %v, want the store error", err)
		}
		s.acquireHook = nil
		synctest.Wait()
		time.Sleep(10 * time.Millisecond)
		if got := heldBy(t, s, "ambiguous"); got != "" {
			t.Errorf("lock left behind after an ambiguous acquire, held by %q", got)
		}
	})
}

// A store's definite refusal (ErrUnsupported, ErrUpgrade) granted nothing,
// so nothing is released in the background.
func TestRefusedAcquireLeavesNoCleanup(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		s.acquireHook = func(driver.Grant) error { return fmt.Errorf("store: %w", leash.ErrUnsupported) }
		if _, err := c.Mutex("refused").Lock(context.Background()); !errors.Is(err, leash.ErrUnsupported) {
			t.Fatalf("Lock = %v, want ErrUnsupported", err)
		}
		time.Sleep(time.Minute) // past the lease the cleanup would run for (the double grants in memstore before failing; only the reply matters)
		if n := s.releases.Load(); n != 0 {
			t.Errorf("%d background releases after a definite refusal, want 0", n)
		}
	})
}

// TestLockWithEndedContextSaysSo: a Lock whose ctx had ended before it
// tried is not acquired, and its error says why without claiming that
// another owner holds the lock (nobody does).
func TestLockWithEndedContextSaysSo(t *testing.T) {
	c := newClient(t, newFaultStore(t), nil)
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Mutex("free").Lock(ctx)
	if !errors.Is(err, leash.ErrNotAcquired) || !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "held by another owner") {
		t.Errorf("Lock with a cancelled ctx on a free name = %v; want ErrNotAcquired and Canceled, not held by another owner", err)
	}
}
