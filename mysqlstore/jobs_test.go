package mysqlstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/mysqlstore"
)

// TestLongClaimIDRefused: a claim id longer than the runs table's claim
// column holds is refused with ErrInvalidArgument, in ClaimTick and in
// AddRuns, and nothing is recorded; one of MaxOwnerLen bytes is kept whole.
func TestLongClaimIDRefused(t *testing.T) {
	s := migrated(t)
	ctx := bg(t)
	tick := time.UnixMilli(time.Now().Add(-time.Second).UnixMilli())
	long := strings.Repeat("c", mysqlstore.MaxOwnerLen+1)
	_, err := s.ClaimTick(ctx, driver.TickClaim{Job: "job", Tick: tick, Attempt: 1, Run: driver.RunRecord{Client: "a", Claim: long}})
	if !errors.Is(err, leash.ErrInvalidArgument) {
		t.Errorf("ClaimTick with a claim id of %d bytes = %v, want ErrInvalidArgument", len(long), err)
	}
	err = s.AddRuns(ctx, "job", []driver.RunRecord{{Tick: tick, Outcome: driver.OutcomeMissed, Claim: long}}, 0)
	if !errors.Is(err, leash.ErrInvalidArgument) {
		t.Errorf("AddRuns with a claim id of %d bytes = %v, want ErrInvalidArgument", len(long), err)
	}
	if st, err := s.History(ctx, "job", 0); err != nil || len(st.Runs) != 0 {
		t.Fatalf("History after the refused calls = %+v, %v; want no records", st, err)
	}
	fits := long[1:]
	if r, err := s.ClaimTick(ctx, driver.TickClaim{Job: "job", Tick: tick, Attempt: 1, Run: driver.RunRecord{Client: "a", Claim: fits}}); err != nil || r.Status != driver.ClaimGranted {
		t.Fatalf("ClaimTick with a claim id of %d bytes = %+v, %v; want granted", len(fits), r, err)
	}
	if st, err := s.History(ctx, "job", 0); err != nil || len(st.Runs) != 1 || st.Runs[0].Claim != fits {
		t.Fatalf("History = %+v, %v; want one record with the claim id whole", st, err)
	}
}
