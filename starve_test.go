package leash_test

import (
	"context"
	"errors"
	"sync"
	"testing"
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
