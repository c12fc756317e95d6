package etcdstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
)

// TestAuthURL turns on etcd's authentication on a server of its own and
// opens it by URL with a user and password: the right password takes and
// releases a lock; a wrong one fails to open, not as a bad URL, and no
// error shows either password.
func TestAuthURL(t *testing.T) {
	srv := testserver.NewEtcd(t, testserver.EtcdOptions{})
	ctx := bg(t)
	const password = "s3cret/Pass"
	admin := newCli(t, srv.Endpoint)
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", password); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	url := "etcd://root:" + strings.ReplaceAll(password, "/", "%2F") + "@" + srv.Addr()
	s, err := driver.Open(ctx, url)
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	c, err := leash.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := c.Mutex(lockName(t)).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock with etcd auth: %v", err)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	const wrong = "wr0ng-Pa55"
	s2, err := driver.Open(ctx, "etcd://root:"+wrong+"@"+srv.Addr())
	if err == nil {
		err = s2.(interface{ Ping(context.Context) error }).Ping(ctx)
		s2.Close()
	}
	switch {
	case err == nil:
		t.Fatal("a wrong password opened the store and answered")
	case errors.Is(err, driver.ErrBadURL):
		t.Errorf("wrong password = %v: a bad URL, want a refusal by the server", err)
	case strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), password):
		t.Errorf("wrong password = %v: shows a password", err)
	}
	t.Logf("wrong password: %v", err)
}
