package leash_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
)

// faultStore wraps a memstore to count calls and inject faults. It is a test
// double for the core's own logic; the stores themselves are tested against
// real servers.
type faultStore struct {
	*memstore.Store

	acquires, renewCalls, releases, watches atomic.Int64

	mu          sync.Mutex
	renewErr    error                    // when set, every renewal fails with it
	renewErrOf  string                   // when set, only renewals of this name fail with renewErr
	acquireHook func(driver.Grant) error // runs after a real acquire; its error is returned
	releaseHook func(driver.Request)     // runs before a real release
	renewHook   func([]driver.Request)   // runs before a real renewal
	renewed     []driver.Request         // every renewal request seen
	renewSizes  []int                    // the number of requests of each Renew call
	noStore     bool                     // fail the test on any call
	t           *testing.T
}

func newFaultStore(t *testing.T) *faultStore {
	return &faultStore{Store: memstore.New(), t: t}
}

func (f *faultStore) guard() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noStore {
		f.t.Errorf("store called, want no round trip")
	}
}

func (f *faultStore) setRenewErr(err error) {
	f.mu.Lock()
	f.renewErr = err
	f.mu.Unlock()
}

func (f *faultStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	f.guard()
	f.acquires.Add(1)
	g, err := f.Store.Acquire(ctx, r)
	f.mu.Lock()
	hook := f.acquireHook
	f.mu.Unlock()
	if err == nil && hook != nil {
		if herr := hook(g); herr != nil {
			return driver.Grant{}, herr
		}
	}
	return g, err
}

func (f *faultStore) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	f.guard()
	f.renewCalls.Add(1)
	f.mu.Lock()
	f.renewed = append(f.renewed, reqs...)
	f.renewSizes = append(f.renewSizes, len(reqs))
	err, only, hook := f.renewErr, f.renewErrOf, f.renewHook
	f.mu.Unlock()
	if hook != nil {
		hook(reqs)
	}
	if err == nil {
		return f.Store.Renew(ctx, reqs)
	}
	res := make([]driver.RenewResult, len(reqs))
	for i, r := range reqs {
		if only != "" && r.Name != only {
			res[i] = f.Store.Renew(ctx, reqs[i:i+1])[0]
			continue
		}
		res[i].Err = err
	}
	return res
}

func (f *faultStore) Release(ctx context.Context, r driver.Request) error {
	f.guard()
	f.releases.Add(1)
	f.mu.Lock()
	hook := f.releaseHook
	f.mu.Unlock()
	if hook != nil {
		hook(r)
	}
	return f.Store.Release(ctx, r)
}

func (f *faultStore) Watch(ctx context.Context, kind driver.Kind, name string, wake func(driver.Wake)) (func(), error) {
	f.guard()
	f.watches.Add(1)
	return f.Store.Watch(ctx, kind, name, wake)
}

// unlockStalled runs h.Unlock in a goroutine and returns once its store
// release has started but not been applied: the release waits until gate is
// closed. The Unlock's error arrives on the returned channel.
func (f *faultStore) unlockStalled(h *leash.Hold) (gate chan struct{}, unlocked <-chan error) {
	gate, entered := make(chan struct{}), make(chan struct{})
	f.mu.Lock()
	f.releaseHook = func(r driver.Request) {
		if r.Owner != h.Owner() {
			return
		}
		f.mu.Lock()
		f.releaseHook = nil
		f.mu.Unlock()
		close(entered)
		<-gate
	}
	f.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- h.Unlock(context.Background()) }()
	<-entered
	return gate, done
}

// renewCallSizes returns the number of requests of each Renew call so far,
// in call order.
func (f *faultStore) renewCallSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.renewSizes...)
}

// renewedOwners returns how many renewal requests named owner.
func (f *faultStore) renewedOwner(owner string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.renewed {
		if r.Owner == owner {
			n++
		}
	}
	return n
}

func newClient(t *testing.T, s driver.Store, o *leash.Options) *leash.Client {
	t.Helper()
	c, err := leash.New(s, o)
	if err != nil {
		t.Fatalf("leash.New: %v", err)
	}
	return c
}

// locker is any lock type's Lock.
type locker interface {
	Lock(ctx context.Context) (*leash.Hold, error)
}

// lockAsync runs m.Lock in a goroutine and returns the channel its hold
// arrives on; an error is reported with t.Error and nil is sent.
func lockAsync(t *testing.T, m locker, ctx context.Context) <-chan *leash.Hold {
	ch := make(chan *leash.Hold, 1)
	go func() {
		h, err := m.Lock(ctx)
		if err != nil {
			t.Errorf("%T.Lock: %v", m, err)
		}
		ch <- h
	}()
	return ch
}

// handOver unlocks h, which a waiter's Lock (lockAsync's got) waits for,
// checks in a synctest bubble that the waiter got the lock at the release's
// instant (the release woke it, not a fallback timer), and unlocks the
// waiter's hold.
func handOver(t *testing.T, h *leash.Hold, got <-chan *leash.Hold) {
	t.Helper()
	released := time.Now()
	mustUnlock(t, h)
	wh := <-got
	if wh == nil {
		t.FailNow()
	}
	if d := time.Since(released); d != 0 {
		t.Errorf("the waiter got the lock %v after the release: a timer woke it, not the release", d)
	}
	mustUnlock(t, wh)
}

// grantedAt runs m.Lock in a goroutine, sends on the returned channel the
// time the lock was granted (the zero time on an error, reported with
// t.Error), and unlocks it.
func grantedAt(t *testing.T, m locker, ctx context.Context) <-chan time.Time {
	at := make(chan time.Time, 1)
	go func() {
		h, err := m.Lock(ctx)
		if err != nil {
			t.Errorf("%T.Lock: %v", m, err)
			at <- time.Time{}
			return
		}
		at <- time.Now()
		_ = h.Unlock(context.Background())
	}()
	return at
}

func mustLock(t *testing.T, m locker, ctx context.Context) *leash.Hold {
	t.Helper()
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("%T.Lock: %v", m, err)
	}
	return h
}

func mustUnlock(t *testing.T, h *leash.Hold) {
	t.Helper()
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock(%q): %v", h.Name(), err)
	}
}

// heldBy reports the owner of name in s, or "".
func heldBy(t *testing.T, s driver.Store, name string) string {
	t.Helper()
	info, err := s.(driver.Admin).Inspect(context.Background(), name)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", name, err)
	}
	if !info.Held {
		return ""
	}
	return info.Owners[0].Owner
}

// wantLost waits for h to be lost with reason and checks the error it reports.
func wantLost(t *testing.T, h *leash.Hold, reason leash.Reason) *leash.LostError {
	t.Helper()
	select {
	case <-h.Lost():
	case <-time.After(time.Hour):
		t.Fatalf("hold on %q not lost", h.Name())
	}
	var le *leash.LostError
	if err := h.Err(); !errors.As(err, &le) || !errors.Is(err, leash.ErrLost) {
		t.Fatalf("Err() = %v, want a *LostError", err)
	}
	if le.Reason != reason {
		t.Fatalf("lost reason = %v, want %v", le.Reason, reason)
	}
	if cause := context.Cause(h.Context()); cause != le {
		t.Errorf("context cause = %v, want the LostError", cause)
	}
	if h.Context().Err() == nil {
		t.Errorf("hold context not cancelled after loss")
	}
	return le
}
