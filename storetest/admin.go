package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// adminTests are administration (driver.Admin): Inspect, List and
// ForceRelease, and the data-safety rules that can be seen through them: no
// operation leaves behind a lock it did not grant, a force release never
// resets fencing.
var adminTests = []test{
	{name: "inspect reports holder, holds, lease and token", fn: testInspect},
	{name: "inspect: a refused acquire changes neither lease nor token", fn: testInspectRefused},
	{name: "inspect reports the last token granted, held or not", fn: testInspectFence},
	{name: "force release deletes every hold, and tokens keep growing", fn: testForceRelease},
	{name: "list matches glob patterns, names with ':', '/' and '*' included", fn: testList},
	{name: "inspect and list see unusual names as they are", fn: testAdminNames},
	{name: "list leaves out names no lock holds: released, expired, forced, never held", fn: testListOnlyLocks},
	{name: "force release wakes every waiter", needs: []capability{capWatch}, fn: testForceReleaseWakes},
	{name: "inspect counts a fair queue's places", needs: []capability{capFair}, fn: testInspectFair},
	{name: "inspect lists readers and the waiting writer", needs: []capability{capRW}, fn: testRWInspect},
	{name: "inspect sees a downgraded writer's read lease beside other readers", needs: []capability{capRW}, fn: testInspectDowngrade},
	{name: "force release clears readers and writers' marks", needs: []capability{capRW}, fn: testForceReleaseRW},
	{name: "force release of a read-write lock wakes its waiters", needs: []capability{capRW, capWatch}, fn: testForceReleaseRWWakes},
	{name: "inspect reports a semaphore's count and holders", needs: []capability{capPermit}, fn: testInspectPermits},
	{name: "inspect sees a resized semaphore keep its holders", needs: []capability{capPermit, capResize}, fn: testInspectResized},
	{name: "force release clears a semaphore's permits", needs: []capability{capPermit}, fn: testForceReleasePermits},
}

func inspect(t *testing.T, s driver.Store, name string) driver.Info {
	t.Helper()
	info, err := s.(driver.Admin).Inspect(ctx(t), name)
	if err != nil {
		t.Fatalf("Inspect(%q) error: %v", name, err)
	}
	if info.Name != name {
		t.Errorf("Inspect(%q).Name = %q", name, info.Name)
	}
	return info
}

// wantInspectHeldBy checks that Inspect sees name held by owner alone, with
// one hold, and returns what it saw.
func wantInspectHeldBy(t *testing.T, s driver.Store, name, owner string) driver.Info {
	t.Helper()
	info := inspect(t, s, name)
	if !info.Held || len(info.Owners) != 1 || info.Owners[0].Owner != owner || info.Owners[0].Holds != 1 {
		t.Fatalf("Inspect(%q) = held %v owners %+v, want held by %q with 1 hold", name, info.Held, info.Owners, owner)
	}
	return info
}

func wantInspectFree(t *testing.T, s driver.Store, name string) driver.Info {
	t.Helper()
	info := inspect(t, s, name)
	if info.Held || len(info.Owners) != 0 || info.Remaining >= 0 || info.Queued != 0 {
		t.Fatalf("Inspect(%q) = %+v, want nothing held or queued and a negative remaining lease", name, info)
	}
	return info
}

func forceRelease(t *testing.T, s driver.Store, name string, want bool) {
	t.Helper()
	ok, err := s.(driver.Admin).ForceRelease(ctx(t), name)
	if err != nil || ok != want {
		t.Fatalf("ForceRelease(%q) = %v, %v; want %v, nil", name, ok, err, want)
	}
}

func list(t *testing.T, s driver.Store, pattern string) []string {
	t.Helper()
	got, err := s.(driver.Admin).List(ctx(t), pattern)
	if err != nil {
		t.Fatalf("List(%q) error: %v", pattern, err)
	}
	if !slices.IsSorted(got) {
		t.Errorf("List(%q) = %q, not sorted", pattern, got)
	}
	return got
}

func testInspect(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), long)
	if info := wantInspectFree(t, s, r.Name); info.Fence != 0 {
		t.Errorf("Inspect of a name never locked = fence %d, want 0", info.Fence)
	}
	g := mustAcquire(t, s, r)
	info := wantInspectHeldBy(t, s, r.Name, r.Owner)
	if info.Kind != driver.KindMutex || info.Remaining <= 0 || info.Remaining > long || info.Fence != g.Fence {
		t.Errorf("Inspect = kind %v remaining %v fence %d, want mutex, in (0, %v], fence %d",
			info.Kind, info.Remaining, info.Fence, long, g.Fence)
	}
	if o := info.Owners[0]; o.Kind != driver.KindMutex {
		t.Errorf("Inspect owner = %+v, want kind mutex", o)
	}
	mustRelease(t, s, r)
	wantInspectFree(t, s, r.Name)
}

func testInspectRefused(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), 2*time.Second)
	g := mustAcquire(t, s, r)
	mustNotAcquire(t, s, req(r.Name, n.owner(), long))
	info := wantInspectHeldBy(t, s, r.Name, r.Owner)
	if info.Remaining > 2*time.Second {
		t.Errorf("Remaining after a refused acquire = %v, want <= 2s (unchanged)", info.Remaining)
	}
	if info.Fence != g.Fence {
		t.Errorf("last fence after a refused acquire = %d, want %d (unchanged)", info.Fence, g.Fence)
	}
}

func testInspectFence(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	var last int64
	for range 5 {
		r := req(name, n.owner(), long)
		last = mustAcquire(t, s, r).Fence
		mustRelease(t, s, r)
	}
	if info := inspect(t, s, name); info.Fence != last {
		t.Errorf("Inspect fence after release = %d, want the last grant's %d", info.Fence, last)
	}
	r := req(name, n.owner(), long)
	last = mustAcquire(t, s, r).Fence
	if info := inspect(t, s, name); info.Fence != last {
		t.Errorf("Inspect fence while held = %d, want the grant's %d", info.Fence, last)
	}
}

func testForceRelease(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), long)
	g := mustAcquire(t, s, r)
	mustAcquire(t, s, r)
	forceRelease(t, s, r.Name, true)
	wantInspectFree(t, s, r.Name)
	wantRenew(t, s, r, driver.RenewGone, "after force release")
	wantReleaseNotHeld(t, s, r, "after force release")
	forceRelease(t, s, r.Name, false)
	if g2 := wantFree(t, s, n, driver.KindMutex, r.Name); g2.Fence <= g.Fence {
		t.Errorf("fence after force release = %d, want > %d: fencing must survive a force release", g2.Fence, g.Fence)
	}
}

func testForceReleaseWakes(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), long)
	w := newWakeCounter()
	watch(t, s, r.Name, w)
	mustAcquire(t, s, r)
	forceRelease(t, s, r.Name, true)
	wantWoken(t, w, "force release")
}

// testList lists names holding every kind of lock the store has, with
// characters that are special in paths, in owners and in patterns.
func testList(t *testing.T, s driver.Store, n *namer) {
	base := n.name()
	names := []string{base + "/a:b", base + "/c/d", base + "/e*f", base + "/g?", base + "/plain"}
	for _, name := range names {
		mustAcquire(t, s, req(name, n.owner(), long))
	}
	if driver.Supports(s, driver.KindRead) {
		names = append(names, base+"/reader")
		mustAcquire(t, s, kreq(driver.KindRead, base+"/reader", n.owner(), long))
	}
	if driver.Supports(s, driver.KindPermit) {
		names = append(names, base+"/semaphore")
		mustAcquire(t, s, permit(base+"/semaphore", n.owner(), 2, long))
	}
	slices.Sort(names)
	q := quoteGlob(base)
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{q + "/*", names},
		{q + "*", names},
		{q + "/*:*", []string{base + "/a:b"}},
		{q + "/c/*", []string{base + "/c/d"}},
		{q + "*d", []string{base + "/c/d"}}, // '*' matches '/'
		{q + `/e\*f`, []string{base + "/e*f"}},
		{q + "/e*", []string{base + "/e*f"}},
		{q + `/g\?`, []string{base + "/g?"}},
		{q + "/???", []string{base + "/a:b", base + "/c/d", base + "/e*f"}},
		{q + "/plain", []string{base + "/plain"}},
		{q + "/plai", nil},
		{q + "/nothing*", nil},
	} {
		if got := list(t, s, tc.pattern); !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
	all := list(t, s, "") // the store may hold other tests' locks too
	for _, name := range names {
		if !slices.Contains(all, name) {
			t.Errorf("List(\"\") does not list %q", name)
		}
	}
}

func testAdminNames(t *testing.T, s driver.Store, n *namer) {
	base := n.name()
	names := unusualNames(t, s, base)
	for _, name := range names {
		r := req(name, n.owner(), long)
		mustAcquire(t, s, r)
		wantInspectHeldBy(t, s, name, r.Owner)
	}
	slices.Sort(names)
	if got := list(t, s, quoteGlob(base)+"/*"); !slices.Equal(got, names) {
		t.Errorf("List(%q) = %q, want %q", quoteGlob(base)+"/*", got, names)
	}
	for _, name := range names {
		if got := list(t, s, quoteGlob(name)); !slices.Equal(got, []string{name}) {
			t.Errorf("List(%q) = %q, want only %q", quoteGlob(name), got, name)
		}
	}
}

// testListOnlyLocks runs every operation that may touch a name without
// leaving a lock on it, and checks that List lists none of those names.
func testListOnlyLocks(t *testing.T, s driver.Store, n *namer) {
	base := n.name()
	held := req(base+"/held", n.owner(), long)
	mustAcquire(t, s, held)

	released := req(base+"/released", n.owner(), long)
	mustAcquire(t, s, released)
	mustRelease(t, s, released)

	renewed := req(base+"/renewed", n.owner(), long)
	wantRenew(t, s, renewed, driver.RenewGone, "of a name never locked")
	wantReleaseNotHeld(t, s, req(base+"/unreleased", n.owner(), long), "of a name never locked")
	inspect(t, s, base+"/inspected")
	forceRelease(t, s, base+"/forced-absent", false)

	forced := req(base+"/forced", n.owner(), long)
	mustAcquire(t, s, forced)
	forceRelease(t, s, forced.Name, true)

	expiring := req(base+"/expired", n.owner(), 100*time.Millisecond)
	mustAcquire(t, s, expiring)

	pattern := quoteGlob(base) + "/*"
	want := []string{held.Name}
	deadline := time.Now().Add(expiring.Lease + wakeWait)
	for {
		got := list(t, s, pattern)
		if slices.Equal(got, want) {
			return
		}
		if !slices.Equal(got, []string{expiring.Name, held.Name}) || time.Now().After(deadline) {
			t.Fatalf("List(%q) = %q, want %q (the expired lock's lease has %v to run out)", pattern, got, want, expiring.Lease)
		}
		time.Sleep(20 * time.Millisecond) // the expiring lock's lease runs out
	}
}

func testInspectFair(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, b, c := n.owner(), n.owner(), n.owner()
	mustAcquire(t, s, fair(name, a))
	mustNotAcquire(t, s, fair(name, n.owner())) // Wait 0: no place
	mustNotAcquire(t, s, queued(name, b))
	mustNotAcquire(t, s, queued(name, c))
	if info := wantInspectHeldBy(t, s, name, a); info.Queued != 2 || info.Kind != driver.KindMutex {
		t.Errorf("Inspect = kind %v, queued %d; want mutex (a fair hold is one), 2 places", info.Kind, info.Queued)
	}
	mustRelease(t, s, fair(name, a))
	mustAcquire(t, s, queued(name, b))
	if info := wantInspectHeldBy(t, s, name, b); info.Queued != 1 {
		t.Errorf("Inspect queued after the head got the lock = %d, want 1", info.Queued)
	}
	mustWithdraw(t, s, queued(name, c))
	if info := inspect(t, s, name); info.Queued != 0 {
		t.Errorf("Inspect queued after the last place was withdrawn = %d, want 0", info.Queued)
	}
}

func testRWInspect(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	r1, r2, wr := n.owner(), n.owner(), n.owner()
	mustAcquire(t, s, read(name, r1))
	g := mustAcquire(t, s, read(name, r2))
	mustNotAcquire(t, s, waiting(write(name, wr), long))
	info := inspect(t, s, name)
	if info.Kind != driver.KindRead || !info.Held || len(info.Owners) != 2 || info.Queued != 1 || info.Fence != g.Fence {
		t.Fatalf("Inspect = %+v, want two readers, one queued writer, fence %d", info, g.Fence)
	}
	for _, o := range info.Owners {
		if o.Kind != driver.KindRead || o.Remaining <= 0 || o.Remaining > long {
			t.Errorf("reader %+v, want kind read and its own remaining lease", o)
		}
	}
	mustWithdraw(t, s, waiting(write(name, wr), long))
	mustRelease(t, s, read(name, r1))
	mustRelease(t, s, read(name, r2))
	w := write(name, wr)
	mustAcquire(t, s, w)
	if info := wantInspectHeldBy(t, s, name, wr); info.Kind != driver.KindWrite {
		t.Errorf("Inspect of a write lock = kind %v, want write", info.Kind)
	}
}

func testInspectDowngrade(t *testing.T, s driver.Store, n *namer) {
	w, _ := downgraded(t, s, n)
	name := w.Name
	mustRelease(t, s, w)
	mustAcquire(t, s, read(name, n.owner()))
	if info := inspect(t, s, name); info.Kind != driver.KindRead || len(info.Owners) != 2 {
		t.Errorf("after the downgrade: kind %v owners %+v, want two readers", info.Kind, info.Owners)
	}
}

func testForceReleaseRW(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	r := read(name, n.owner())
	mustAcquire(t, s, r)
	mustNotAcquire(t, s, waiting(write(name, n.owner()), long))
	forceRelease(t, s, name, true)
	wantInspectFree(t, s, name)
	wantRenew(t, s, r, driver.RenewGone, "of a reader after force release")
	mustAcquire(t, s, write(name, n.owner()))
}

func testForceReleaseRWWakes(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	w := newWakeCounter()
	watchKind(t, s, driver.KindWrite, name, w)
	mustAcquire(t, s, read(name, n.owner()))
	mustNotAcquire(t, s, waiting(write(name, n.owner()), long))
	forceRelease(t, s, name, true)
	wantMessage(t, w, "force release", driver.Wake{To: driver.WakeAll})
}

func testInspectPermits(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, b := permit(name, n.owner(), 2, long), permit(name, n.owner(), 2, long)
	mustAcquire(t, s, a)
	g := mustAcquire(t, s, b)
	info := inspect(t, s, name)
	if info.Kind != driver.KindPermit || !info.Held || info.Permits != 2 || len(info.Owners) != 2 || info.Fence != g.Fence {
		t.Fatalf("Inspect = %+v, want a semaphore of 2 with 2 holders, fence %d", info, g.Fence)
	}
	for _, o := range info.Owners {
		if o.Kind != driver.KindPermit || o.Remaining <= 0 || o.Remaining > long {
			t.Errorf("permit %+v, want kind permit and its own remaining lease", o)
		}
	}
}

func testInspectResized(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	for range 3 {
		mustAcquire(t, s, permit(name, n.owner(), 3, long))
	}
	if err := s.(driver.PermitSetter).SetPermits(ctx(t), name, 1); err != nil {
		t.Fatalf("SetPermits(1): %v", err)
	}
	if info := inspect(t, s, name); info.Permits != 1 || len(info.Owners) != 3 {
		t.Errorf("after shrinking: %+v, want 1 permit and the 3 holders kept", info)
	}
}

func testForceReleasePermits(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a := permit(name, n.owner(), 1, long)
	mustAcquire(t, s, a)
	forceRelease(t, s, name, true)
	if info := inspect(t, s, name); info.Held || len(info.Owners) != 0 {
		t.Errorf("after ForceRelease: %+v, want no permit held", info)
	}
	wantRenew(t, s, a, driver.RenewGone, "of a permit after force release")
	mustAcquire(t, s, permit(name, n.owner(), 1, long))
}
