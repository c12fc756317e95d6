package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// requiredTests are the required core: exclusive, leased, fenced KindMutex
// locks. They call Acquire, Renew and Release and nothing else, and see a
// lock's state as other owners do: a refused acquire and its remaining lease,
// a renewal's status, a retried acquire's token.
var requiredTests = []test{
	{name: "a free lock is granted with a positive token", fn: testAcquireFree},
	{name: "a held lock is refused with the holder's remaining lease", fn: testAcquireHeld},
	{name: "an acquire by the holder is a retry: same token, lease refreshed", fn: testRetry},
	{name: "a release frees the lock at once, and only once", fn: testRelease},
	{name: "a release by another owner is refused and changes nothing", fn: testNonOwnerRelease},
	{name: "a renewal by another owner is refused and changes nothing", fn: testNonOwnerRenew},
	{name: "a refused acquire changes nothing", fn: testNonOwnerOverwrite},
	{name: "renew reports each lock apart", needs: []capability{capExtends}, fn: testRenewBatch},
	{name: "renew sets the lease from now, a shorter one too", needs: []capability{capExtends}, fn: testRenewShorter},
	{name: "renew never creates a lock", fn: testRenewNeverCreates},
	{name: "renew of many locks in one call reports every one", fn: testRenewLarge},
	{name: "a lease expires on its own", fn: testExpiry},
	{name: "fencing tokens only grow", fn: testFenceMonotonic},
	{name: "release of a lock never held is refused", fn: testReleaseAbsent},
	{name: "concurrent acquires grant once, concurrent releases free once", fn: testConcurrentAcquire},
	{name: "unusual names work", fn: testNames},
}

func testAcquireFree(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), long)
	g := mustAcquire(t, s, r)
	if g.Fence <= 0 {
		t.Errorf("Acquire of a free lock = fence %d, want a positive fence", g.Fence)
	}
	wantHeldBy(t, s, n, r, g.Fence)
}

func testAcquireHeld(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	mustAcquire(t, s, req(name, n.owner(), 2*time.Second))
	busy(t, s, n, req(name, "", long), 2*time.Second)
}

func testRetry(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), short)
	g1 := mustAcquire(t, s, r)
	r.Lease = long
	g2 := mustAcquire(t, s, r) // the answer to g1 was lost, say
	if g2.Fence != g1.Fence {
		t.Errorf("retried acquire = fence %d, want the tenure's %d", g2.Fence, g1.Fence)
	}
	if rem := busy(t, s, n, r, long); rem <= short {
		t.Errorf("remaining lease after a retry with a %v lease = %v, want > %v (refreshed)", long, rem, short)
	}
	mustAcquire(t, s, r)
	mustRelease(t, s, r) // one release drops the lock, however many retries granted it
	if g := wantFree(t, s, n, driver.KindMutex, r.Name); g.Fence <= g1.Fence {
		t.Errorf("fence after release = %d, want > %d", g.Fence, g1.Fence)
	}
}

func testRelease(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, b := req(name, n.owner(), long), req(name, n.owner(), long)
	ga := mustAcquire(t, s, a)
	mustRelease(t, s, a)
	gb := mustAcquire(t, s, b) // at once: no lease to wait out
	if gb.Fence <= ga.Fence {
		t.Errorf("fence of the next holder = %d, want > %d", gb.Fence, ga.Fence)
	}
	wantReleaseNotHeld(t, s, a, "by the owner, a second time")
	wantHeldBy(t, s, n, b, gb.Fence)
}

func testNonOwnerRelease(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), 2*time.Second)
	g := mustAcquire(t, s, r)
	other := r
	other.Owner = n.owner()
	wantReleaseNotHeld(t, s, other, "by a non-owner")
	busy(t, s, n, r, 2*time.Second)
	wantHeldBy(t, s, n, r, g.Fence)
}

func testNonOwnerRenew(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), 2*time.Second)
	g := mustAcquire(t, s, r)
	wantRenew(t, s, req(r.Name, n.owner(), long), driver.RenewTaken, "by a non-owner")
	busy(t, s, n, r, 2*time.Second) // not extended to the non-owner's lease
	wantHeldBy(t, s, n, r, g.Fence)
}

func testNonOwnerOverwrite(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), 2*time.Second)
	g := mustAcquire(t, s, r)
	mustNotAcquire(t, s, req(r.Name, n.owner(), long))
	busy(t, s, n, r, 2*time.Second) // not extended to the refused owner's lease
	wantHeldBy(t, s, n, r, g.Fence)
}

func testRenewBatch(t *testing.T, s driver.Store, n *namer) {
	held, gone, taken, o := n.name(), n.name(), n.name(), n.owner()
	mustAcquire(t, s, req(held, o, 2*time.Second))
	mustAcquire(t, s, req(taken, n.owner(), long))
	res := s.Renew(ctx(t), []driver.Request{req(held, o, long), req(gone, o, long), req(taken, o, long)})
	want := []driver.RenewStatus{driver.Renewed, driver.RenewGone, driver.RenewTaken}
	if len(res) != len(want) {
		t.Fatalf("Renew(3 requests) returned %d results", len(res))
	}
	for i, r := range res {
		if r.Err != nil || r.Status != want[i] {
			t.Errorf("Renew result %d = status %d err %v, want status %d", i, r.Status, r.Err, want[i])
		}
	}
	if rem := busy(t, s, n, req(held, "", long), long); rem <= 2*time.Second {
		t.Errorf("remaining lease after renewal to %v = %v, want > 2s", long, rem)
	}
}

// testRenewShorter renews with a lease shorter than the one granted, as
// Hold.UnlockAfter does: the lock then ends when the shorter lease does.
func testRenewShorter(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), long)
	g := mustAcquire(t, s, r)
	r.Lease = 100 * time.Millisecond
	wantRenew(t, s, r, driver.Renewed, "by the owner with a shorter lease")
	if rem := busy(t, s, n, r, long); rem > r.Lease {
		t.Fatalf("remaining lease after renewal to %v = %v, want <= %v", r.Lease, rem, r.Lease)
	}
	if g2 := acquireWithin(t, s, req(r.Name, n.owner(), long), r.Lease+wakeWait); g2.Fence <= g.Fence {
		t.Errorf("fence after the shortened lease ran out = %d, want > %d", g2.Fence, g.Fence)
	}
}

func testRenewNeverCreates(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), long)
	wantRenew(t, s, r, driver.RenewGone, "of an absent lock")
	wantFree(t, s, n, driver.KindMutex, r.Name)
	wantReleaseNotHeld(t, s, r, "by the owner whose renewal found nothing")
}

// testRenewLarge renews many locks in one call (more than one batch for any
// sensible batch size) and checks every result.
func testRenewLarge(t *testing.T, s driver.Store, n *namer) {
	const count = 1200
	o := n.owner()
	reqs := make([]driver.Request, count)
	for i := range reqs {
		reqs[i] = req(n.name(), o, long)
		if i%3 != 2 { // every third lock is never acquired
			mustAcquire(t, s, reqs[i])
		}
	}
	res := s.Renew(ctx(t), reqs)
	if len(res) != count {
		t.Fatalf("Renew(%d requests) returned %d results", count, len(res))
	}
	for i, r := range res {
		want := driver.Renewed
		if i%3 == 2 {
			want = driver.RenewGone
		}
		if r.Err != nil || r.Status != want {
			t.Fatalf("Renew result %d = status %d err %v, want %d", i, r.Status, r.Err, want)
		}
	}
}

func testExpiry(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), short)
	g1 := mustAcquire(t, s, r)
	g2 := acquireWithin(t, s, req(r.Name, n.owner(), long), short+wakeWait)
	if g2.Fence <= g1.Fence {
		t.Errorf("fence after expiry = %d, want > %d", g2.Fence, g1.Fence)
	}
	wantRenew(t, s, r, driver.RenewTaken, "by the expired owner")
	wantReleaseNotHeld(t, s, r, "by the expired owner")
	if g, err := s.Acquire(ctx(t), r); err != nil || g.Acquired {
		t.Errorf("retried acquire by the expired owner = %+v, %v; want refused: its tenure ended", g, err)
	}
}

func testFenceMonotonic(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	var last int64
	for i := range 50 {
		r := req(name, n.owner(), long)
		g := mustAcquire(t, s, r)
		if g.Fence <= last {
			t.Fatalf("grant %d fence = %d, want > %d", i, g.Fence, last)
		}
		last = g.Fence
		if i%5 == 0 {
			if g2 := mustAcquire(t, s, r); g2.Fence != g.Fence {
				t.Fatalf("retried acquire fence = %d, want %d", g2.Fence, g.Fence)
			}
			mustNotAcquire(t, s, req(name, n.owner(), long))
		}
		mustRelease(t, s, r)
	}
}

func testReleaseAbsent(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), long)
	wantReleaseNotHeld(t, s, r, "of a lock never held")
	wantFree(t, s, n, driver.KindMutex, r.Name)
}

func testConcurrentAcquire(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	const workers = 16
	reqs := make([]driver.Request, workers)
	for i := range reqs {
		reqs[i] = req(name, n.owner(), long)
	}
	// all runs op for every request at once and returns how many succeeded.
	all := func(op func(r driver.Request) (bool, error)) int64 {
		var (
			wg    sync.WaitGroup
			count atomic.Int64
			errs  = make(chan error, workers)
			start = make(chan struct{})
		)
		for _, r := range reqs {
			wg.Go(func() {
				<-start
				ok, err := op(r)
				if err != nil {
					errs <- err
				}
				if ok {
					count.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		return count.Load()
	}
	granted := all(func(r driver.Request) (bool, error) {
		g, err := s.Acquire(context.Background(), r)
		return g.Acquired, err
	})
	if granted != 1 {
		t.Errorf("%d concurrent acquires by different owners granted %d times, want 1", workers, granted)
	}
	freed := all(func(r driver.Request) (bool, error) {
		err := s.Release(context.Background(), r)
		if errors.Is(err, driver.ErrNotHeld) {
			return false, nil
		}
		return err == nil, err
	})
	if freed != 1 {
		t.Errorf("%d concurrent releases by every owner succeeded %d times, want 1 (the holder's)", workers, freed)
	}
	wantFree(t, s, n, driver.KindMutex, name)
}

// unusualNames are names below base that leash accepts and s takes, with
// characters that are special to stores, formats and patterns, and one of
// the longest length.
func unusualNames(t *testing.T, s driver.Store, base string) []string {
	t.Helper()
	longName := base + "/"
	for len(longName) < leash.MaxNameLen {
		longName += "x"
	}
	var names []string
	for _, name := range []string{
		base + "/with spaces and ünïcödé ✓",
		base + "/{tagged}",
		base + "/quote\"and'apostrophe",
		base + "/percent%s%d",
		base + "/colon:star*question?[class]",
		longName[:leash.MaxNameLen],
	} {
		if err := leash.ValidateName(name); err != nil {
			t.Fatalf("ValidateName(%q) = %v", name, err)
		}
		if nc, ok := s.(driver.NameChecker); ok && nc.CheckName(name) != nil {
			continue // the store does not take this name, and says so before any round trip
		}
		names = append(names, name)
	}
	return names
}

func testNames(t *testing.T, s driver.Store, n *namer) {
	for _, name := range unusualNames(t, s, n.name()) {
		r := req(name, n.owner(), long)
		g := mustAcquire(t, s, r)
		wantHeldBy(t, s, n, r, g.Fence)
		mustRelease(t, s, r)
		wantFree(t, s, n, driver.KindMutex, name)
	}
}
