package memstore_test

import (
	"testing"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/storetest"
)

func TestConformance(t *testing.T) {
	s := memstore.New()
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}
