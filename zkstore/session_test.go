package zkstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/faultproxy"
	"github.com/leash-go/leash/zkstore"
)

// TestKeepAliveUnknownClient: a client that holds nothing here has no
// session to keep alive.
func TestKeepAliveUnknownClient(t *testing.T) {
	s := sharedStore(t)
	if _, err := s.List(bg(t), "none"); err != nil { // connected
		t.Fatal(err)
	}
	if err := s.KeepAlive(bg(t), "00000000-0000-4000-8000-00000000dead"); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("KeepAlive of a client that never held a lock = %v, want ErrNotHeld", err)
	}
}

// TestKeepAliveDisconnected: while a client's session cannot reach the
// server, a keep-alive fails with an error of unknown outcome, not
// ErrNotHeld.
func TestKeepAliveDisconnected(t *testing.T) {
	z := shared.ZooKeeper(t)
	p, err := faultproxy.New(z.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	const lease = 10 * time.Second
	s := dial(t, &zkstore.Options{SessionTimeout: 2 * lease}, p.Addr)
	owner := "00000000-0000-4000-8000-0000000000cc:1"
	g, err := s.Acquire(bg(t), driver.Request{Name: "test/" + t.Name(), Owner: owner, Lease: lease})
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	p.Blackhole()
	ctx, cancel := context.WithTimeout(bg(t), time.Second)
	defer cancel()
	err = s.KeepAlive(ctx, driver.OwnerClient(owner))
	if err == nil || errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("KeepAlive while cut off = %v, want an error of unknown outcome", err)
	}
	p.Heal()
}

// TestValidate: a Store on a connection of one's own needs the servers to
// open its Clients' sessions on, and a root it can use.
func TestValidate(t *testing.T) {
	servers := []string{shared.ZooKeeper(t).Addr}
	for name, tc := range map[string]struct {
		s    *zkstore.Store
		want bool
	}{
		"a nil connection": {zkstore.New(nil, &zkstore.Options{Servers: servers}), false},
		"no servers":       {zkstore.New(sharedStore(t).Conn(), nil), false},
		"root /":           {zkstore.New(sharedStore(t).Conn(), &zkstore.Options{Servers: servers, Root: "/"}), false},
		"a relative root":  {zkstore.New(sharedStore(t).Conn(), &zkstore.Options{Servers: servers, Root: "leash"}), false},
		"all given":        {zkstore.New(sharedStore(t).Conn(), &zkstore.Options{Servers: servers}), true},
		"a negative tick":  {zkstore.New(sharedStore(t).Conn(), &zkstore.Options{Servers: servers, TickTime: -time.Second}), false},
	} {
		if err := tc.s.Validate(); (err == nil) != tc.want {
			t.Errorf("%s: Validate() = %v, want ok %v", name, err, tc.want)
		}
	}
}
