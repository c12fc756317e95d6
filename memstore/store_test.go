package memstore_test

import (
	"testing"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/storetest"
)

func TestConformance(t *testing.T) {
	s := memstore.New()
	storetest.Run(t, func(*testing.T) leash.Store { return s })
}
