package etcdstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/etcdstore"
)

// TestAcquireManyLargestSet takes the largest set Partition makes, fresh
// names (whose fence keys do not exist yet: the transaction's nested
// branch) and then again after a release (fence keys marked), within
// etcd's default limit of operations per transaction.
func TestAcquireManyLargestSet(t *testing.T) {
	s := etcdstore.New(sharedCli(t), nil)
	ctx := bg(t)
	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprintf("%s/%03d", lockName(t), i)
	}
	sets := s.Partition(names)
	if len(sets) < 2 {
		t.Fatalf("Partition(%d names) = %d sets, want several", len(names), len(sets))
	}
	for round := range 2 {
		owner := fmt.Sprintf("0a0b0c0d-0000-4000-8000-000000000006:%d", round)
		reqs := make([]driver.Request, len(sets[0]))
		for i, n := range sets[0] {
			reqs[i] = driver.Request{Name: n, Owner: owner, Lease: 30 * time.Second}
		}
		g, err := s.AcquireMany(ctx, reqs)
		if err != nil || !g.Acquired || len(g.Fences) != len(reqs) {
			t.Fatalf("round %d: AcquireMany(%d names) = %+v, %v", round, len(reqs), g, err)
		}
		for _, r := range reqs {
			if err := s.Release(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
}
