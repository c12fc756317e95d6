package mysqlstore_test

import (
	"testing"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/mysqlstore"
	"github.com/leash-go/leash/storetest"
)

// TestConformance runs the suite through a DSN whose session time zone is
// +11:30 and whose driver parses times in New York's: leases must not move.
func TestConformance(t *testing.T) {
	s := newStore(t, oddZone, nil)
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}

// TestConformanceSmallBatches runs the suite with renewal batches of 7 locks
// in a table of another name, in a database named in Options.
func TestConformanceSmallBatches(t *testing.T) {
	s := newStore(t, "", &mysqlstore.Options{BatchSize: 7, Database: testDB, Table: "my `odd` locks"})
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}
