package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/pgstore"
)

// Example takes a lock on a PostgreSQL server that it starts itself (in
// your code, the pool is your application's): Migrate creates the store's
// tables, a second client is refused the lock while the first holds it, and
// gets it, with a greater fencing token, once the first unlocks. It needs
// PostgreSQL's server binaries (scripts/test.sh installs them).
func Example() {
	srv, err := testserver.StartPostgres(testserver.PostgresOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()

	pool, err := pgxpool.New(ctx, srv.URL()) // "postgres://user:password@host:5432/db"
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store := pgstore.New(pool, nil) // tables public.leash_locks…
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err) // or have a DBA run pgstore.DDL's statements
	}
	c, err := leash.New(store, &leash.Options{Lease: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // closes the store's listening connection, not the pool

	hold, err := c.Mutex("billing/nightly").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked, fencing token above zero:", hold.Fence() > 0)

	other, err := leash.New(pgstore.New(pool, nil), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Mutex("billing/nightly").TryLock(ctx); errors.Is(err, leash.ErrNotAcquired) {
		fmt.Println("the other client is refused while it is held")
	}
	if err := hold.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	next, err := other.Mutex("billing/nightly").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer next.Unlock(ctx)
	fmt.Println("the next holder's token is greater:", next.Fence() > hold.Fence())
	// Output:
	// locked, fencing token above zero: true
	// the other client is refused while it is held
	// the next holder's token is greater: true
}
