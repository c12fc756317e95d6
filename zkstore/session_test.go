package zkstore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
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

// TestKeepAliveDisconnected: while the Store is not connected, a keep-alive
// fails at once with an error of unknown outcome, not ErrNotHeld.
func TestKeepAliveDisconnected(t *testing.T) {
	port, err := testserver.FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	s := dial(t, nil, fmt.Sprintf("127.0.0.1:%d", port))
	err = s.KeepAlive(bg(t), "00000000-0000-4000-8000-00000000dead")
	if err == nil || errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("KeepAlive while disconnected = %v, want an error of unknown outcome", err)
	}
}

// TestValidate: a Store on a connection of one's own needs the session
// timeout it negotiated, and a root it can use.
func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		s    *zkstore.Store
		want bool
	}{
		"a nil connection":   {zkstore.New(nil, &zkstore.Options{SessionTimeout: 1e9}), false},
		"no session timeout": {zkstore.New(sharedStore(t).Conn(), nil), false},
		"root /":             {zkstore.New(sharedStore(t).Conn(), &zkstore.Options{SessionTimeout: 1e9, Root: "/"}), false},
		"a relative root":    {zkstore.New(sharedStore(t).Conn(), &zkstore.Options{SessionTimeout: 1e9, Root: "leash"}), false},
		"all given":          {zkstore.New(sharedStore(t).Conn(), &zkstore.Options{SessionTimeout: 1e9}), true},
	} {
		if err := tc.s.Validate(); (err == nil) != tc.want {
			t.Errorf("%s: Validate() = %v, want ok %v", name, err, tc.want)
		}
	}
}
