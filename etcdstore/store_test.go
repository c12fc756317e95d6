package etcdstore_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/leash-go/leash"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/etcdstore"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/storetest"
)

func TestConformance(t *testing.T) {
	s := etcdstore.New(sharedCli(t), nil)
	storetest.Run(t, func(t *testing.T) driver.Store { return s })
}

// TestOpen opens the shared server by URL, with a prefix, and takes and
// releases a lock through a leash Client on it.
func TestOpen(t *testing.T) {
	srv := shared.Etcd(t)
	prefix := "open/" + t.Name() + "/"
	s, err := driver.Open(bg(t), "etcd://"+srv.Addr()+"?prefix="+url.QueryEscape(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.(interface{ Prefix() string }).Prefix(); got != prefix {
		t.Errorf("Prefix() = %q, want %q", got, prefix)
	}
	if err := s.(interface{ Ping(context.Context) error }).Ping(bg(t)); err != nil {
		t.Errorf("Ping: %v", err)
	}
	c, err := leash.New(s, nil)
	c = testkit.Closing(t, c, err)
	h, err := c.Mutex(lockName(t)).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after the Client's: %v", err)
	}
}
