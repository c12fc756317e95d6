package zkstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/zkstore"
)

// Example takes a lock on a ZooKeeper ensemble: the Client's watchdog keeps
// it alive with one keep-alive of its session per renewal round, and the
// hold's context ends if it is lost.
func Example() {
	s, err := zkstore.Dial([]string{"127.0.0.1:2181"}, &zkstore.Options{SessionTimeout: 40 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close() // after the Client's Close: ends every session
	c, err := leash.New(s, &leash.Options{Lease: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := c.Mutex("billing/nightly").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Unlock(ctx)
	// Work under h.Context(): it is cancelled the moment the lock is lost.
	// The fencing token is the grant's zxid.
	fmt.Println("holding", h.Name(), "with token", h.Fence(), "until", h.ValidUntil())
}
