package leash_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
)

// TestMutexStarvingWaiterGoesFirst: a waiter that starves marks the name,
// and a later waiter (one that never starves itself) is not granted before
// it, although both wait when the holder releases.
func TestMutexStarvingWaiterGoesFirst(t *testing.T) {
	s := memstore.New()
	ctx := context.Background()
	var (
		mu      sync.Mutex
		order   []string
		starved = make(chan struct{}, 1)
	)
	observe := func(who string) leash.Observer {
		return leash.ObserverFunc(func(e leash.Event) {
			switch e.Op {
			case leash.OpStarving:
				select {
				case starved <- struct{}{}:
				default:
				}
			case leash.OpAcquired:
				mu.Lock()
				order = append(order, who)
				mu.Unlock()
			}
		})
	}
	a := newClient(t, s, nil)
	defer a.Close()
	b := newClient(t, s, &leash.Options{Observer: observe("starving")})
	defer b.Close()
	c := newClient(t, s, &leash.Options{Observer: observe("later"), Starvation: leash.NoStarvation})
	defer c.Close()
	const name = "starve/first"
	ha := mustLock(t, a.Mutex(name), ctx)
	gb := lockAsync(t, b.Mutex(name), ctx)
	select {
	case <-starved:
	case <-time.After(30 * time.Second): // a hang guard, not a timing
		t.Fatal("the waiting Lock never reported starving")
	}
	if info, err := a.Inspect(ctx, name); err != nil || info.Queued != 1 {
		t.Fatalf("Inspect after OpStarving = %+v, %v; want the waiter's mark queued", info, err)
	}
	if _, err := c.Mutex(name).TryLock(ctx); err == nil {
		t.Fatal("TryLock was granted a held lock")
	}
	gc := grantedAt(t, c.Mutex(name), ctx)
	mustUnlock(t, ha)
	hb := <-gb
	if hb == nil {
		t.FailNow()
	}
	mustUnlock(t, hb)
	<-gc
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "starving" {
		t.Errorf("grants in order %v, want the starving waiter first", order)
	}
	if info, err := a.Inspect(ctx, name); err != nil || info.Queued != 0 {
		t.Errorf("Inspect at the end = %+v, %v; want nothing queued", info, err)
	}
}

// TestMutexTryLockBehindMark: on a free lock with a starving waiter's mark
// queued, TryLock is refused at once (it never waits), with the mark's
// remaining life as Remaining.
func TestMutexTryLockBehindMark(t *testing.T) {
	s := memstore.New()
	ctx := context.Background()
	c := newClient(t, s, nil)
	defer c.Close()
	const name = "starve/trylock"
	// A holder, and a starving waiter that died after marking: its mark
	// outlives it and the holder's release.
	holder := driver.Request{Kind: driver.KindMutex, Name: name, Owner: "holder:1", Lease: time.Minute}
	dead := driver.Request{Kind: driver.KindMutex, Name: name, Owner: "dead:1", Lease: time.Minute, Wait: leash.DefaultQueueLease}
	if g, err := s.Acquire(ctx, holder); err != nil || !g.Acquired {
		t.Fatalf("holder: %+v, %v", g, err)
	}
	if g, err := s.Acquire(ctx, dead); err != nil || g.Acquired {
		t.Fatalf("the starving waiter's mark: %+v, %v; want not granted", g, err)
	}
	if err := s.Release(ctx, holder); err != nil {
		t.Fatal(err)
	}
	_, err := c.Mutex(name).TryLock(ctx)
	var na *leash.NotAcquiredError
	if !errors.As(err, &na) || na.Remaining <= 0 || na.Remaining > leash.DefaultQueueLease {
		t.Fatalf("TryLock behind a mark = %v, want ErrNotAcquired with the mark's remaining life", err)
	}
}

// waitRecorder records the place lifetime (Wait) of every acquire: a
// Mutex's request with Wait > 0 is a starving waiter's, which marks the
// name.
type waitRecorder struct {
	*faultStore
	mu    sync.Mutex
	waits []time.Duration
}

func (r *waitRecorder) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	r.mu.Lock()
	r.waits = append(r.waits, req.Wait)
	r.mu.Unlock()
	return r.faultStore.Acquire(ctx, req)
}

// since returns the waits recorded after the first n.
func (r *waitRecorder) since(n int) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.waits[n:])
}

// TestMutexLingeringStarvation: a Client that started starving on a name
// less than WatchLinger ago marks the name on its next Lock's first
// attempt, which is then its only attempt before it waits; a second later
// (Locks granted at once in between do not count as starving), and once the
// watches ended, a Lock tries to barge in first again, as a Mutex does. The
// release wakes the waiter every time, not its fallback timer.
func TestMutexLingeringStarvation(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := &waitRecorder{faultStore: newFaultStore(t)}
		var starving atomic.Int64 // the waiter's OpStarving events
		holder := newClient(t, s, nil)
		waiter := newClient(t, s, &leash.Options{Observer: leash.ObserverFunc(func(e leash.Event) {
			if e.Op == leash.OpStarving {
				starving.Add(1)
			}
		})})
		defer holder.Close()
		defer waiter.Close()
		ctx := context.Background()
		const name = "starve/linger"
		// round has the holder take the lock and the waiter wait for it
		// past its starvation; it returns the waiter's attempts before it
		// waited (their place lifetimes), once the waiter had the lock and
		// gave it back.
		round := func() []time.Duration {
			h := mustLock(t, holder.Mutex(name), ctx)
			before := len(s.since(0))
			got := lockAsync(t, waiter.Mutex(name), ctx)
			time.Sleep(10 * time.Millisecond) // starved by now (leash.DefaultStarvation is 1 ms)
			synctest.Wait()
			attempts := s.since(before)
			handOver(t, h, got)
			return attempts
		}
		plainThenMark := func(got []time.Duration) bool {
			return len(got) >= 3 && got[0] == 0 && got[1] == 0 && got[len(got)-1] != 0
		}
		if got := round(); !plainThenMark(got) {
			t.Errorf("a first wait's attempts had places %v, want plain attempts (before and after subscribing, and until it starved), then the mark", got)
		}
		if got := round(); len(got) != 1 || got[0] == 0 {
			t.Errorf("a wait while the watches linger: attempts with places %v, want one, marking the name", got)
		}
		if n := starving.Load(); n != 2 {
			t.Errorf("%d OpStarving after two starving waits, want 2", n)
		}
		// Locks granted at once do not keep the name hot: after a second of
		// them, a contended Lock tries to barge in first again.
		for range 4 {
			time.Sleep(leash.WatchLinger / 3)
			before := len(s.since(0))
			mustUnlock(t, mustLock(t, waiter.Mutex(name), ctx))
			if got := s.since(before); len(got) != 1 {
				t.Fatalf("an uncontended Lock made attempts with places %v, want one", got)
			}
		}
		if n := starving.Load(); n != 2 {
			t.Errorf("%d OpStarving after Locks granted at once, want still 2: they never waited", n)
		}
		synctest.Wait()
		if got := round(); !plainThenMark(got) {
			t.Errorf("a wait a second after the last starving one: attempts with places %v, want plain attempts first again, then the mark", got)
		}
		// And once every watch ended, the same.
		time.Sleep(leash.WatchLinger)
		synctest.Wait()
		if got := round(); !plainThenMark(got) {
			t.Errorf("a wait after the watches ended: attempts with places %v, want plain attempts first again, then the mark", got)
		}
	})
}
