package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// semaphoreTests are semaphores (KindPermit; resizing with
// driver.PermitSetter).
var semaphoreTests = []test{
	{name: "permits are granted up to the count, each with a token", fn: testPermits},
	{name: "a permit's lease expires alone", fn: testPermitLease},
	{name: "releasing a permit not held is an error and changes nothing", fn: testPermitNotHeld},
	{name: "semaphore and lock on one name are refused as not a lock", fn: testPermitVsLock},
	{name: "a permit release wakes a waiter", needs: []capability{capWatch}, fn: testPermitWakes},
	{name: "the permit count changes for everyone", needs: []capability{capResize}, fn: testSetPermits},
	{name: "a permit count change wakes every waiter", needs: []capability{capResize, capWatch}, fn: testSetPermitsWakes},
}

// permit is a request for one of count permits of name.
func permit(name, owner string, count int, lease time.Duration) driver.Request {
	r := kreq(driver.KindPermit, name, owner, lease)
	r.Permits = count
	return r
}

func testPermits(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, b, c := n.owner(), n.owner(), n.owner()
	ga := mustAcquire(t, s, permit(name, a, 2, long))
	gb := mustAcquire(t, s, permit(name, b, 2, long))
	if ga.Fence <= 0 || gb.Fence <= ga.Fence {
		t.Errorf("permit tokens %d then %d, want positive and growing", ga.Fence, gb.Fence)
	}
	g := mustNotAcquire(t, s, permit(name, c, 2, long))
	if g.Remaining <= 0 || g.Remaining > long {
		t.Errorf("Remaining with every permit held = %v, want the first permit's, in (0, %v]", g.Remaining, long)
	}
	mustRelease(t, s, permit(name, a, 2, long))
	if gc := mustAcquire(t, s, permit(name, c, 2, long)); gc.Fence <= gb.Fence {
		t.Errorf("third permit's token %d, want > %d", gc.Fence, gb.Fence)
	}
	mustNotAcquire(t, s, permit(name, n.owner(), 2, long))
}

func testPermitLease(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	crashed := n.owner()
	mustAcquire(t, s, permit(name, crashed, 1, short))
	mustNotAcquire(t, s, permit(name, n.owner(), 1, long))
	acquireWithin(t, s, permit(name, n.owner(), 1, long), short+wakeWait)
	wantRenew(t, s, permit(name, crashed, 1, long), driver.RenewGone, "of an expired permit")
}

func testPermitNotHeld(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	held := permit(name, n.owner(), 3, long)
	mustAcquire(t, s, held)
	wantReleaseNotHeld(t, s, permit(name, n.owner(), 3, long), "of a permit not held")
	// The holder's permit is still taken: two more are left, not three.
	mustAcquire(t, s, permit(name, n.owner(), 3, long))
	mustAcquire(t, s, permit(name, n.owner(), 3, long))
	mustNotAcquire(t, s, permit(name, n.owner(), 3, long))
	wantRenew(t, s, held, driver.Renewed, "of the holder's permit")
}

func testPermitVsLock(t *testing.T, s driver.Store, n *namer) {
	sem, lock := n.name(), n.name()
	r := permit(sem, n.owner(), 2, long)
	mustAcquire(t, s, r)
	m := kreq(driver.KindMutex, sem, n.owner(), long)
	_, err := s.Acquire(ctx(t), m)
	wantKindRefusal(t, "mutex acquire on a semaphore", err, sem, true)
	err = s.Release(ctx(t), m)
	if !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("mutex release on a semaphore = %v; want ErrNotHeld", err)
	}
	wantKindRefusal(t, "mutex release on a semaphore", err, sem, true)

	held := kreq(driver.KindMutex, lock, n.owner(), long)
	mustAcquire(t, s, held)
	p := permit(lock, n.owner(), 2, long)
	_, err = s.Acquire(ctx(t), p)
	wantKindRefusal(t, "permit acquire on a lock", err, lock, false)
	err = s.Release(ctx(t), p)
	if !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("permit release on a lock = %v; want ErrNotHeld", err)
	}
	wantKindRefusal(t, "permit release on a lock", err, lock, false)
	// The refusals changed nothing.
	wantRenew(t, s, r, driver.Renewed, "of the semaphore's permit")
	wantRenew(t, s, held, driver.Renewed, "of the lock")
}

// wantKindRefusal checks that err is a NotALockError on name whose Found
// says, in a store's own words, that name holds a semaphore (sem) or that
// it does not (a lock).
func wantKindRefusal(t *testing.T, what string, err error, name string, sem bool) {
	t.Helper()
	var nal *driver.NotALockError
	if !errors.As(err, &nal) || nal.Name != name {
		t.Errorf("%s = %v; want a NotALockError on %q", what, err, name)
		return
	}
	if says := strings.Contains(nal.Found, "semaphore") && !strings.Contains(nal.Found, "not a semaphore"); says != sem {
		t.Errorf("%s: the refusal says the name holds %q; want it to say it holds %s", what, nal.Found,
			map[bool]string{true: "a semaphore", false: "a lock, not a semaphore"}[sem])
	}
}

func testPermitWakes(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a := permit(name, n.owner(), 1, long)
	w := newWakeCounter()
	watchKind(t, s, driver.KindPermit, name, w)
	mustAcquire(t, s, a)
	mustNotAcquire(t, s, permit(name, n.owner(), 1, long))
	mustRelease(t, s, a)
	wantMessage(t, w, "permit release", driver.Wake{To: driver.WakeOne})
}

func testSetPermits(t *testing.T, s driver.Store, n *namer) {
	ps := s.(driver.PermitSetter)
	name := n.name()
	one := func() driver.Request { return permit(name, n.owner(), 1, long) } // the count is ignored once the semaphore exists
	mustAcquire(t, s, one())
	mustNotAcquire(t, s, one())
	if err := ps.SetPermits(ctx(t), name, 3); err != nil {
		t.Fatalf("SetPermits(3): %v", err)
	}
	second, third := one(), one()
	mustAcquire(t, s, second)
	mustAcquire(t, s, third)
	mustNotAcquire(t, s, one())
	if err := ps.SetPermits(ctx(t), name, 1); err != nil {
		t.Fatalf("SetPermits(1): %v", err)
	}
	// The three held permits stay held; no new one is granted until fewer
	// than one are.
	mustNotAcquire(t, s, one())
	mustRelease(t, s, second)
	mustNotAcquire(t, s, one())
	mustRelease(t, s, third)
	mustNotAcquire(t, s, one())
	lock := n.name()
	mustAcquire(t, s, kreq(driver.KindMutex, lock, n.owner(), long))
	if err := ps.SetPermits(ctx(t), lock, 2); !errors.Is(err, driver.ErrNotALock) {
		t.Errorf("SetPermits on a lock's name = %v, want ErrNotALock", err)
	}
}

func testSetPermitsWakes(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	w := newWakeCounter()
	watchKind(t, s, driver.KindPermit, name, w)
	mustAcquire(t, s, permit(name, n.owner(), 1, long))
	mustNotAcquire(t, s, permit(name, n.owner(), 1, long))
	if err := s.(driver.PermitSetter).SetPermits(ctx(t), name, 3); err != nil {
		t.Fatalf("SetPermits(3): %v", err)
	}
	wantMessage(t, w, "set permits", driver.Wake{To: driver.WakeAll})
}
