package pgstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// TestOtherKindRefused: a name holding a semaphore refuses a mutex's
// release and acquire, and a multi-name acquire that includes it, with a
// NotALockError saying what is there, and the semaphore is unchanged; the
// reverse too.
func TestOtherKindRefused(t *testing.T) {
	s := newStore(t, nil)
	ctx := bg(t)
	owner := "00000000-0000-4000-8000-000000000001:1"
	sem := driver.Request{Kind: driver.KindPermit, Name: "sem", Owner: owner, Lease: time.Minute, Permits: 1}
	if g, err := s.Acquire(ctx, sem); err != nil || !g.Acquired {
		t.Fatalf("Acquire permit = %+v, %v", g, err)
	}
	lock := driver.Request{Name: "sem", Owner: owner, Lease: time.Minute}
	var nal *driver.NotALockError
	if _, err := s.Acquire(ctx, lock); !errors.As(err, &nal) || !strings.Contains(nal.Found, "a semaphore") {
		t.Errorf("mutex Acquire on a semaphore = %v, want NotALockError naming a semaphore", err)
	}
	if err := s.Release(ctx, lock); !errors.Is(err, driver.ErrNotHeld) || !errors.As(err, &nal) {
		t.Errorf("mutex Release on a semaphore = %v, want ErrNotHeld and NotALockError", err)
	}
	many := []driver.Request{{Name: "free", Owner: owner, Lease: time.Minute}, lock}
	if _, err := s.AcquireMany(ctx, many); !errors.As(err, &nal) || nal.Name != "sem" {
		t.Errorf("AcquireMany including a semaphore = %v, want NotALockError for %q", err, "sem")
	}
	if info, err := s.Inspect(ctx, "free"); err != nil || info.Held {
		t.Errorf("AcquireMany refused but left %+v, %v", info, err)
	}
	if info, err := s.Inspect(ctx, "sem"); err != nil || info.Kind != driver.KindPermit || len(info.Owners) != 1 || info.Owners[0].Owner != owner {
		t.Errorf("semaphore after the refusals = %+v, %v; want its one permit held", info, err)
	}

	mutex := driver.Request{Name: "mutex", Owner: owner, Lease: time.Minute}
	if g, err := s.Acquire(ctx, mutex); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	permit := driver.Request{Kind: driver.KindPermit, Name: "mutex", Owner: owner, Lease: time.Minute, Permits: 3}
	if _, err := s.Acquire(ctx, permit); !errors.As(err, &nal) || !strings.Contains(nal.Found, "not a semaphore") {
		t.Errorf("permit Acquire on a mutex = %v, want NotALockError", err)
	}
	if err := s.Release(ctx, permit); !errors.Is(err, driver.ErrNotHeld) || !errors.As(err, &nal) {
		t.Errorf("permit Release on a mutex = %v, want ErrNotHeld and NotALockError", err)
	}
	if res := s.Renew(ctx, []driver.Request{permit}); res[0].Err != nil || res[0].Status != driver.RenewGone {
		t.Errorf("permit Renew on a mutex = %+v, want gone", res[0])
	}
	if err := s.Release(ctx, mutex); err != nil {
		t.Errorf("the mutex's own release after the refusals: %v", err)
	}
}
