// Package storetest is the conformance suite of the [driver.Store] contract.
// Every store, leash's own and any user's, proves it implements the contract
// by passing Run:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) driver.Store { return mystore.New(...) })
//	}
//
// The suite uses real time (leases of a few hundred milliseconds), because a
// server-backed store measures leases by the server's clock.
//
// The suite checks the not-a-lock rule (leash.ErrNotALock) where it can reach
// it through the contract: a semaphore where a lock is asked for, and the
// reverse. A store that shares its server with other data (a Redis keyspace,
// a database) must also test, with its own tests, that every method refuses
// that data and leaves it unchanged, since the suite cannot write it.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// NewStore returns the store under test. It is called once per subtest; it
// may return the same store each time, since every subtest uses its own lock
// names.
type NewStore func(t *testing.T) driver.Store

const (
	long  = 30 * time.Second
	short = 300 * time.Millisecond
	// wakeWait bounds how long a release notification may take.
	wakeWait = 5 * time.Second
)

// Run runs the conformance suite against the stores newStore returns.
func Run(t *testing.T, newStore NewStore) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s driver.Store, n *namer)
	}{
		{"acquire a free lock", testAcquireFree},
		{"acquire a held lock reports the holder's lease", testAcquireHeld},
		{"re-entry counts holds and keeps the token", testReentry},
		{"release all drops every hold", testReleaseAll},
		{"release by a non-owner is rejected and changes nothing", testNonOwnerRelease},
		{"renew by a non-owner is rejected and changes nothing", testNonOwnerRenew},
		{"acquire by a non-owner changes nothing", testNonOwnerOverwrite},
		{"renew reports per lock", testRenewBatch},
		{"renew never creates a lock", testRenewNeverCreates},
		{"a renewal that fails for one lock does not affect others", testRenewLarge},
		{"lease expires on its own", testExpiry},
		{"fencing tokens only grow", testFenceMonotonic},
		{"release of an absent lock is rejected", testReleaseAbsent},
		{"release wakes watchers", testReleaseNotifies},
		{"partial release does not wake watchers", testPartialReleaseQuiet},
		{"stopped watch is not woken", testWatchStop},
		{"inspect reports holder, holds, lease and token", testInspect},
		{"force release deletes and wakes", testForceRelease},
		{"concurrent acquires grant once", testConcurrentAcquire},
		{"unusual names work", testNames},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t), newNamer(t))
		})
	}
	runKinds(t, newStore)
	runRecords(t, newStore)
}

// namer makes lock names and owners unique to one subtest run.
type namer struct {
	prefix string
	seq    atomic.Int64
}

func newNamer(t *testing.T) *namer {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &namer{prefix: "storetest/" + hex.EncodeToString(b[:]) + "/" + t.Name()}
}

func (n *namer) name() string { return fmt.Sprintf("%s/%d", n.prefix, n.seq.Add(1)) }

// owner returns a fresh owner in the shape the core gives (see driver.Request):
// a client id in UUID form, a colon and a number.
func (n *namer) owner() string {
	seq := n.seq.Add(1)
	return fmt.Sprintf("%s-0000-4000-8000-%012d:%d", n.prefix[10:18], seq, seq)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func req(name, owner string, lease time.Duration) driver.Request {
	return driver.Request{Name: name, Owner: owner, Lease: lease}
}

func mustAcquire(t *testing.T, s driver.Store, r driver.Request) driver.Grant {
	t.Helper()
	g, err := s.Acquire(ctx(t), r)
	if err != nil {
		t.Fatalf("Acquire(%q, %q) error: %v", r.Name, r.Owner, err)
	}
	if !g.Acquired {
		t.Fatalf("Acquire(%q, %q) = not acquired (remaining %v), want acquired", r.Name, r.Owner, g.Remaining)
	}
	return g
}

func mustNotAcquire(t *testing.T, s driver.Store, r driver.Request) driver.Grant {
	t.Helper()
	g, err := s.Acquire(ctx(t), r)
	if err != nil {
		t.Fatalf("Acquire(%q, %q) error: %v", r.Name, r.Owner, err)
	}
	if g.Acquired {
		t.Fatalf("Acquire(%q, %q) = acquired (fence %d), want not acquired", r.Name, r.Owner, g.Fence)
	}
	return g
}

func inspect(t *testing.T, s driver.Store, name string) driver.Info {
	t.Helper()
	info, err := s.Inspect(ctx(t), name)
	if err != nil {
		t.Fatalf("Inspect(%q) error: %v", name, err)
	}
	return info
}

// wantHeldBy checks that name is held by owner with holds holds.
func wantHeldBy(t *testing.T, s driver.Store, name, owner string, holds int) driver.Info {
	t.Helper()
	info := inspect(t, s, name)
	if !info.Held || len(info.Owners) != 1 || info.Owners[0].Owner != owner || info.Owners[0].Holds != holds {
		t.Fatalf("Inspect(%q) = held %v owners %+v, want held by %q with %d holds", name, info.Held, info.Owners, owner, holds)
	}
	return info
}

func wantFree(t *testing.T, s driver.Store, name string) {
	t.Helper()
	if info := inspect(t, s, name); info.Held {
		t.Fatalf("Inspect(%q) = held by %+v, want free", name, info.Owners)
	}
}

func renewOne(t *testing.T, s driver.Store, r driver.Request) driver.RenewStatus {
	t.Helper()
	res := s.Renew(ctx(t), []driver.Request{r})
	if len(res) != 1 {
		t.Fatalf("Renew(1 request) returned %d results", len(res))
	}
	if res[0].Err != nil {
		t.Fatalf("Renew(%q, %q) error: %v", r.Name, r.Owner, res[0].Err)
	}
	return res[0].Status
}

func testAcquireFree(t *testing.T, s driver.Store, n *namer) {
	name, o := n.name(), n.owner()
	g := mustAcquire(t, s, req(name, o, long))
	if g.Holds != 1 || g.Fence <= 0 {
		t.Errorf("Acquire of a free lock = holds %d fence %d, want holds 1 and a positive fence", g.Holds, g.Fence)
	}
	wantHeldBy(t, s, name, o, 1)
}

func testAcquireHeld(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	mustAcquire(t, s, req(name, n.owner(), long))
	g := mustNotAcquire(t, s, req(name, n.owner(), long))
	if g.Remaining <= 0 || g.Remaining > long {
		t.Errorf("Remaining = %v, want in (0, %v]", g.Remaining, long)
	}
}

func testReentry(t *testing.T, s driver.Store, n *namer) {
	name, o := n.name(), n.owner()
	g1 := mustAcquire(t, s, req(name, o, long))
	g2 := mustAcquire(t, s, req(name, o, long))
	if g2.Holds != 2 || g2.Fence != g1.Fence {
		t.Errorf("re-entry = holds %d fence %d, want holds 2 and fence %d", g2.Holds, g2.Fence, g1.Fence)
	}
	wantHeldBy(t, s, name, o, 2)
	freed, err := s.Release(ctx(t), req(name, o, long), leash.ReleaseOne)
	if err != nil || freed {
		t.Fatalf("first ReleaseOne = freed %v, err %v; want still held, nil", freed, err)
	}
	wantHeldBy(t, s, name, o, 1)
	mustNotAcquire(t, s, req(name, n.owner(), long))
	freed, err = s.Release(ctx(t), req(name, o, long), leash.ReleaseOne)
	if err != nil || !freed {
		t.Fatalf("second ReleaseOne = freed %v, err %v; want freed, nil", freed, err)
	}
	wantFree(t, s, name)
	g3 := mustAcquire(t, s, req(name, n.owner(), long))
	if g3.Fence <= g1.Fence {
		t.Errorf("fence after re-acquire = %d, want > %d", g3.Fence, g1.Fence)
	}
}

func testReleaseAll(t *testing.T, s driver.Store, n *namer) {
	name, o := n.name(), n.owner()
	for range 3 {
		mustAcquire(t, s, req(name, o, long))
	}
	freed, err := s.Release(ctx(t), req(name, o, long), leash.ReleaseAll)
	if err != nil || !freed {
		t.Fatalf("ReleaseAll of 3 holds = freed %v, err %v; want freed, nil", freed, err)
	}
	wantFree(t, s, name)
}

func testNonOwnerRelease(t *testing.T, s driver.Store, n *namer) {
	name, o := n.name(), n.owner()
	mustAcquire(t, s, req(name, o, long))
	for _, mode := range []leash.ReleaseMode{leash.ReleaseOne, leash.ReleaseAll} {
		freed, err := s.Release(ctx(t), req(name, n.owner(), long), mode)
		if !errors.Is(err, leash.ErrNotHeld) || freed {
			t.Errorf("Release(mode %d) by a non-owner = freed %v, err %v; want ErrNotHeld", mode, freed, err)
		}
	}
	wantHeldBy(t, s, name, o, 1)
}

func testNonOwnerRenew(t *testing.T, s driver.Store, n *namer) {
	name, o := n.name(), n.owner()
	mustAcquire(t, s, req(name, o, 2*time.Second))
	if st := renewOne(t, s, req(name, n.owner(), long)); st != driver.RenewTaken {
		t.Errorf("Renew by a non-owner = status %d, want RenewTaken (%d)", st, driver.RenewTaken)
	}
	info := wantHeldBy(t, s, name, o, 1)
	if info.Remaining > 2*time.Second {
		t.Errorf("Remaining after a non-owner renew = %v, want <= 2s (unchanged)", info.Remaining)
	}
}

func testNonOwnerOverwrite(t *testing.T, s driver.Store, n *namer) {
	name, o := n.name(), n.owner()
	g := mustAcquire(t, s, req(name, o, 2*time.Second))
	mustNotAcquire(t, s, req(name, n.owner(), long))
	info := wantHeldBy(t, s, name, o, 1)
	if info.Remaining > 2*time.Second {
		t.Errorf("Remaining after a failed acquire = %v, want <= 2s (unchanged)", info.Remaining)
	}
	if info.Fence != g.Fence {
		t.Errorf("last fence after a failed acquire = %d, want %d (unchanged)", info.Fence, g.Fence)
	}
}

func testRenewBatch(t *testing.T, s driver.Store, n *namer) {
	held, gone, taken, o := n.name(), n.name(), n.name(), n.owner()
	mustAcquire(t, s, req(held, o, 2*time.Second))
	mustAcquire(t, s, req(taken, n.owner(), long))
	res := s.Renew(ctx(t), []driver.Request{req(held, o, long), req(gone, o, long), req(taken, o, long)})
	want := []driver.RenewStatus{driver.Renewed, driver.RenewGone, driver.RenewTaken}
	if len(res) != len(want) {
		t.Fatalf("Renew(3 requests) returned %d results", len(res))
	}
	for i, r := range res {
		if r.Err != nil || r.Status != want[i] {
			t.Errorf("Renew result %d = status %d err %v, want status %d", i, r.Status, r.Err, want[i])
		}
	}
	if info := wantHeldBy(t, s, held, o, 1); info.Remaining <= 2*time.Second {
		t.Errorf("Remaining after renewal to %v = %v, want > 2s", long, info.Remaining)
	}
}

func testRenewNeverCreates(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	if st := renewOne(t, s, req(name, n.owner(), long)); st != driver.RenewGone {
		t.Errorf("Renew of an absent lock = status %d, want RenewGone (%d)", st, driver.RenewGone)
	}
	wantFree(t, s, name)
}

// testRenewLarge renews many locks in one call (more than one batch for any
// sensible batch size) and checks every result.
func testRenewLarge(t *testing.T, s driver.Store, n *namer) {
	const count = 1200
	o := n.owner()
	reqs := make([]driver.Request, count)
	for i := range reqs {
		reqs[i] = req(n.name(), o, long)
		if i%3 != 2 { // every third lock is never acquired
			mustAcquire(t, s, reqs[i])
		}
	}
	res := s.Renew(ctx(t), reqs)
	if len(res) != count {
		t.Fatalf("Renew(%d requests) returned %d results", count, len(res))
	}
	for i, r := range res {
		want := driver.Renewed
		if i%3 == 2 {
			want = driver.RenewGone
		}
		if r.Err != nil || r.Status != want {
			t.Fatalf("Renew result %d = status %d err %v, want %d", i, r.Status, r.Err, want)
		}
	}
}

func testExpiry(t *testing.T, s driver.Store, n *namer) {
	name, o := n.name(), n.owner()
	g1 := mustAcquire(t, s, req(name, o, short))
	deadline := time.Now().Add(short + 2*time.Second)
	var g2 driver.Grant
	for {
		g, err := s.Acquire(ctx(t), req(name, n.owner(), long))
		if err != nil {
			t.Fatalf("Acquire error: %v", err)
		}
		if g.Acquired {
			g2 = g
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock with a %v lease still held after %v", short, short+2*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if g2.Fence <= g1.Fence {
		t.Errorf("fence after expiry = %d, want > %d", g2.Fence, g1.Fence)
	}
	if st := renewOne(t, s, req(name, o, long)); st != driver.RenewTaken {
		t.Errorf("Renew by the expired owner = status %d, want RenewTaken (%d)", st, driver.RenewTaken)
	}
	if _, err := s.Release(ctx(t), req(name, o, long), leash.ReleaseAll); !errors.Is(err, leash.ErrNotHeld) {
		t.Errorf("Release by the expired owner = %v, want ErrNotHeld", err)
	}
}

func testFenceMonotonic(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	var last int64
	for i := range 50 {
		o := n.owner()
		g := mustAcquire(t, s, req(name, o, long))
		if g.Fence <= last {
			t.Fatalf("grant %d fence = %d, want > %d", i, g.Fence, last)
		}
		last = g.Fence
		if i%5 == 0 {
			if g2 := mustAcquire(t, s, req(name, o, long)); g2.Fence != g.Fence {
				t.Fatalf("re-entry fence = %d, want %d", g2.Fence, g.Fence)
			}
		}
		if _, err := s.Release(ctx(t), req(name, o, long), leash.ReleaseAll); err != nil {
			t.Fatalf("Release error: %v", err)
		}
	}
	if info := inspect(t, s, name); info.Fence != last {
		t.Errorf("Inspect fence = %d, want the last grant's %d", info.Fence, last)
	}
}

func testReleaseAbsent(t *testing.T, s driver.Store, n *namer) {
	for _, mode := range []leash.ReleaseMode{leash.ReleaseOne, leash.ReleaseAll} {
		if _, err := s.Release(ctx(t), req(n.name(), n.owner(), long), mode); !errors.Is(err, leash.ErrNotHeld) {
			t.Errorf("Release(mode %d) of an absent lock = %v, want ErrNotHeld", mode, err)
		}
	}
}

// wakeCounter counts wake calls and passes each message on a channel.
type wakeCounter struct {
	n  atomic.Int64
	ch chan string
}

func newWakeCounter() *wakeCounter { return &wakeCounter{ch: make(chan string, 64)} }

func (w *wakeCounter) wake(msg string) {
	w.n.Add(1)
	select {
	case w.ch <- msg:
	default:
	}
}

func watch(t *testing.T, s driver.Store, name string, w *wakeCounter) func() {
	t.Helper()
	return watchKind(t, s, driver.KindMutex, name, w)
}

func watchKind(t *testing.T, s driver.Store, kind driver.Kind, name string, w *wakeCounter) func() {
	t.Helper()
	stop, err := s.Watch(ctx(t), kind, name, w.wake)
	if err != nil {
		t.Fatalf("Watch(%q) error: %v", name, err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(stop) })
	return func() { once.Do(stop) }
}

func wantWoken(t *testing.T, w *wakeCounter, what string) string {
	t.Helper()
	select {
	case msg := <-w.ch:
		return msg
	case <-time.After(wakeWait):
		t.Fatalf("%s: watcher not woken within %v", what, wakeWait)
	}
	return ""
}

// wantMessage waits for a wake-up with message want, skipping WakeAll ones
// (a store may send those after a reconnect).
func wantMessage(t *testing.T, w *wakeCounter, what, want string) {
	t.Helper()
	for {
		msg := wantWoken(t, w, what)
		if msg == want {
			return
		}
		if msg != driver.WakeAll {
			t.Fatalf("%s: watcher woken with %q, want %q", what, msg, want)
		}
	}
}

func wantQuiet(t *testing.T, w *wakeCounter, what string) {
	t.Helper()
	select {
	case <-w.ch:
		t.Fatalf("%s: watcher woken, want no wake-up", what)
	case <-time.After(300 * time.Millisecond):
	}
}

func testReleaseNotifies(t *testing.T, s driver.Store, n *namer) {
	name, o := n.name(), n.owner()
	a, b := newWakeCounter(), newWakeCounter()
	watch(t, s, name, a)
	watch(t, s, name, b)
	mustAcquire(t, s, req(name, o, long))
	if _, err := s.Release(ctx(t), req(name, o, long), leash.ReleaseAll); err != nil {
		t.Fatalf("Release error: %v", err)
	}
	wantMessage(t, a, "release", driver.WakeOne)
	wantMessage(t, b, "release", driver.WakeOne)
}

func testPartialReleaseQuiet(t *testing.T, s driver.Store, n *namer) {
	name, o := n.name(), n.owner()
	w := newWakeCounter()
	watch(t, s, name, w)
	mustAcquire(t, s, req(name, o, long))
	mustAcquire(t, s, req(name, o, long))
	if _, err := s.Release(ctx(t), req(name, o, long), leash.ReleaseOne); err != nil {
		t.Fatalf("Release error: %v", err)
	}
	wantQuiet(t, w, "release of one of two holds")
	if _, err := s.Release(ctx(t), req(name, o, long), leash.ReleaseOne); err != nil {
		t.Fatalf("Release error: %v", err)
	}
	wantWoken(t, w, "release of the last hold")
}

func testWatchStop(t *testing.T, s driver.Store, n *namer) {
	name, o := n.name(), n.owner()
	stopped, live := newWakeCounter(), newWakeCounter()
	stop := watch(t, s, name, stopped)
	watch(t, s, name, live)
	stop()
	mustAcquire(t, s, req(name, o, long))
	if _, err := s.Release(ctx(t), req(name, o, long), leash.ReleaseAll); err != nil {
		t.Fatalf("Release error: %v", err)
	}
	wantWoken(t, live, "release")
	if got := stopped.n.Load(); got != 0 {
		t.Errorf("stopped watcher woken %d times, want 0", got)
	}
}

func testInspect(t *testing.T, s driver.Store, n *namer) {
	name, o := n.name(), n.owner()
	if info := inspect(t, s, name); info.Held || info.Remaining >= 0 || info.Name != name {
		t.Errorf("Inspect of an absent lock = %+v, want name %q, not held, negative remaining", info, name)
	}
	g := mustAcquire(t, s, req(name, o, long))
	info := wantHeldBy(t, s, name, o, 1)
	if info.Remaining <= 0 || info.Remaining > long || info.Fence != g.Fence {
		t.Errorf("Inspect = remaining %v fence %d, want in (0, %v] and fence %d", info.Remaining, info.Fence, long, g.Fence)
	}
}

func testForceRelease(t *testing.T, s driver.Store, n *namer) {
	name, o := n.name(), n.owner()
	w := newWakeCounter()
	watch(t, s, name, w)
	mustAcquire(t, s, req(name, o, long))
	mustAcquire(t, s, req(name, o, long))
	ok, err := s.ForceRelease(ctx(t), name)
	if err != nil || !ok {
		t.Fatalf("ForceRelease = %v, %v; want true, nil", ok, err)
	}
	wantWoken(t, w, "force release")
	wantFree(t, s, name)
	if st := renewOne(t, s, req(name, o, long)); st != driver.RenewGone {
		t.Errorf("Renew after force release = status %d, want RenewGone", st)
	}
	if ok, err := s.ForceRelease(ctx(t), name); err != nil || ok {
		t.Errorf("ForceRelease of an absent lock = %v, %v; want false, nil", ok, err)
	}
}

func testConcurrentAcquire(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	const workers = 16
	owners := make([]string, workers)
	for i := range owners {
		owners[i] = n.owner()
	}
	var (
		wg      sync.WaitGroup
		granted atomic.Int64
		errs    = make(chan error, workers)
	)
	start := make(chan struct{})
	for _, o := range owners {
		wg.Go(func() {
			<-start
			g, err := s.Acquire(context.Background(), req(name, o, long))
			if err != nil {
				errs <- err
				return
			}
			if g.Acquired {
				granted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Acquire error: %v", err)
	}
	if got := granted.Load(); got != 1 {
		t.Errorf("%d concurrent acquires by different owners granted %d times, want 1", workers, got)
	}
}

func testNames(t *testing.T, s driver.Store, n *namer) {
	base := n.name()
	longName := base + "/"
	for len(longName) < leash.MaxNameLen {
		longName += "x"
	}
	for _, name := range []string{
		base + "/with spaces and ünïcödé ✓",
		base + "/{tagged}",
		base + "/quote\"and'apostrophe",
		base + "/percent%s%d",
		longName[:leash.MaxNameLen],
	} {
		if err := leash.ValidateName(name); err != nil {
			t.Fatalf("ValidateName(%q) = %v", name, err)
		}
		if nc, ok := s.(driver.NameChecker); ok && nc.CheckName(name) != nil {
			continue // the store does not take this name, and says so before any round trip
		}
		o := n.owner()
		mustAcquire(t, s, req(name, o, long))
		wantHeldBy(t, s, name, o, 1)
		mustNotAcquire(t, s, req(name, n.owner(), long))
		if freed, err := s.Release(ctx(t), req(name, o, long), leash.ReleaseAll); err != nil || !freed {
			t.Errorf("Release(%q) = %v, %v; want freed", name, freed, err)
		}
	}
}
