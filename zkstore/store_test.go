package zkstore_test

import (
	"testing"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/storetest"
)

func TestConformance(t *testing.T) {
	s := sharedStore(t)
	storetest.Run(t, func(t *testing.T) driver.Store { return s })
}
