package etcdstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/etcdstore"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Example takes a lock on an etcd cluster, does work under it while the
// Client's watchdog keeps the client's etcd lease alive, and releases it.
// (It needs a running etcd, so it is compiled but not run by go test.)
func Example() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close() // the Store never closes the client it was given

	c, err := leash.New(etcdstore.New(cli, &etcdstore.Options{Prefix: "myapp/locks/"}), &leash.Options{Lease: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	hold, err := c.Mutex("billing/nightly").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer hold.Unlock(ctx)
	// The token is the lock key's create revision: pass it to whatever the
	// work writes, which refuses a token lower than one it has seen.
	fmt.Println("fencing token", hold.Fence())
	select {
	case <-hold.Lost(): // the lease ended, the lock was forced free, or etcd was unreachable too long
		log.Print(hold.Err())
	case <-time.After(time.Second): // the work
	}
}
