package etcdstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/etcdstore"
	"github.com/leash-go/leash/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestLeaseRevoked revokes the etcd lease a Client's locks are attached to,
// as an operator may (etcdctl lease revoke): the next renewal tells every
// hold on it that it lost its lock, and the names are free.
func TestLeaseRevoked(t *testing.T) {
	cli := sharedCli(t)
	ctx := bg(t)
	c := newClient(t, cli, &leash.Options{Lease: 10 * time.Second})
	var holds []*leash.Hold
	for _, n := range []string{"a", "b", "c"} {
		h, err := c.Mutex(lockName(t) + "/" + n).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
	}
	resp, err := cli.Get(ctx, etcdstore.DefaultPrefix+"lock/"+holds[0].Name())
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("the lock key = %v, %v; want one key on a lease", resp, err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	if err := holds[0].Renew(ctx); !errors.Is(err, leash.ErrLost) {
		t.Fatalf("Renew after the lease was revoked = %v, want ErrLost", err)
	}
	for _, h := range holds {
		select {
		case <-h.Lost():
		case <-ctx.Done():
			t.Fatalf("hold %q not told it lost its lock", h.Name())
		}
	}
	c2 := newClient(t, cli, nil)
	for _, h := range holds {
		h2, err := c2.Mutex(h.Name()).TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock(%q) after the revocation: %v", h.Name(), err)
		}
		if err := h2.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAcquireRefreshesSession takes a lock, lets its Client's lease run
// down without keep-alives, and takes a second lock of the same Client: the
// second Acquire must leave the lease with at least the requested lease to
// run, counted from its request.
func TestAcquireRefreshesSession(t *testing.T) {
	cli := sharedCli(t)
	ctx := bg(t)
	s := etcdstore.New(cli, nil)
	const lease = 2 * time.Second // an etcd lease of 3 s
	client := "0a0b0c0d-0000-4000-8000-000000000004"
	first := driver.Request{Name: lockName(t) + "/first", Owner: client + ":1", Lease: lease}
	if g, err := s.Acquire(ctx, first); err != nil || !g.Acquired {
		t.Fatalf("Acquire(first) = %+v, %v", g, err)
	}
	time.Sleep(lease) // the lease runs down: 1 s of 3 left
	second := driver.Request{Name: lockName(t) + "/second", Owner: client + ":2", Lease: lease}
	send := time.Now()
	if g, err := s.Acquire(ctx, second); err != nil || !g.Acquired {
		t.Fatalf("Acquire(second) = %+v, %v", g, err)
	}
	resp, err := cli.Get(ctx, etcdstore.DefaultPrefix+"lock/"+second.Name)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the second lock key = %v, %v", resp, err)
	}
	ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil {
		t.Fatal(err)
	}
	// TTL is whole seconds, rounded down: at least that much is left, and
	// the lock must last the lease from its request.
	if left, want := time.Duration(ttl.TTL)*time.Second, lease-time.Since(send); left < want {
		t.Errorf("the session's lease has %ds left after the second Acquire, want at least %v (the lease from its request)", ttl.TTL, want)
	}
	for _, r := range []driver.Request{first, second} {
		if err := s.Release(ctx, r); err != nil {
			t.Error(err)
		}
	}
}

// TestLeaseBelowServerMinimum runs a server whose minimum lease TTL is 5 s
// (1.5 election timeouts of 3 s): a lease whose TTL the server would raise
// is refused as unsupported, first after a grant shows the minimum, then
// before any round trip; a lease long enough is granted.
func TestLeaseBelowServerMinimum(t *testing.T) {
	srv := testserver.NewEtcd(t, testserver.EtcdOptions{Args: []string{"--heartbeat-interval", "300", "--election-timeout", "3000"}})
	ctx := bg(t)
	s := etcdstore.New(newCli(t, srv.Endpoint), nil)
	owner := "0a0b0c0d-0000-4000-8000-000000000005:1"
	for i := range 2 {
		g, err := s.Acquire(ctx, driver.Request{Name: lockName(t), Owner: owner, Lease: time.Second})
		if !errors.Is(err, driver.ErrUnsupported) || g.Acquired {
			t.Fatalf("Acquire with a 1s lease (try %d) = %+v, %v; want ErrUnsupported", i, g, err)
		}
		if !strings.Contains(err.Error(), "at least 4s") {
			t.Errorf("refusal = %q, want it to give the shortest lease kept as asked (4s)", err)
		}
	}
	r := driver.Request{Name: lockName(t), Owner: owner, Lease: 4 * time.Second}
	if g, err := s.Acquire(ctx, r); err != nil || !g.Acquired {
		t.Fatalf("Acquire with a 4s lease = %+v, %v; want granted", g, err)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
}
