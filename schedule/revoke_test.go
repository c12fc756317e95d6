package schedule_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/schedule"
)

// TestForceUnlockedRunKeepsItsName: a run whose lock an operator
// force-unlocks has its context cancelled at once, but the job's name is
// granted to no one else until its function returns: a function that takes
// a while to stop never overlaps the next holder.
func TestForceUnlockedRunKeepsItsName(t *testing.T) {
	store := memstore.New()
	in := newInstance(t, store, &leash.Options{Lease: 3 * time.Second}, nil)
	job := jobName(t)
	told, release := make(chan struct{}), make(chan struct{})
	if err := in.Add(job, "@every 1h", func(ctx context.Context, run schedule.Run) error {
		<-ctx.Done()
		close(told)
		<-release // stopping takes a while
		return ctx.Err()
	}, &schedule.JobOptions{Misfire: schedule.MisfireRunLatest}); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	other := newClient(t, store, nil)
	ctx := t.Context()
	for {
		if info, err := other.Inspect(ctx, job); err == nil && info.Held {
			break
		}
		time.Sleep(10 * time.Millisecond) // polls for the run's grant; the test's timeout bounds it
	}
	if ok, err := other.ForceUnlock(ctx, job); err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v; want true, nil", ok, err)
	}
	select {
	case <-told:
	case <-time.After(time.Minute):
		t.Fatal("the run's context was not cancelled by the force-unlock")
	}
	if h, err := other.Mutex(job).TryLock(ctx); !errors.Is(err, leash.ErrNotAcquired) {
		t.Errorf("TryLock of the job's name while the revoked run's function still runs = %v, %v; want ErrNotAcquired", h, err)
		if h != nil {
			_ = h.Unlock(ctx)
		}
	}
	close(release)
	for {
		h, err := other.Mutex(job).TryLock(ctx)
		if err == nil {
			_ = h.Unlock(ctx)
			break
		}
		if !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // polls for the acknowledgement after the function returned
	}
}
