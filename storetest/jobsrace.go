package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// testClaimConcurrentExisting races claims of the next ticks of a job that
// already has a claim, so that each claim changes the job's state rather
// than creates it (testClaimConcurrent races a job's first claim): every
// tick is granted once.
func testClaimConcurrentExisting(t *testing.T, s driver.Store, n *namer) {
	job := n.name()
	first := tickAt(-2 * time.Second)
	wantClaim(t, s, claimOf(job, first, clientOf(n)), driver.ClaimGranted, "of the job's first tick")
	const claimers, rounds = 8, 5
	for round := 1; round <= rounds; round++ {
		tick := first.Add(time.Duration(round) * 100 * time.Millisecond)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			granted int
			errs    []error
		)
		for range claimers {
			c := claimOf(job, tick, clientOf(n))
			wg.Go(func() {
				r, err := jobs(s).ClaimTick(ctx(t), c)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				} else if r.Status == driver.ClaimGranted {
					granted++
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 || granted != 1 {
			t.Fatalf("round %d: %d concurrent claims of tick %v: %d granted, errors %v; want one grant", round, claimers, tick, granted, errs)
		}
	}
	if st := mustHistory(t, s, job, 0); len(st.Runs) != rounds+1 {
		t.Errorf("History has %d runs, want %d: one per tick", len(st.Runs), rounds+1)
	}
}
