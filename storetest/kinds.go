package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// runKinds runs the tests of the lock kinds beyond KindMutex. A store that
// does not implement a kind (ErrUnsupported, or a missing optional interface)
// has that kind's tests skipped with a message saying so.
func runKinds(t *testing.T, newStore NewStore) {
	for _, tc := range []struct {
		name string
		kind driver.Kind
		fn   func(t *testing.T, s driver.Store, n *namer)
	}{
		{"fair: grants in queue order", driver.KindFair, testFairOrder},
		{"fair: a release wakes only the head", driver.KindFair, testFairWakesHead},
		{"fair: a dead waiter leaves the queue within its place lease", driver.KindFair, testFairDeadWaiter},
		{"fair: a waiter that withdraws leaves at once", driver.KindFair, testFairWithdraw},
		{"fair: an attempt without a wait takes no place", driver.KindFair, testFairNoPlace},
		{"fair and mutex are one lock", driver.KindFair, testFairIsMutex},
		{"rw: readers share; a waiting writer keeps new readers out", driver.KindRead, testRWWriterPreference},
		{"rw: each reader's lease expires alone", driver.KindRead, testRWReaderLease},
		{"rw: a writer downgrades to a reader", driver.KindRead, testRWDowngrade},
		{"rw: a writer's short lease does not free its downgraded reader's lock", driver.KindRead, testRWDowngradeOutlivesWriter},
		{"rw: an upgrade is refused", driver.KindRead, testRWUpgrade},
		{"rw: a waiting writer's mark expires", driver.KindRead, testRWWriterMark},
		{"rw: writer and mutex exclude each other", driver.KindRead, testRWExcludesMutex},
		{"rw: inspect lists readers", driver.KindRead, testRWInspect},
		{"semaphore: permits, release wakes a waiter", driver.KindPermit, testPermits},
		{"semaphore: a permit's lease expires alone", driver.KindPermit, testPermitLease},
		{"semaphore: releasing a permit not held is an error", driver.KindPermit, testPermitNotHeld},
		{"semaphore: the permit count changes for everyone", driver.KindPermit, testSetPermits},
		{"semaphore and lock on one name are refused as not a lock", driver.KindPermit, testPermitVsLock},
		{"multi: all or nothing, tokens grow", driver.KindMutex, testAcquireMany},
		{"force release clears every kind", driver.KindRead, testForceReleaseKinds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if tc.kind != driver.KindMutex {
				_, err := s.Acquire(ctx(t), driver.Request{Kind: tc.kind, Name: newNamer(t).name() + "/probe",
					Owner: "probe:1", Lease: time.Millisecond * 50, Permits: 1})
				if errors.Is(err, leash.ErrUnsupported) {
					t.Skipf("the store does not implement %v locks: %v", tc.kind, err)
				}
			}
			tc.fn(t, s, newNamer(t))
		})
	}
}

func kreq(kind driver.Kind, name, owner string, lease time.Duration) driver.Request {
	return driver.Request{Kind: kind, Name: name, Owner: owner, Lease: lease}
}

func waiting(r driver.Request, wait time.Duration) driver.Request {
	r.Wait = wait
	return r
}

func mustRelease(t *testing.T, s driver.Store, r driver.Request) {
	t.Helper()
	if _, err := s.Release(ctx(t), r, leash.ReleaseAll); err != nil {
		t.Fatalf("Release(%v %q, %q): %v", r.Kind, r.Name, r.Owner, err)
	}
}

func testFairOrder(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, b, c := n.owner(), n.owner(), n.owner()
	mustAcquire(t, s, kreq(driver.KindFair, name, a, long))
	mustNotAcquire(t, s, waiting(kreq(driver.KindFair, name, b, long), long)) // b queues first
	mustNotAcquire(t, s, waiting(kreq(driver.KindFair, name, c, long), long)) // then c
	mustRelease(t, s, kreq(driver.KindFair, name, a, long))
	g := mustNotAcquire(t, s, waiting(kreq(driver.KindFair, name, c, long), long)) // free, but b is first
	if g.Remaining <= 0 || g.Remaining > long {
		t.Errorf("Remaining behind the head = %v, want the head's place lease, in (0, %v]", g.Remaining, long)
	}
	mustAcquire(t, s, waiting(kreq(driver.KindFair, name, b, long), long))
	mustRelease(t, s, kreq(driver.KindFair, name, b, long))
	mustAcquire(t, s, waiting(kreq(driver.KindFair, name, c, long), long))
	if info := inspect(t, s, name); info.Queued != 0 {
		t.Errorf("queued after everyone got the lock = %d, want 0", info.Queued)
	}
}

func testFairWakesHead(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, b, c := n.owner(), n.owner(), n.owner()
	w := newWakeCounter()
	watchKind(t, s, driver.KindFair, name, w)
	mustAcquire(t, s, kreq(driver.KindFair, name, a, long))
	mustNotAcquire(t, s, waiting(kreq(driver.KindFair, name, b, long), long))
	mustNotAcquire(t, s, waiting(kreq(driver.KindFair, name, c, long), long))
	mustRelease(t, s, kreq(driver.KindFair, name, a, long))
	wantMessage(t, w, "fair release", b)
}

func testFairDeadWaiter(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, dead, c := n.owner(), n.owner(), n.owner()
	mustAcquire(t, s, kreq(driver.KindFair, name, a, long))
	mustNotAcquire(t, s, waiting(kreq(driver.KindFair, name, dead, long), short)) // never comes back
	mustNotAcquire(t, s, waiting(kreq(driver.KindFair, name, c, long), long))
	mustRelease(t, s, kreq(driver.KindFair, name, a, long))
	mustNotAcquire(t, s, waiting(kreq(driver.KindFair, name, c, long), long))
	time.Sleep(short + 50*time.Millisecond)
	mustAcquire(t, s, waiting(kreq(driver.KindFair, name, c, long), long))
}

func testFairWithdraw(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, quitter, c := n.owner(), n.owner(), n.owner()
	w := newWakeCounter()
	watchKind(t, s, driver.KindFair, name, w)
	mustAcquire(t, s, kreq(driver.KindFair, name, a, long))
	mustNotAcquire(t, s, waiting(kreq(driver.KindFair, name, quitter, long), long))
	mustNotAcquire(t, s, waiting(kreq(driver.KindFair, name, c, long), long))
	mustRelease(t, s, kreq(driver.KindFair, name, a, long))
	wantMessage(t, w, "release", quitter)
	if _, err := s.Release(ctx(t), kreq(driver.KindFair, name, quitter, long), leash.Withdraw); err != nil {
		t.Fatalf("Withdraw: %v", err)
	}
	wantMessage(t, w, "withdraw of the head", c) // the new head is woken
	mustAcquire(t, s, waiting(kreq(driver.KindFair, name, c, long), long))
	// Withdrawing a place one does not have is not an error.
	if _, err := s.Release(ctx(t), kreq(driver.KindFair, name, n.owner(), long), leash.Withdraw); err != nil {
		t.Errorf("Withdraw without a place = %v, want nil", err)
	}
}

func testFairNoPlace(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, b := n.owner(), n.owner()
	mustAcquire(t, s, kreq(driver.KindFair, name, a, long))
	mustNotAcquire(t, s, kreq(driver.KindFair, name, b, long)) // Wait 0
	if info := inspect(t, s, name); info.Queued != 0 {
		t.Errorf("queued after an attempt without a wait = %d, want 0", info.Queued)
	}
	mustRelease(t, s, kreq(driver.KindFair, name, a, long))
	mustAcquire(t, s, kreq(driver.KindFair, name, n.owner(), long))
}

func testFairIsMutex(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a := n.owner()
	mustAcquire(t, s, kreq(driver.KindFair, name, a, long))
	mustNotAcquire(t, s, kreq(driver.KindMutex, name, n.owner(), long))
	if st := renewOne(t, s, kreq(driver.KindMutex, name, a, long)); st != driver.Renewed {
		t.Errorf("mutex renewal of a fair hold = %d, want Renewed", st)
	}
	mustRelease(t, s, kreq(driver.KindMutex, name, a, long))
	b := n.owner()
	mustAcquire(t, s, kreq(driver.KindMutex, name, b, long))
	mustNotAcquire(t, s, kreq(driver.KindFair, name, n.owner(), long))
}

func testRWWriterPreference(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	r1, r2, r3, wr := n.owner(), n.owner(), n.owner(), n.owner()
	w := newWakeCounter()
	watchKind(t, s, driver.KindWrite, name, w)
	g1 := mustAcquire(t, s, kreq(driver.KindRead, name, r1, long))
	g2 := mustAcquire(t, s, kreq(driver.KindRead, name, r2, long))
	if g2.Fence <= g1.Fence {
		t.Errorf("second reader's token %d, want > %d", g2.Fence, g1.Fence)
	}
	mustNotAcquire(t, s, waiting(kreq(driver.KindWrite, name, wr, long), long))
	mustNotAcquire(t, s, kreq(driver.KindRead, name, r3, long)) // a writer waits
	mustRelease(t, s, kreq(driver.KindRead, name, r1, long))
	mustNotAcquire(t, s, waiting(kreq(driver.KindWrite, name, wr, long), long)) // r2 still reads
	mustRelease(t, s, kreq(driver.KindRead, name, r2, long))
	wantMessage(t, w, "the last reader left", driver.WakeWriter)
	gw := mustAcquire(t, s, waiting(kreq(driver.KindWrite, name, wr, long), long))
	if gw.Fence <= g2.Fence {
		t.Errorf("writer's token %d, want > %d", gw.Fence, g2.Fence)
	}
	mustNotAcquire(t, s, kreq(driver.KindRead, name, r3, long))
	mustRelease(t, s, kreq(driver.KindWrite, name, wr, long))
	wantMessage(t, w, "the writer left", driver.WakeReaders)
	mustAcquire(t, s, kreq(driver.KindRead, name, r3, long))
}

func testRWReaderLease(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	crashed, alive := n.owner(), n.owner()
	mustAcquire(t, s, kreq(driver.KindRead, name, crashed, short))
	mustAcquire(t, s, kreq(driver.KindRead, name, alive, long))
	time.Sleep(short + 50*time.Millisecond)
	res := s.Renew(ctx(t), []driver.Request{kreq(driver.KindRead, name, crashed, long), kreq(driver.KindRead, name, alive, long)})
	if len(res) != 2 || res[0].Err != nil || res[0].Status != driver.RenewGone || res[1].Err != nil || res[1].Status != driver.Renewed {
		t.Fatalf("Renew(expired reader, live reader) = %+v, want [gone, renewed]", res)
	}
	mustNotAcquire(t, s, kreq(driver.KindWrite, name, n.owner(), long))
	mustRelease(t, s, kreq(driver.KindRead, name, alive, long))
	mustAcquire(t, s, kreq(driver.KindWrite, name, n.owner(), long))
}

func testRWDowngrade(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	wr := n.owner()
	gw := mustAcquire(t, s, kreq(driver.KindWrite, name, wr, long))
	mustNotAcquire(t, s, kreq(driver.KindRead, name, n.owner(), long))
	mustNotAcquire(t, s, kreq(driver.KindRead, name, wr, long)) // the writer's owner, but no parent
	impostor := kreq(driver.KindRead, name, n.owner(), long)
	impostor.Parent = n.owner() // a parent that does not hold the write lock
	mustNotAcquire(t, s, impostor)
	waiter := waiting(kreq(driver.KindWrite, name, n.owner(), long), long)
	mustNotAcquire(t, s, waiter) // a waiting writer keeps new readers out, but not the downgrade
	down := kreq(driver.KindRead, name, n.owner(), long)
	down.Parent = wr
	gr := mustAcquire(t, s, down) // the writer takes a read lease of its own
	if gr.Fence <= gw.Fence {
		t.Errorf("downgrade read token %d, want > %d", gr.Fence, gw.Fence)
	}
	mustRelease(t, s, kreq(driver.KindWrite, name, wr, long))
	mustNotAcquire(t, s, waiter) // still a reader
	if _, err := s.Release(ctx(t), waiter, leash.Withdraw); err != nil {
		t.Fatalf("Withdraw(waiting writer): %v", err)
	}
	// The reader's requests still name its parent after the writer left.
	if res := s.Renew(ctx(t), []driver.Request{down}); len(res) != 1 || res[0].Err != nil || res[0].Status != driver.Renewed {
		t.Fatalf("Renew(downgraded reader, writer gone) = %+v, want renewed", res)
	}
	other := kreq(driver.KindRead, name, n.owner(), long)
	mustAcquire(t, s, other) // readers may join
	if info := inspect(t, s, name); info.Kind != driver.KindRead || len(info.Owners) != 2 {
		t.Errorf("after the downgrade: kind %v owners %+v, want two readers", info.Kind, info.Owners)
	}
	mustRelease(t, s, down)
	mustRelease(t, s, other)
	mustAcquire(t, s, kreq(driver.KindWrite, name, n.owner(), long)) // free once both left
}

// testRWDowngradeOutlivesWriter renews a writer with a lease far shorter than
// the read lease it downgraded to (as UnlockAfter does), and lets it lapse: the
// reader still holds the lock, so neither a writer nor a Mutex may be granted.
func testRWDowngradeOutlivesWriter(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	w := kreq(driver.KindWrite, name, n.owner(), long)
	mustAcquire(t, s, w)
	down := kreq(driver.KindRead, name, n.owner(), long)
	down.Parent = w.Owner
	mustAcquire(t, s, down)
	w.Lease = 50 * time.Millisecond
	if res := s.Renew(ctx(t), []driver.Request{w}); len(res) != 1 || res[0].Err != nil || res[0].Status != driver.Renewed {
		t.Fatalf("Renew(writer, 50ms) = %+v, want renewed", res)
	}
	time.Sleep(200 * time.Millisecond)
	mustNotAcquire(t, s, kreq(driver.KindWrite, name, n.owner(), long))
	mustNotAcquire(t, s, kreq(driver.KindMutex, name, n.owner(), long))
	if res := s.Renew(ctx(t), []driver.Request{down}); len(res) != 1 || res[0].Err != nil || res[0].Status != driver.Renewed {
		t.Fatalf("Renew(downgraded reader) = %+v, want renewed", res)
	}
	mustNotAcquire(t, s, kreq(driver.KindMutex, name, n.owner(), long))
}

func testRWUpgrade(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	r := n.owner()
	mustAcquire(t, s, kreq(driver.KindRead, name, r, long))
	if _, err := s.Acquire(ctx(t), kreq(driver.KindWrite, name, r, long)); !errors.Is(err, leash.ErrUpgrade) {
		t.Errorf("write acquire by a reader = %v, want ErrUpgrade", err)
	}
}

func testRWWriterMark(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	mustAcquire(t, s, kreq(driver.KindRead, name, n.owner(), long))
	mustNotAcquire(t, s, waiting(kreq(driver.KindWrite, name, n.owner(), long), short)) // and dies
	g := mustNotAcquire(t, s, kreq(driver.KindRead, name, n.owner(), long))
	if g.Remaining <= 0 || g.Remaining > short {
		t.Errorf("reader blocked by a writer mark: Remaining %v, want the mark's (0, %v]", g.Remaining, short)
	}
	time.Sleep(short + 50*time.Millisecond)
	mustAcquire(t, s, kreq(driver.KindRead, name, n.owner(), long))
}

func testRWExcludesMutex(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	wr := n.owner()
	mustAcquire(t, s, kreq(driver.KindWrite, name, wr, long))
	mustNotAcquire(t, s, kreq(driver.KindMutex, name, n.owner(), long))
	mustRelease(t, s, kreq(driver.KindWrite, name, wr, long))
	r := n.owner()
	mustAcquire(t, s, kreq(driver.KindRead, name, r, long))
	mustNotAcquire(t, s, kreq(driver.KindMutex, name, n.owner(), long))
	mustRelease(t, s, kreq(driver.KindRead, name, r, long))
	m := n.owner()
	mustAcquire(t, s, kreq(driver.KindMutex, name, m, long))
	mustNotAcquire(t, s, kreq(driver.KindRead, name, n.owner(), long))
	mustNotAcquire(t, s, kreq(driver.KindWrite, name, n.owner(), long))
}

func testRWInspect(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	r1, r2, wr := n.owner(), n.owner(), n.owner()
	mustAcquire(t, s, kreq(driver.KindRead, name, r1, long))
	g := mustAcquire(t, s, kreq(driver.KindRead, name, r2, long))
	mustNotAcquire(t, s, waiting(kreq(driver.KindWrite, name, wr, long), long))
	info := inspect(t, s, name)
	if info.Kind != driver.KindRead || !info.Held || len(info.Owners) != 2 || info.Queued != 1 || info.Fence != g.Fence {
		t.Fatalf("Inspect = %+v, want two readers, one queued writer, fence %d", info, g.Fence)
	}
	for _, o := range info.Owners {
		if o.Kind != driver.KindRead || o.Remaining <= 0 || o.Remaining > long {
			t.Errorf("reader %+v, want kind read and its own remaining lease", o)
		}
	}
}

func testPermits(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, b, c := n.owner(), n.owner(), n.owner()
	permit := func(o string) driver.Request {
		r := kreq(driver.KindPermit, name, o, long)
		r.Permits = 2
		return r
	}
	w := newWakeCounter()
	watchKind(t, s, driver.KindPermit, name, w)
	ga := mustAcquire(t, s, permit(a))
	gb := mustAcquire(t, s, permit(b))
	if gb.Fence <= ga.Fence {
		t.Errorf("second permit's token %d, want > %d", gb.Fence, ga.Fence)
	}
	g := mustNotAcquire(t, s, permit(c))
	if g.Remaining <= 0 || g.Remaining > long {
		t.Errorf("Remaining with every permit held = %v, want the first permit's, in (0, %v]", g.Remaining, long)
	}
	mustRelease(t, s, permit(a))
	wantMessage(t, w, "permit release", driver.WakeOne)
	mustAcquire(t, s, permit(c))
	info := inspect(t, s, name)
	if info.Kind != driver.KindPermit || info.Permits != 2 || len(info.Owners) != 2 {
		t.Errorf("Inspect = %+v, want a semaphore of 2 with 2 holders", info)
	}
}

func testPermitLease(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	permit := func(o string, lease time.Duration) driver.Request {
		r := kreq(driver.KindPermit, name, o, lease)
		r.Permits = 1
		return r
	}
	crashed := n.owner()
	mustAcquire(t, s, permit(crashed, short))
	mustNotAcquire(t, s, permit(n.owner(), long))
	time.Sleep(short + 50*time.Millisecond)
	mustAcquire(t, s, permit(n.owner(), long))
	if st := renewOne(t, s, permit(crashed, long)); st != driver.RenewGone {
		t.Errorf("renewal of an expired permit = %d, want RenewGone", st)
	}
}

func testPermitNotHeld(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	r := kreq(driver.KindPermit, name, n.owner(), long)
	r.Permits = 3
	mustAcquire(t, s, r)
	other := r
	other.Owner = n.owner()
	if _, err := s.Release(ctx(t), other, leash.ReleaseAll); !errors.Is(err, leash.ErrNotHeld) {
		t.Errorf("release of a permit not held = %v, want ErrNotHeld", err)
	}
	if info := inspect(t, s, name); len(info.Owners) != 1 || info.Owners[0].Owner != r.Owner {
		t.Errorf("permits after a bad release = %+v, want only %s", info.Owners, r.Owner)
	}
}

func testSetPermits(t *testing.T, s driver.Store, n *namer) {
	ps, ok := s.(driver.PermitSetter)
	if !ok {
		t.Skip("the store does not implement driver.PermitSetter")
	}
	name := n.name()
	permit := func(o string) driver.Request {
		r := kreq(driver.KindPermit, name, o, long)
		r.Permits = 1 // ignored once the semaphore exists
		return r
	}
	w := newWakeCounter()
	watchKind(t, s, driver.KindPermit, name, w)
	mustAcquire(t, s, permit(n.owner()))
	mustNotAcquire(t, s, permit(n.owner()))
	if err := ps.SetPermits(ctx(t), name, 3); err != nil {
		t.Fatalf("SetPermits(3): %v", err)
	}
	wantMessage(t, w, "set permits", driver.WakeAll)
	mustAcquire(t, s, permit(n.owner()))
	mustAcquire(t, s, permit(n.owner()))
	if err := ps.SetPermits(ctx(t), name, 1); err != nil {
		t.Fatalf("SetPermits(1): %v", err)
	}
	mustNotAcquire(t, s, permit(n.owner()))
	if info := inspect(t, s, name); info.Permits != 1 || len(info.Owners) != 3 {
		t.Errorf("after shrinking: %+v, want 1 permit and the 3 holders kept", info)
	}
}

func testPermitVsLock(t *testing.T, s driver.Store, n *namer) {
	sem, lock := n.name(), n.name()
	r := kreq(driver.KindPermit, sem, n.owner(), long)
	r.Permits = 2
	mustAcquire(t, s, r)
	if g, err := s.Acquire(ctx(t), kreq(driver.KindMutex, sem, n.owner(), long)); !errors.Is(err, leash.ErrNotALock) {
		t.Errorf("mutex acquire on a semaphore = %+v, %v; want ErrNotALock", g, err)
	}
	mustAcquire(t, s, kreq(driver.KindMutex, lock, n.owner(), long))
	r.Name = lock
	if g, err := s.Acquire(ctx(t), r); !errors.Is(err, leash.ErrNotALock) {
		t.Errorf("permit acquire on a lock = %+v, %v; want ErrNotALock", g, err)
	}
}

func testAcquireMany(t *testing.T, s driver.Store, n *namer) {
	ms, ok := s.(driver.MultiStore)
	if !ok {
		t.Skip("the store does not implement driver.MultiStore")
	}
	names := []string{n.name(), n.name(), n.name()}
	parts := ms.Partition(names)
	seen := map[string]int{}
	for _, g := range parts {
		for _, nm := range g {
			seen[nm]++
		}
	}
	if len(seen) != 3 || seen[names[0]] != 1 || seen[names[1]] != 1 || seen[names[2]] != 1 {
		t.Fatalf("Partition(%q) = %q, want every name exactly once", names, parts)
	}
	// One group of co-located names.
	group := parts[0]
	o := n.owner()
	reqs := make([]driver.Request, len(group))
	for i, nm := range group {
		reqs[i] = kreq(driver.KindMutex, nm, o, long)
	}
	blocker := n.owner()
	mustAcquire(t, s, kreq(driver.KindMutex, group[len(group)-1], blocker, 2*time.Second))
	mg, err := ms.AcquireMany(ctx(t), reqs)
	if err != nil || mg.Acquired || mg.Remaining <= 0 || mg.Remaining > 2*time.Second {
		t.Fatalf("AcquireMany with one name held = %+v, %v; want not acquired with the holder's lease", mg, err)
	}
	for _, nm := range group[:len(group)-1] {
		wantFree(t, s, nm) // none taken
	}
	mustRelease(t, s, kreq(driver.KindMutex, group[len(group)-1], blocker, long))
	mg, err = ms.AcquireMany(ctx(t), reqs)
	if err != nil || !mg.Acquired || len(mg.Fences) != len(reqs) {
		t.Fatalf("AcquireMany of free names = %+v, %v; want acquired", mg, err)
	}
	for i, r := range reqs {
		wantHeldBy(t, s, r.Name, o, 1)
		if mg.Fences[i] <= 0 {
			t.Errorf("token of %q = %d, want positive", r.Name, mg.Fences[i])
		}
	}
	mg2, err := ms.AcquireMany(ctx(t), reqs) // re-entry
	if err != nil || !mg2.Acquired {
		t.Fatalf("AcquireMany by the owner = %+v, %v; want a re-entry", mg2, err)
	}
	for i := range reqs {
		if mg2.Fences[i] != mg.Fences[i] {
			t.Errorf("re-entry token of %q = %d, want %d", reqs[i].Name, mg2.Fences[i], mg.Fences[i])
		}
	}
}

func testForceReleaseKinds(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	w := newWakeCounter()
	watchKind(t, s, driver.KindWrite, name, w)
	r := n.owner()
	mustAcquire(t, s, kreq(driver.KindRead, name, r, long))
	mustNotAcquire(t, s, waiting(kreq(driver.KindWrite, name, n.owner(), long), long))
	if ok, err := s.ForceRelease(ctx(t), name); !ok || err != nil {
		t.Fatalf("ForceRelease = %v, %v", ok, err)
	}
	wantMessage(t, w, "force release", driver.WakeAll)
	if info := inspect(t, s, name); info.Held || info.Queued != 0 {
		t.Errorf("after ForceRelease: %+v, want nothing held or queued", info)
	}
	if st := renewOne(t, s, kreq(driver.KindRead, name, r, long)); st != driver.RenewGone {
		t.Errorf("reader renewal after ForceRelease = %d, want RenewGone", st)
	}
	mustAcquire(t, s, kreq(driver.KindWrite, name, n.owner(), long))
}
