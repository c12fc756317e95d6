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

// TestKindConversion: a name with no live holds, places or marks is free
// for either kind, and takes the kind of the lock it grants, keeping its
// fencing counter; while holds, places or marks of one kind exist the
// other is refused with a NotALockError; releasing what is not held is
// ErrNotHeld, with a NotALockError only when the name holds the other kind.
func TestKindConversion(t *testing.T) {
	s := newStore(t, nil)
	ctx := bg(t)
	const owner = "00000000-0000-4000-8000-000000000001:"
	req := func(k driver.Kind, name, o string) driver.Request {
		return driver.Request{Kind: k, Name: name, Owner: owner + o, Lease: time.Minute, Wait: time.Minute, Permits: 2}
	}
	grant := func(r driver.Request) int64 {
		t.Helper()
		g, err := s.Acquire(ctx, r)
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire %v %s by %s = %+v, %v; want granted", r.Kind, r.Name, r.Owner, g, err)
		}
		return g.Fence
	}
	release := func(r driver.Request) {
		t.Helper()
		if err := s.Release(ctx, r); err != nil {
			t.Fatalf("Release %v %s: %v", r.Kind, r.Name, err)
		}
	}
	var nal *driver.NotALockError
	refused := func(r driver.Request, what string) {
		t.Helper()
		if g, err := s.Acquire(ctx, r); !errors.As(err, &nal) {
			t.Errorf("Acquire %v on %s = %+v, %v; want a NotALockError (%s)", r.Kind, r.Name, g, err, what)
		}
	}

	// A free ex-semaphore takes a mutex, and back; the counter is kept.
	p := req(driver.KindPermit, "sem", "p")
	f1 := grant(p)
	release(p)
	m := req(driver.KindMutex, "sem", "m")
	if f2 := grant(m); f2 <= f1 {
		t.Errorf("mutex token %d on an ex-semaphore, not above the permit's %d", f2, f1)
	}
	if info, err := s.Inspect(ctx, "sem"); err != nil || info.Kind != driver.KindMutex {
		t.Errorf("Inspect after the mutex grant = %+v, %v; want a mutex", info, err)
	}
	refused(p, "a mutex is held")
	release(m)
	grant(p)
	refused(m, "a permit is held")
	if _, err := s.AcquireMany(ctx, []driver.Request{m}); !errors.As(err, &nal) {
		t.Errorf("AcquireMany on a held semaphore = %v, want a NotALockError", err)
	}
	release(p)
	if mg, err := s.AcquireMany(ctx, []driver.Request{m}); err != nil || !mg.Acquired {
		t.Errorf("AcquireMany on a free ex-semaphore = %+v, %v; want granted", mg, err)
	}
	release(m)

	// A fair-queue place keeps a free lock name a lock.
	h := req(driver.KindMutex, "fair", "h")
	grant(h)
	f := req(driver.KindFair, "fair", "f")
	if g, err := s.Acquire(ctx, f); err != nil || g.Acquired {
		t.Fatalf("fair Acquire behind a holder = %+v, %v; want a place in the queue", g, err)
	}
	release(h)
	refused(req(driver.KindPermit, "fair", "p"), "a fair-queue place")
	if err := s.SetPermits(ctx, "fair", 3); !errors.As(err, &nal) {
		t.Errorf("SetPermits on a name with a fair-queue place = %v, want a NotALockError", err)
	}
	grant(f) // the queue's head is still first
	release(f)

	// So does a waiting writer's mark.
	r := req(driver.KindRead, "rw", "r")
	grant(r)
	w := req(driver.KindWrite, "rw", "w")
	if g, err := s.Acquire(ctx, w); err != nil || g.Acquired {
		t.Fatalf("write Acquire behind a reader = %+v, %v; want a mark", g, err)
	}
	release(r)
	refused(req(driver.KindPermit, "rw", "p"), "a waiting writer's mark")
	grant(w)
	release(w)

	// Releasing what is not held.
	for _, tc := range []struct {
		r         driver.Request
		notALock  bool
		situation string
	}{
		{req(driver.KindPermit, "rw", "x"), false, "a permit on a free lock name"},
		{req(driver.KindMutex, "fair", "x"), false, "a mutex on a free lock name"},
		{req(driver.KindMutex, "sem", "x"), false, "a mutex on a free ex-semaphore"},
	} {
		err := s.Release(ctx, tc.r)
		if !errors.Is(err, driver.ErrNotHeld) || errors.Is(err, driver.ErrNotALock) != tc.notALock {
			t.Errorf("Release of %s = %v; want ErrNotHeld, NotALock %v", tc.situation, err, tc.notALock)
		}
	}
	grant(p)
	if err := s.Release(ctx, req(driver.KindMutex, "sem", "x")); !errors.Is(err, driver.ErrNotHeld) || !errors.Is(err, driver.ErrNotALock) {
		t.Errorf("mutex Release on a held semaphore = %v; want ErrNotHeld and NotALock", err)
	}
}
