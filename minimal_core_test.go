package leash_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// countingStore counts the round trips to a store. It has the store's
// required core only (and its name), whatever else the store implements.
type countingStore struct {
	driver.Store
	acquires, renews, releases atomic.Int64
}

func (c *countingStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	c.acquires.Add(1)
	return c.Store.Acquire(ctx, r)
}

func (c *countingStore) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	c.renews.Add(1)
	return c.Store.Renew(ctx, reqs)
}

func (c *countingStore) Release(ctx context.Context, r driver.Request) error {
	c.releases.Add(1)
	return c.Store.Release(ctx, r)
}

func (c *countingStore) String() string { return driver.Describe(c.Store) }

func (c *countingStore) calls() int64 { return c.acquires.Load() + c.renews.Load() + c.releases.Load() }

// wantBusy checks that m's lock is refused to another client's TryLock.
func wantBusy(t *testing.T, c *leash.Client, name string) {
	t.Helper()
	h, err := c.Mutex(name).TryLock(t.Context())
	var na *leash.NotAcquiredError
	if !errors.As(err, &na) || na.Remaining <= 0 {
		if h != nil {
			_ = h.Unlock(context.Background())
		}
		t.Fatalf("TryLock(%q) = %v, want a *NotAcquiredError with the holder's remaining lease", name, err)
	}
}

// wantFreeLock checks that another client's TryLock takes name's lock at
// once, and releases it.
func wantFreeLock(t *testing.T, c *leash.Client, name string) *leash.Hold {
	t.Helper()
	h, err := c.Mutex(name).TryLock(t.Context())
	if err != nil {
		t.Fatalf("TryLock(%q) = %v, want the lock", name, err)
	}
	mustUnlock(t, h)
	return h
}

// TestMinimalStoreCore runs the core on the minimal store: every Mutex
// feature works on the required core alone.
func TestMinimalStoreCore(t *testing.T) {
	setup := func(t *testing.T) (*countingStore, *leash.Client, *leash.Client) {
		s := &countingStore{Store: newMinimalStore()}
		a, b := newClient(t, s, nil), newClient(t, s, nil)
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		return s, a, b
	}

	t.Run("lock, try lock, unlock", func(t *testing.T) {
		_, a, b := setup(t)
		h := mustLock(t, a.Mutex("job"), t.Context())
		if h.Fence() <= 0 {
			t.Errorf("Fence() = %d, want positive", h.Fence())
		}
		wantBusy(t, b, "job")
		mustUnlock(t, h)
		wantFreeLock(t, b, "job")
	})

	t.Run("a waiter polls until the holder unlocks", func(t *testing.T) {
		s, a, b := setup(t)
		h := mustLock(t, a.Mutex("handoff"), t.Context())
		before := s.acquires.Load()
		got := make(chan *leash.Hold, 1)
		go func() { // ends when b's Lock returns
			w, err := b.Mutex("handoff").Lock(t.Context())
			if err != nil {
				t.Errorf("waiter's Lock: %v", err)
			}
			got <- w
		}()
		for s.acquires.Load() == before { // the waiter's first attempt, refused
			time.Sleep(time.Millisecond)
		}
		mustUnlock(t, h)
		w := <-got // by polling: the store sends no notification
		if w == nil {
			return
		}
		if w.Fence() <= h.Fence() {
			t.Errorf("waiter's fence %d, want > the holder's %d", w.Fence(), h.Fence())
		}
		mustUnlock(t, w)
	})

	t.Run("re-entry takes no round trip, the last unlock releases", func(t *testing.T) {
		s, a, b := setup(t)
		outer := mustLock(t, a.Mutex("reentrant"), t.Context())
		calls := s.calls()
		inner := mustLock(t, a.Mutex("reentrant"), outer.Context())
		if inner.Fence() != outer.Fence() {
			t.Errorf("re-entered fence %d, want the outer hold's %d", inner.Fence(), outer.Fence())
		}
		mustUnlock(t, inner)
		if got := s.calls() - calls; got != 0 {
			t.Errorf("re-entry and its unlock made %d store calls, want 0", got)
		}
		wantBusy(t, b, "reentrant")
		mustUnlock(t, outer)
		wantFreeLock(t, b, "reentrant")
	})

	t.Run("a multi-lock takes the names one by one", func(t *testing.T) {
		s, a, b := setup(t)
		names := []string{"m1", "m2", "m3"}
		before := s.acquires.Load()
		h := mustLock(t, a.MultiLock(names), t.Context())
		if got := s.acquires.Load() - before; got != int64(len(names)) {
			t.Errorf("MultiLock of %d names made %d acquires, want one per name", len(names), got)
		}
		for _, n := range names {
			if h.FenceOf(n) <= 0 {
				t.Errorf("FenceOf(%q) = %d, want positive", n, h.FenceOf(n))
			}
			wantBusy(t, b, n)
		}
		mustUnlock(t, h)
		blocker := mustLock(t, b.Mutex("m3"), t.Context())
		if _, err := a.MultiLock(names).TryLock(t.Context()); !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("MultiLock.TryLock with one name held = %v, want ErrNotAcquired", err)
		}
		for _, n := range names[:2] {
			wantFreeLock(t, b, n) // the names taken before the refusal were released
		}
		mustUnlock(t, blocker)
	})

	t.Run("fencing tokens grow across holders", func(t *testing.T) {
		_, a, b := setup(t)
		var last int64
		for i, c := range []*leash.Client{a, b, a, b} {
			h := mustLock(t, c.Mutex("fenced"), t.Context())
			if h.Fence() <= last {
				t.Errorf("hold %d fence = %d, want > %d", i, h.Fence(), last)
			}
			last = h.Fence()
			mustUnlock(t, h)
		}
	})
}

// TestMinimalStoreRefusals shows that the core refuses what the minimal store
// lacks before any round trip, with an error that names the store and what
// it lacks.
func TestMinimalStoreRefusals(t *testing.T) {
	s := &countingStore{Store: newMinimalStore()}
	c := newClient(t, s, nil)
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	hold := func(h *leash.Hold, err error) error {
		if h != nil {
			_ = h.Unlock(context.Background())
		}
		return err
	}
	for _, tc := range []struct {
		name, lacks string
		call        func() error
	}{
		{"FairMutex.Lock", "fair locks", func() error { return hold(c.FairMutex("f", nil).Lock(ctx)) }},
		{"FairMutex.TryLock", "fair locks", func() error { return hold(c.FairMutex("f", nil).TryLock(ctx)) }},
		{"RWMutex.RLock", "read locks", func() error { return hold(c.RWMutex("rw", nil).RLock(ctx)) }},
		{"RWMutex.TryRLock", "read locks", func() error { return hold(c.RWMutex("rw", nil).TryRLock(ctx)) }},
		{"RWMutex.Lock", "write locks", func() error { return hold(c.RWMutex("rw", nil).Lock(ctx)) }},
		{"RWMutex.TryLock", "write locks", func() error { return hold(c.RWMutex("rw", nil).TryLock(ctx)) }},
		{"Semaphore.Acquire", "permit locks", func() error { return hold(c.Semaphore("sem", 2).Acquire(ctx)) }},
		{"Semaphore.TryAcquire", "permit locks", func() error { return hold(c.Semaphore("sem", 2).TryAcquire(ctx)) }},
		{"Semaphore.SetPermits", "permit locks", func() error { return c.Semaphore("sem", 2).SetPermits(ctx, 3) }},
		{"Client.Inspect", "administration", func() error { _, err := c.Inspect(ctx, "x"); return err }},
		{"Client.ForceUnlock", "administration", func() error { _, err := c.ForceUnlock(ctx, "x"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.calls()
			err := tc.call()
			if !errors.Is(err, leash.ErrUnsupported) {
				t.Fatalf("%s = %v, want ErrUnsupported", tc.name, err)
			}
			if msg := err.Error(); !strings.Contains(msg, driver.Describe(s)) || !strings.Contains(msg, tc.lacks) {
				t.Errorf("%s error %q, want it to name the store (%q) and what it lacks (%q)", tc.name, msg, driver.Describe(s), tc.lacks)
			}
			if got := s.calls() - before; got != 0 {
				t.Errorf("%s made %d store calls, want none", tc.name, got)
			}
		})
	}
}
