package etcdstore_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/etcdstore"
	"github.com/leash-go/leash/internal/leakcheck"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close()
	os.Exit(leakcheck.Check(code))
}

// shared is the package's lazily started etcd for tests that do not inject
// faults into the server itself.
var shared testserver.SharedEtcd

// newCli returns an etcd client for endpoints, closed at cleanup.
func newCli(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3.New(%v): %v", endpoints, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// sharedCli returns a client of the shared server.
func sharedCli(t testing.TB) *clientv3.Client {
	t.Helper()
	return newCli(t, shared.Etcd(t).Endpoint)
}

// newClient returns a leash Client on a Store of cli, closed at cleanup.
func newClient(t *testing.T, cli *clientv3.Client, opts *leash.Options) *leash.Client {
	t.Helper()
	c, err := leash.New(etcdstore.New(cli, nil), opts)
	return testkit.Closing(t, c, err)
}

func lockName(t *testing.T) string { return "test/" + t.Name() }

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
