package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// TestAskingKeepsNoRecord: asking about names the Store has never seen
// (Inspect, Renew, Release, Withdraw, ForceRelease, Revoke, AckRevoke)
// keeps no record of them, so that a long-lived process that inspects or
// releases many names does not grow; a name once locked keeps its record,
// and so its fencing counter.
func TestAskingKeepsNoRecord(t *testing.T) {
	s := New()
	ctx := context.Background()
	for i := range 100 {
		n := fmt.Sprintf("never/%d", i)
		r := driver.Request{Kind: driver.KindMutex, Name: n, Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
		_, _ = s.Inspect(ctx, n)
		_ = s.Renew(ctx, []driver.Request{r})
		_ = s.Release(ctx, r)
		_ = s.Withdraw(ctx, r)
		_, _ = s.ForceRelease(ctx, n)
		_, _ = s.Revoke(ctx, n)
		_ = s.AckRevoke(ctx, r)
	}
	if n := len(s.names); n != 0 {
		t.Errorf("%d name records kept after asking about names never locked, want 0", n)
	}
	r := driver.Request{Kind: driver.KindMutex, Name: "locked", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
	g, err := s.Acquire(ctx, r)
	if err != nil || !g.Acquired {
		t.Fatal(g, err)
	}
	_ = s.Release(ctx, r)
	g2, _ := s.Acquire(ctx, r)
	if len(s.names) != 1 || g2.Fence <= g.Fence {
		t.Errorf("after a lock and a release: %d records, tokens %d then %d; want the name's record kept, tokens growing", len(s.names), g.Fence, g2.Fence)
	}
}
