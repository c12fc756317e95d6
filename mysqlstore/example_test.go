package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/go-sql-driver/mysql"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/mysqlstore"
)

// Example takes a lock on a MariaDB that it starts for itself (as the tests
// do; in production, open your own database): migrate the schema, put a
// leash Client on the store, lock, unlock.
func Example() {
	srv, err := testserver.StartMariaDB("")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	ctx := context.Background()
	root, err := sql.Open("mysql", srv.DSN("", ""))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer root.Close()
	if _, err := root.ExecContext(ctx, "CREATE DATABASE app"); err != nil {
		fmt.Println(err)
		return
	}

	db, err := sql.Open("mysql", srv.DSN("app", "")) // "user:password@tcp(host:3306)/app"
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	s := mysqlstore.New(db, nil)
	if err := s.Migrate(ctx); err != nil { // creates the tables and procedures once
		fmt.Println(err)
		return
	}
	c, err := leash.New(s, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	hold, err := c.Mutex("billing/nightly").Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held, fencing token above zero:", hold.Fence() > 0)
	if err := hold.Unlock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("released")
	// Output:
	// held, fencing token above zero: true
	// released
}
