package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// watchTests are release notifications of KindMutex locks (driver.Watcher).
// The other kinds' notifications are in their own sections.
var watchTests = []test{
	{name: "a release wakes every watcher", fn: testReleaseNotifies},
	{name: "only a release wakes: acquires, retries, renewals, refusals and other names are quiet", fn: testOnlyReleaseWakes},
	{name: "a stopped watch is not woken", fn: testWatchStop},
}

// quietWait is how long a watcher that must not be woken is watched.
const quietWait = 300 * time.Millisecond

// wakeCounter counts wake calls and passes each wake-up on a channel.
type wakeCounter struct {
	n  atomic.Int64
	ch chan driver.Wake
}

func newWakeCounter() *wakeCounter { return &wakeCounter{ch: make(chan driver.Wake, 64)} }

func (w *wakeCounter) wake(msg driver.Wake) {
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
	stop, err := s.(driver.Watcher).Watch(ctx(t), kind, name, w.wake)
	if err != nil {
		t.Fatalf("Watch(%v %q) error: %v", kind, name, err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(stop) })
	return func() { once.Do(stop) }
}

// watchHeads watches kind on name as the core does for client's waiters,
// through driver.WatchClient: on a driver.ClientWatcher the wake-ups of the
// queue heads that are client's owners come only this way.
func watchHeads(t *testing.T, s driver.Store, kind driver.Kind, name, client string, w *wakeCounter) {
	t.Helper()
	stop, err := driver.WatchClient(ctx(t), s.(driver.Watcher), kind, name, client, w.wake)
	if err != nil {
		t.Fatalf("WatchClient(%v %q, %q) error: %v", kind, name, client, err)
	}
	t.Cleanup(stop)
}

func wantWoken(t *testing.T, w *wakeCounter, what string) driver.Wake {
	t.Helper()
	select {
	case msg := <-w.ch:
		return msg
	case <-time.After(wakeWait):
		t.Fatalf("%s: watcher not woken within %v", what, wakeWait)
	}
	return driver.Wake{}
}

// wantMessage waits for the wake-up want, skipping WakeAll ones (a store may
// send those after a reconnect), and, when want is WakeAll, any narrower one
// before it: one change can reach a store's watch as several events (a
// forced release deletes the readers and the marks and posts its wake-up in
// one step), and a narrower wake-up ahead of the WakeAll only wakes some
// waiters early.
func wantMessage(t *testing.T, w *wakeCounter, what string, want driver.Wake) {
	t.Helper()
	for {
		msg := wantWoken(t, w, what)
		if msg == want {
			return
		}
		if msg.To != driver.WakeAll && want.To != driver.WakeAll {
			t.Fatalf("%s: watcher woken with %+v, want %+v", what, msg, want)
		}
	}
}

func wantQuiet(t *testing.T, w *wakeCounter, what string) {
	t.Helper()
	select {
	case msg := <-w.ch:
		t.Fatalf("%s: watcher woken with %+v, want no wake-up", what, msg)
	case <-time.After(quietWait):
	}
}

func testReleaseNotifies(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), long)
	a, b := newWakeCounter(), newWakeCounter()
	watch(t, s, r.Name, a)
	watch(t, s, r.Name, b)
	mustAcquire(t, s, r)
	mustRelease(t, s, r)
	wantMessage(t, a, "release", driver.Wake{To: driver.WakeOne})
	wantMessage(t, b, "release", driver.Wake{To: driver.WakeOne})
}

func testOnlyReleaseWakes(t *testing.T, s driver.Store, n *namer) {
	r, other := req(n.name(), n.owner(), long), req(n.name(), n.owner(), long)
	w := newWakeCounter()
	watch(t, s, r.Name, w)
	mustAcquire(t, s, r)
	mustAcquire(t, s, r) // a retry
	mustNotAcquire(t, s, req(r.Name, n.owner(), long))
	wantRenew(t, s, r, driver.Renewed, "by the owner")
	wantReleaseNotHeld(t, s, req(r.Name, n.owner(), long), "by a non-owner")
	mustAcquire(t, s, other)
	mustRelease(t, s, other)
	wantQuiet(t, w, "everything but a release of the watched lock")
	mustRelease(t, s, r)
	wantWoken(t, w, "release")
}

func testWatchStop(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), long)
	stopped, live := newWakeCounter(), newWakeCounter()
	stop := watch(t, s, r.Name, stopped)
	watch(t, s, r.Name, live)
	stop()
	mustAcquire(t, s, r)
	mustRelease(t, s, r)
	wantWoken(t, live, "release")
	if got := stopped.n.Load(); got != 0 {
		t.Errorf("stopped watcher woken %d times, want 0", got)
	}
}
