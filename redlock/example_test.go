package redlock_test

import (
	"context"
	"fmt"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/redlock"
)

// A quorum over three members. In production each member is a store on an
// independent server, such as redisstore.New(redis.NewClient(...), nil).
func Example() {
	q, err := redlock.New([]driver.Store{memstore.New(), memstore.New(), memstore.New()}, nil)
	if err != nil {
		panic(err)
	}
	c, err := leash.New(q, nil)
	if err != nil {
		panic(err)
	}
	defer c.Close() // closes q and its members

	ctx := context.Background()
	hold, err := c.Mutex("billing/nightly").Lock(ctx)
	if err != nil {
		panic(err)
	}
	defer hold.Unlock(ctx)
	fmt.Printf("held by a majority: %d of %d members\n", q.Quorum(), q.Members())
	// Output: held by a majority: 2 of 3 members
}

// Bad member lists are refused before any round trip.
func ExampleNew() {
	m := memstore.New()
	_, err := redlock.New([]driver.Store{m, memstore.New(), m}, nil)
	fmt.Println(err)
	// Output: leash: invalid argument: redlock: members 0 and 2 are the same store (memstore): a quorum needs independent members
}
