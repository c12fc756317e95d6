package etcdstore_test

import (
	"testing"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/etcdstore"
	"github.com/leash-go/leash/storetest"
)

func TestConformance(t *testing.T) {
	s := etcdstore.New(sharedCli(t), nil)
	storetest.Run(t, func(t *testing.T) driver.Store { return s })
}
