package zkstore_test

import (
	"os"
	"testing"

	"github.com/leash-go/leash/internal/leakcheck"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/zkstore"
)

func TestMain(m *testing.M) {
	if os.Getenv(holderEnv) != "" {
		runHolder() // a child process of TestFrozenHolder
		return
	}
	code := m.Run()
	shared.Close()
	os.Exit(leakcheck.Check(code))
}

// shared is the package's lazily started ZooKeeper server for tests that do
// not inject faults into the server itself.
var shared testserver.SharedZooKeeper

// dial returns a Store on addrs with opts, closed at cleanup. Its TickTime
// is the test servers' unless opts says otherwise.
func dial(t *testing.T, opts *zkstore.Options, addrs ...string) *zkstore.Store {
	t.Helper()
	o := zkstore.Options{TickTime: testserver.ZooKeeperTick}
	if opts != nil {
		o = *opts
		if o.TickTime == 0 {
			o.TickTime = testserver.ZooKeeperTick
		}
	}
	s, err := zkstore.Dial(addrs, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// sharedStore returns a Store on the shared server, closed at cleanup.
func sharedStore(t *testing.T) *zkstore.Store {
	t.Helper()
	return dial(t, nil, shared.ZooKeeper(t).Addr)
}
