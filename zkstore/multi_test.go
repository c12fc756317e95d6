package zkstore_test

import (
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// TestAcquireManyRetry: an AcquireMany some of whose names its owner holds
// already (a retry after a lost answer) is not blocked by its own holds:
// it takes the rest, and a held name keeps its token.
func TestAcquireManyRetry(t *testing.T) {
	s := sharedStore(t)
	owner := "00000000-0000-4000-8000-0000000000aa:1"
	a := driver.Request{Name: "test/" + t.Name() + "/a", Owner: owner, Lease: 10 * time.Second}
	b := driver.Request{Name: "test/" + t.Name() + "/b", Owner: owner, Lease: 10 * time.Second}
	g, err := s.Acquire(bg(t), a)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire(a) = %+v, %v", g, err)
	}
	mg, err := s.AcquireMany(bg(t), []driver.Request{a, b})
	if err != nil || !mg.Acquired {
		t.Fatalf("AcquireMany(a held by its owner, b free) = %+v, %v; want acquired", mg, err)
	}
	if mg.Fences[0] != g.Fence || mg.Fences[1] <= g.Fence {
		t.Errorf("fences = %v, want a's %d kept and b's greater", mg.Fences, g.Fence)
	}
	for _, r := range []driver.Request{a, b} {
		if err := s.Release(bg(t), r); err != nil {
			t.Errorf("Release(%q) = %v", r.Name, err)
		}
	}
	if err := s.Release(bg(t), a); err == nil {
		t.Errorf("second Release(%q) = nil, want ErrNotHeld", a.Name)
	}
}
