package storetest

import (
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// multiTests are multi-name acquires (driver.MultiStore).
var multiTests = []test{
	{name: "partition places every name once", fn: testPartition},
	{name: "all or nothing, tokens grow, a retry keeps them", fn: testAcquireMany},
}

func testPartition(t *testing.T, s driver.Store, n *namer) {
	names := []string{n.name(), n.name(), n.name()}
	parts := s.(driver.MultiStore).Partition(names)
	seen := map[string]int{}
	for _, g := range parts {
		if len(g) == 0 {
			t.Errorf("Partition(%q) = %q: an empty set", names, parts)
		}
		for _, nm := range g {
			seen[nm]++
		}
	}
	if len(seen) != 3 || seen[names[0]] != 1 || seen[names[1]] != 1 || seen[names[2]] != 1 {
		t.Fatalf("Partition(%q) = %q, want every name exactly once", names, parts)
	}
}

func testAcquireMany(t *testing.T, s driver.Store, n *namer) {
	ms := s.(driver.MultiStore)
	group := ms.Partition([]string{n.name(), n.name(), n.name()})[0] // co-located names
	o := n.owner()
	reqs := make([]driver.Request, len(group))
	for i, nm := range group {
		reqs[i] = req(nm, o, long)
	}
	last := group[len(group)-1]
	blocker := req(last, n.owner(), 2*time.Second)
	gb := mustAcquire(t, s, blocker)
	mg, err := ms.AcquireMany(ctx(t), reqs)
	if err != nil || mg.Acquired || mg.Remaining <= 0 || mg.Remaining > 2*time.Second {
		t.Fatalf("AcquireMany with one name held = %+v, %v; want not acquired with the holder's lease", mg, err)
	}
	for _, nm := range group[:len(group)-1] {
		wantFree(t, s, n, driver.KindMutex, nm) // none taken
	}
	wantHeldBy(t, s, n, blocker, gb.Fence) // the blocker's lock untouched
	mustRelease(t, s, blocker)
	mg, err = ms.AcquireMany(ctx(t), reqs)
	if err != nil || !mg.Acquired || len(mg.Fences) != len(reqs) {
		t.Fatalf("AcquireMany of free names = %+v, %v; want acquired", mg, err)
	}
	for i, r := range reqs {
		if mg.Fences[i] <= 0 {
			t.Errorf("token of %q = %d, want positive", r.Name, mg.Fences[i])
		}
		wantHeldBy(t, s, n, r, mg.Fences[i])
	}
	if mg.Fences[len(reqs)-1] <= gb.Fence {
		t.Errorf("token of %q = %d, want > the blocker's %d", last, mg.Fences[len(reqs)-1], gb.Fence)
	}
	mg2, err := ms.AcquireMany(ctx(t), reqs) // a retry
	if err != nil || !mg2.Acquired || len(mg2.Fences) != len(reqs) {
		t.Fatalf("AcquireMany by the owner = %+v, %v; want a retry granted", mg2, err)
	}
	for i := range reqs {
		if mg2.Fences[i] != mg.Fences[i] {
			t.Errorf("retried token of %q = %d, want %d", reqs[i].Name, mg2.Fences[i], mg.Fences[i])
		}
	}
	for _, r := range reqs {
		mustRelease(t, s, r) // each lock is released on its own
	}
	for _, r := range reqs {
		wantFree(t, s, n, driver.KindMutex, r.Name)
	}
}
