package leash_test

import (
	"context"
	"errors"
	"fmt"
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

	select {
	case <-hold.Lost():
	case <-time.After(time.Second):
		fmt.Println("still held?")
	}
	var lost *leash.LostError
	if errors.As(hold.Err(), &lost) {
		fmt.Println("lost:", lost.Reason)
	}
	fmt.Println("context cancelled:", hold.Context().Err() != nil)
	// Output:
	// lost: expired
	// context cancelled: true
}
