package redlock_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/redlock"
)

func mutexReq(name, owner string) driver.Request {
	return driver.Request{Kind: driver.KindMutex, Name: name, Owner: owner, Lease: 30 * time.Second}
}

// One release notifies on every member that held the lock; a waiter is
// woken once for it, not once per member, and no release goes unheard.
// The control watches each member itself: three notifications for the
// same release.
func TestOneWakePerRelease(t *testing.T) {
	ctx := t.Context()
	stores := memstores(3)
	q, err := redlock.New(stores, nil)
	if err != nil {
		t.Fatal(err)
	}
	held := redlock.HoldWakes(q)
	var wakes, direct atomic.Int32
	stop, err := q.Watch(ctx, driver.KindMutex, "x", func(driver.Wake) { wakes.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, m := range stores {
		stop, err := m.(driver.Watcher).Watch(ctx, driver.KindMutex, "x", func(driver.Wake) { direct.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	for round := 1; round <= 2; round++ {
		r := mutexReq("x", "owner:1")
		if g, err := q.Acquire(ctx, r); err != nil || !g.Acquired {
			t.Fatalf("Acquire = %+v, %v", g, err)
		}
		if err := q.Release(ctx, r); err != nil {
			t.Fatal(err)
		}
		// memstore notifies within Release: every member has notified.
		if got := direct.Load(); got != int32(3*round) {
			t.Fatalf("control: the members sent %d notifications after %d releases, want %d", got, round, 3*round)
		}
		fs := held()
		if len(fs) != round {
			t.Fatalf("after %d releases, %d wake-ups are on their way; want %d", round, len(fs), round)
		}
		if got := wakes.Load(); got != int32(round-1) {
			t.Fatalf("the waiter was woken %d times before the wake-up was passed on, want %d", got, round-1)
		}
		fs[round-1]()
		if got := wakes.Load(); got != int32(round) {
			t.Fatalf("the waiter was woken %d times after %d releases, want %d", got, round, round)
		}
	}
}

// A name refused lately is asked of its leader alone first; a leader that
// failed is passed over for the next member, so that it costs no member
// timeout per acquire.
func TestHotNameAsksLeaderFirst(t *testing.T) {
	ctx := t.Context()
	stores := memstores(3)
	holder, err := redlock.New(stores, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := holder.Acquire(ctx, mutexReq("x", "holder:1")); err != nil || !g.Acquired {
		t.Fatalf("holder's Acquire = %+v, %v", g, err)
	}
	vs := views(stores, 0)
	q := quorum(t, vs, nil)
	redlock.KeepHot(q, time.Hour) // however slow the test runs
	counts := func() [3]int64 {
		return [3]int64{vs[0].acquires.Load(), vs[1].acquires.Load(), vs[2].acquires.Load()}
	}
	refused := func(what string) {
		t.Helper()
		if g, err := q.Acquire(ctx, mutexReq("x", "waiter:1")); err != nil || g.Acquired {
			t.Fatalf("%s: Acquire while held = %+v, %v; want refused", what, g, err)
		}
	}
	refused("first")
	if got := counts(); got != [3]int64{1, 1, 1} {
		t.Fatalf("the first acquire asked the members %v times, want each once", got)
	}
	l := redlock.Leader(q, "x")
	if g, err := q.Acquire(ctx, mutexReq("x", "waiter:1")); err != nil || g.Acquired || g.Remaining > time.Second {
		t.Fatalf("hot: Acquire refused by the leader alone = %+v, %v; want refused, to look again within a second", g, err)
	}
	want := [3]int64{1, 1, 1}
	want[l]++
	if got := counts(); got != want {
		t.Fatalf("an acquire of the hot name asked the members %v times in all, want %v (member %d alone)", got, want, l)
	}
	// The leader cut off: the attempt goes on to the others, and the next
	// one starts with the member after the leader.
	vs[l].down.Store(true)
	refused("leader cut off")
	next := redlock.Leader(q, "x")
	if next == l || next < 0 {
		t.Fatalf("leader after member %d failed = %d, want another", l, next)
	}
	before := counts()
	refused("leader passed over")
	want = before
	want[next]++
	if got := counts(); got != want {
		t.Fatalf("the acquire after the leader failed asked the members %v times in all, want %v (member %d alone)", got, want, next)
	}
	// Freed, the hot name is granted by its leader and then the others.
	vs[l].down.Store(false)
	if err := holder.Release(ctx, mutexReq("x", "holder:1")); err != nil {
		t.Fatal(err)
	}
	if g, err := q.Acquire(ctx, mutexReq("x", "waiter:1")); err != nil || !g.Acquired {
		t.Fatalf("Acquire once freed = %+v, %v; want granted", g, err)
	}
}

// A contender that crashed after its hot name's leader granted it, before
// it gave that partial grant back, leaves the leader held for a lease. The
// waiters the leader refuses alone look at every member within about a
// second, and are granted by the others while the stale grant stands.
func TestHotNameStaleGrantOnLeader(t *testing.T) {
	ctx := t.Context()
	stores := memstores(3)
	other, err := redlock.New(stores, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := redlock.New(stores, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, q, nil)
	holder := mutexReq("x", "holder:1")
	if g, err := other.Acquire(ctx, holder); err != nil || !g.Acquired {
		t.Fatalf("holder's Acquire = %+v, %v", g, err)
	}
	if h, err := c.Mutex("x").TryLock(ctx); !errors.Is(err, leash.ErrNotAcquired) {
		t.Fatalf("TryLock while held = %v, %v; want ErrNotAcquired", h, err)
	}
	if err := other.Release(ctx, holder); err != nil {
		t.Fatal(err)
	}
	l := redlock.Leader(q, "x")
	stale := mutexReq("x", "crashed:1")
	if g, err := stores[l].Acquire(ctx, stale); err != nil || !g.Acquired {
		t.Fatalf("the crashed contender's grant on member %d = %+v, %v", l, g, err)
	}
	h, err := c.Mutex("x").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock with a stale grant on the leader: %v", err)
	}
	defer h.Unlock(ctx)
	info, err := stores[l].(*memstore.Store).Inspect(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Owners) != 1 || info.Owners[0].Owner != stale.Owner {
		t.Fatalf("member %d's holders when the waiter was granted = %+v, want the stale grant: the waiter must not have waited for its lease", l, info.Owners)
	}
}
