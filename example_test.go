package leash_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/memstore"
)

// Take a lock, do the work under the hold's context, and release it. With
// Redis, pass redisstore.New(rdb, nil) instead of memstore.New().
func Example() {
	c, err := leash.New(memstore.New(), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	hold, err := c.Mutex("orders:42").Lock(ctx)
	if err != nil {
		panic(err)
	}
	defer hold.Unlock(ctx)

	// Check right before the protected write, and give the resource the
	// fencing token so that it can reject a stale holder.
	if err := hold.Err(); err != nil {
		panic(err)
	}
	fmt.Println("holding orders:42 with fence", hold.Fence())
	// Output: holding orders:42 with fence 1
}

// Code that holds a lock may call code that takes the same lock, by passing
// the hold's context: the inner Lock re-enters at once.
func ExampleClient_Mutex() {
	c, _ := leash.New(memstore.New(), nil)
	defer c.Close()
	ctx := context.Background()
	m := c.Mutex("inventory:sku-9")

	outer, _ := m.Lock(ctx)
	inner, _ := m.Lock(outer.Context()) // re-entry: same tenure, same token
	fmt.Println("same fence:", inner.Fence() == outer.Fence())

	// Any other context waits like another client would.
	_, err := m.TryLock(ctx)
	fmt.Println("other context:", errors.Is(err, leash.ErrNotAcquired))

	_ = inner.Unlock(ctx) // still held by outer
	_, err = m.TryLock(ctx)
	fmt.Println("after inner unlock:", errors.Is(err, leash.ErrNotAcquired))

	_ = outer.Unlock(ctx) // the last unlock releases it
	h, err := m.TryLock(ctx)
	fmt.Println("after outer unlock:", err == nil)
	_ = h.Unlock(ctx)
	// Output:
	// same fence: true
	// other context: true
	// after inner unlock: true
	// after outer unlock: true
}

// A holder learns that its lock is gone through Lost, Context and Err, with
// the reason. Here a fixed 100ms lease runs out while the work goes on.
func ExampleHold_Lost() {
	c, _ := leash.New(memstore.New(), nil)
	defer c.Close()
	ctx := context.Background()

	m := c.Mutex("nightly-report", &leash.LockOptions{Lease: 100 * time.Millisecond, RenewInterval: leash.NoRenewal})
	hold, _ := m.Lock(ctx)
	defer hold.Unlock(ctx)

	<-hold.Lost() // closes when the lease runs out, however busy the machine
	var lost *leash.LostError
	if errors.As(hold.Err(), &lost) {
		fmt.Println("lost:", lost.Reason)
	}
	fmt.Println("context cancelled:", hold.Context().Err() != nil)
	// Output:
	// lost: expired
	// context cancelled: true
}

// A FairMutex serves waiters in arrival order and wakes only the next one.
func ExampleClient_FairMutex() {
	c, _ := leash.New(memstore.New(), nil)
	defer c.Close()
	ctx := context.Background()
	m := c.FairMutex("settlement", nil) // nil: a waiter's place lasts DefaultQueueLease unrenewed

	first, _ := m.Lock(ctx)
	done := make(chan string, 3)
	for _, who := range []string{"a", "b", "c"} {
		go func() {
			h, err := m.Lock(ctx)
			if err != nil {
				panic(err)
			}
			done <- who
			_ = h.Unlock(ctx)
		}()
		for { // let each waiter take its place before the next arrives
			if info, _ := c.Inspect(ctx, "settlement"); info.Queued == len(who)+int(who[0]-'a') {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	_ = first.Unlock(ctx)
	fmt.Println(<-done, <-done, <-done)
	// Output: a b c
}

// An RWMutex admits many readers or one writer; a writer can downgrade.
func ExampleClient_RWMutex() {
	c, _ := leash.New(memstore.New(), nil)
	defer c.Close()
	ctx := context.Background()
	rw := c.RWMutex("catalog", nil)

	r1, _ := rw.RLock(ctx)
	r2, _ := rw.RLock(ctx)
	_, err := rw.TryLock(ctx)
	fmt.Println("writer while reading:", errors.Is(err, leash.ErrNotAcquired))
	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)

	w, _ := rw.Lock(ctx)
	r, _ := rw.RLock(w.Context()) // downgrade: the writer also takes a read lease
	_ = w.Unlock(ctx)             // now only a reader
	_, err = rw.Lock(r.Context()) // an upgrade would wait for itself
	fmt.Println("upgrade refused:", errors.Is(err, leash.ErrUpgrade))
	_ = r.Unlock(ctx)
	// Output:
	// writer while reading: true
	// upgrade refused: true
}

// A Semaphore bounds how many holders work at once; each permit is a lease.
func ExampleClient_Semaphore() {
	c, _ := leash.New(memstore.New(), nil)
	defer c.Close()
	ctx := context.Background()
	sem := c.Semaphore("exports", 2) // 2 permits, unless the server already has a count

	a, _ := sem.Acquire(ctx)
	b, _ := sem.Acquire(ctx)
	_, err := sem.TryAcquire(ctx)
	fmt.Println("third permit:", errors.Is(err, leash.ErrNotAcquired))

	_ = sem.SetPermits(ctx, 3) // for every client
	third, err := sem.TryAcquire(ctx)
	fmt.Println("after SetPermits(3):", err == nil)
	for _, h := range []*leash.Hold{a, b, third} {
		_ = h.Unlock(ctx)
	}
	// Output:
	// third permit: true
	// after SetPermits(3): true
}

// A MultiLock takes several locks all or nothing, with a token per name.
func ExampleClient_MultiLock() {
	c, _ := leash.New(memstore.New(), nil)
	defer c.Close()
	ctx := context.Background()

	other, _ := c.Mutex("account:B").Lock(ctx)
	transfer := c.MultiLock([]string{"account:A", "account:B"})
	_, err := transfer.TryLock(ctx)
	fmt.Println("while B is held:", errors.Is(err, leash.ErrNotAcquired))
	info, _ := c.Inspect(ctx, "account:A") // nothing was taken
	fmt.Println("A is held:", info.Held)
	_ = other.Unlock(ctx)

	h, _ := transfer.Lock(ctx)
	fmt.Println("holds", h.Names(), h.FenceOf("account:A") > 0)
	_ = h.Unlock(ctx)
	// Output:
	// while B is held: true
	// A is held: false
	// holds [account:A account:B] true
}

// An Observer sees every lock event, for metrics (the prom module keeps
// Prometheus ones); ObserverFunc adapts a function. Events come from several
// goroutines (losses and renewal rounds from the watchdog's), so an observer
// must be safe for concurrent use.
func ExampleObserverFunc() {
	var held atomic.Int64
	count := leash.ObserverFunc(func(e leash.Event) {
		switch e.Op {
		case leash.OpAcquired:
			held.Add(1)
		case leash.OpReleased, leash.OpLost:
			held.Add(-1)
		}
	})
	c, err := leash.New(memstore.New(), &leash.Options{Observer: count})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	h, err := c.Mutex("nightly-report").Lock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("locks held:", held.Load())
	if err := h.Unlock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("locks held:", held.Load())
	// Output:
	// locks held: 1
	// locks held: 0
}
