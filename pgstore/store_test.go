package pgstore_test

import (
	"testing"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/pgstore"
	"github.com/leash-go/leash/storetest"
)

func TestConformance(t *testing.T) {
	s := newStore(t, nil)
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}

// TestConformanceSmallBatches runs the suite with renewal batches of 7
// locks, so that a renewal spans many statements.
func TestConformanceSmallBatches(t *testing.T) {
	s := newStore(t, &pgstore.Options{BatchSize: 7, Schema: "leash_small"})
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}
