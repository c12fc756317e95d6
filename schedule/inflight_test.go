package schedule_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/schedule"
)

// gatedStore is a memstore whose ClaimTick waits at a gate: a claim is held
// until MaxInFlight claims are in flight at once, or all want claims have
// come, and then the gate opens for good. It notes the most claims it saw in
// flight at once.
type gatedStore struct {
	*memstore.Store
	want int

	mu       sync.Mutex
	inFlight int
	peak     int
	started  int
	open     chan struct{}
	opened   bool
}

func (s *gatedStore) ClaimTick(ctx context.Context, c driver.TickClaim) (driver.TickResult, error) {
	s.mu.Lock()
	s.inFlight++
	s.started++
	s.peak = max(s.peak, s.inFlight)
	if !s.opened && (s.inFlight >= schedule.MaxInFlight || s.started >= s.want) {
		s.opened = true
		close(s.open)
	}
	s.mu.Unlock()
	select {
	case <-s.open:
	case <-ctx.Done():
	}
	res, err := s.Store.ClaimTick(ctx, c)
	s.mu.Lock()
	s.inFlight--
	s.mu.Unlock()
	return res, err
}

// TestClaimsInFlightBounded: with more jobs due at once than MaxInFlight, no
// more than MaxInFlight claims are sent at once; the others wait their turn
// (before their Timeout starts), and every job still runs.
func TestClaimsInFlightBounded(t *testing.T) {
	jobs := schedule.MaxInFlight + 44
	store := &gatedStore{Store: memstore.New(), want: jobs, open: make(chan struct{})}
	in := newInstance(t, store, nil, nil)
	log := newRunLog()
	for i := range jobs {
		// MisfireRunLatest: each job's latest tick is due when Run starts.
		if err := in.Add(fmt.Sprintf("%s/%d", jobName(t), i), "@every 1h", log.fn("a", nil),
			&schedule.JobOptions{Misfire: schedule.MisfireRunLatest}); err != nil {
			t.Fatal(err)
		}
	}
	in.run(t)
	log.await(t, time.Minute, "a run of every job", func(r []ran) bool { return len(r) == jobs })
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.peak > schedule.MaxInFlight {
		t.Errorf("%d claims in flight at once, want at most MaxInFlight (%d)", store.peak, schedule.MaxInFlight)
	}
}
