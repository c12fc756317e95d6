package leash_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []leash.Event
}

func (r *recorder) Observe(e leash.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// has reports whether an event of op was seen (and not yet taken).
func (r *recorder) has(op leash.Op) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Op == op {
			return true
		}
	}
	return false
}

// take returns the events of op seen so far, and forgets them.
func (r *recorder) take(op leash.Op) []leash.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out, rest []leash.Event
	for _, e := range r.events {
		if e.Op == op {
			out = append(out, e)
		} else {
			rest = append(rest, e)
		}
	}
	r.events = rest
	return out
}

// observedClient returns a Client on s whose events rec records; the caller
// closes it.
func observedClient(t *testing.T, s driver.Store, lease time.Duration) (*leash.Client, *recorder) {
	t.Helper()
	rec := &recorder{}
	return newClient(t, s, &leash.Options{Lease: lease, Observer: rec}), rec
}

// TestObserverSeesEveryTenureEnd walks a Client through each event: a grant,
// a re-entry (no event), a release, a refusal, a store failure, renewal
// rounds, a loss and a MultiLock, and checks what the observer was told.
func TestObserverSeesEveryTenureEnd(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c, rec := observedClient(t, s, 300*time.Millisecond)
		defer c.Close()
		ctx := context.Background()

		h, err := c.Mutex("a").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		inner, err := c.Mutex("a").Lock(h.Context()) // a re-entry: no event
		if err != nil {
			t.Fatal(err)
		}
		if ev := rec.take(leash.OpAcquired); len(ev) != 1 || ev[0].Kind != driver.KindMutex || ev[0].Name != "a" || ev[0].Wait < 0 {
			t.Errorf("after a Lock and a re-entry: acquired events %+v; want one for the mutex \"a\"", ev)
		}
		time.Sleep(250 * time.Millisecond) // a renewal round or two
		if ev := rec.take(leash.OpRenewed); len(ev) == 0 || ev[0].Locks != 1 || ev[0].Failed != 0 {
			t.Errorf("renewal events %+v; want rounds of one lock, none failed", ev)
		}
		_ = inner.Unlock(ctx)
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if ev := rec.take(leash.OpReleased); len(ev) != 1 || ev[0].Held < 250*time.Millisecond {
			t.Errorf("released events %+v; want one, held at least 250ms", ev)
		}

		other, err := c.Mutex("b").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev := rec.take(leash.OpAcquired); len(ev) != 1 || ev[0].Name != "b" {
			t.Errorf("acquired events after locking \"b\": %+v; want one", ev)
		}
		_, err = c.Mutex("b").TryLock(context.Background()) // another owner: refused
		var na *leash.NotAcquiredError
		if ev := rec.take(leash.OpNotAcquired); !errors.As(err, &na) || len(ev) != 1 || !errors.As(ev[0].Err, &na) {
			t.Errorf("TryLock of a held lock = %v; not-acquired events %+v; want one carrying the NotAcquiredError", err, ev)
		}

		// The store loses the lock: the holder is told, and so is the observer.
		s.setRenewErr(errors.New("store down"))
		select {
		case <-other.Lost():
		case <-time.After(2 * time.Second):
			t.Fatal("hold not lost with every renewal failing")
		}
		s.setRenewErr(nil)
		// The holder is told first; the observer hears of the loss just after.
		for deadline := time.Now().Add(time.Second); !rec.has(leash.OpLost); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no loss observed within 1s of the holder being told")
			}
		}
		lost := rec.take(leash.OpLost)
		if len(lost) != 1 || lost[0].Name != "b" || lost[0].Reason != leash.ReasonUnreachable || lost[0].Err == nil {
			t.Errorf("lost events %+v; want one for \"b\", store unreachable, with the cause", lost)
		}
		_ = other.Unlock(ctx) // already lost: no released event
		if ev := rec.take(leash.OpReleased); len(ev) != 0 {
			t.Errorf("released events after unlocking a lost hold: %+v; want none", ev)
		}

		m, err := c.MultiLock([]string{"y", "x"}).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev := rec.take(leash.OpAcquired); len(ev) != 1 || ev[0].Name != "x" {
			t.Errorf("MultiLock acquired events %+v; want one, named by its first name in lock order", ev)
		}
		_ = m.Unlock(ctx)
	})
}

// TestObserverUnlockFindsLockGone: a lock freed under its holder (an operator's
// force-unlock) that Unlock finds gone before the watchdog did is observed as
// lost, released elsewhere, not as released.
func TestObserverUnlockFindsLockGone(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c, rec := observedClient(t, s, 0)
		defer c.Close()
		ctx := context.Background()
		h, err := c.Mutex("a").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ForceRelease(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		var lostErr *leash.LostError
		if err := h.Unlock(ctx); !errors.As(err, &lostErr) {
			t.Fatalf("Unlock of a force-unlocked lock = %v; want a *LostError", err)
		}
		lost, released := rec.take(leash.OpLost), rec.take(leash.OpReleased)
		if len(lost) != 1 || lost[0].Reason != leash.ReasonReleasedElsewhere || len(released) != 0 {
			t.Errorf("lost %+v, released %+v; want one loss, released elsewhere, and no release", lost, released)
		}
	})
}

// TestObserverFailedRenewal checks that a round with a failing store reports
// the failures, while the lock survives them.
func TestObserverFailedRenewal(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c, rec := observedClient(t, s, time.Second)
		defer c.Close()
		h, err := c.Mutex("a").Lock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Unlock(context.Background())
		s.setRenewErr(errors.New("store down"))
		time.Sleep(400 * time.Millisecond)
		s.setRenewErr(nil)
		var failed []leash.Event
		for _, e := range rec.take(leash.OpRenewed) {
			if e.Failed > 0 {
				failed = append(failed, e)
			}
		}
		if len(failed) == 0 || failed[0].Locks != 1 || failed[0].Err == nil {
			t.Errorf("renewal rounds with failures: %+v; want rounds of one lock, failed, with the error", failed)
		}
	})
}

func TestOpString(t *testing.T) {
	for op, want := range map[leash.Op]string{leash.OpAcquired: "acquired", leash.OpLost: "lost", leash.Op(99): "Op(99)"} {
		if got := op.String(); got != want {
			t.Errorf("Op(%d).String() = %q, want %q", op, got, want)
		}
	}
}
