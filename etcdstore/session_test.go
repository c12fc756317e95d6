package etcdstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/etcdstore"
	"github.com/leash-go/leash/internal/testserver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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
// before any round trip, for every kind; a lease long enough is granted.
func TestLeaseBelowServerMinimum(t *testing.T) {
	srv := testserver.NewEtcd(t, testserver.EtcdOptions{Args: []string{"--heartbeat-interval", "300", "--election-timeout", "3000"}})
	ctx := bg(t)
	cli := newCli(t, srv.Endpoint)
	s := etcdstore.New(cli, nil)
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
	// Refused before any round trip, whatever the kind: with the client
	// closed, a request that reached it would fail otherwise.
	cli.Close()
	for _, k := range []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindRead, driver.KindWrite, driver.KindPermit} {
		g, err := s.Acquire(ctx, driver.Request{Kind: k, Name: lockName(t), Owner: owner, Lease: time.Second, Permits: 2})
		if !errors.Is(err, driver.ErrUnsupported) || g.Acquired {
			t.Errorf("Acquire(%v) with a 1s lease, client closed = %+v, %v; want ErrUnsupported", k, g, err)
		}
	}
}

// TestPlaceLeaseGoneKeepsLockLease takes a Mutex and, for the same Client,
// waits in a FairMutex's queue, whose place lease then ends (an operator's
// revoke; or expiry racing the attempt). The next fair attempt is refused
// with "lease not found" for the place lease: the Store must forget that
// lease only, and keep the live lease of the Mutex, which a next lock of
// the Client joins.
func TestPlaceLeaseGoneKeepsLockLease(t *testing.T) {
	cli := sharedCli(t)
	ctx := bg(t)
	prefix := "test-" + t.Name() + "/"
	s := etcdstore.New(cli, &etcdstore.Options{Prefix: prefix})
	const c, x = "0a0b0c0d-0000-4000-8000-000000000006", "0a0b0c0d-0000-4000-8000-000000000007"
	a := driver.Request{Kind: driver.KindMutex, Name: "a", Owner: c + ":1", Lease: 5 * time.Second}
	b := driver.Request{Kind: driver.KindMutex, Name: "b", Owner: x + ":1", Lease: time.Minute}
	for _, r := range []driver.Request{a, b} {
		if g, err := s.Acquire(ctx, r); err != nil || !g.Acquired {
			t.Fatalf("Acquire(%q by %q) = %+v, %v", r.Name, r.Owner, g, err)
		}
	}
	fb := driver.Request{Kind: driver.KindFair, Name: "b", Owner: c + ":2", Lease: a.Lease, Wait: time.Second}
	if g, err := s.Acquire(ctx, fb); err != nil || g.Acquired {
		t.Fatalf("Acquire(fair b) = %+v, %v; want refused, with a place", g, err)
	}
	place, err := cli.Get(ctx, prefix+"queue/b\x00"+fb.Owner)
	if err != nil || len(place.Kvs) != 1 {
		t.Fatalf("the place = %v, %v", place, err)
	}
	lockLease := keyLease(t, cli, prefix+"lock/a")
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(place.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	if g, err := s.Acquire(ctx, fb); err != nil || g.Acquired {
		t.Fatalf("Acquire(fair b) after its place lease was revoked = %+v, %v; want refused", g, err)
	}
	if err := s.KeepAlive(ctx, c); err != nil {
		t.Fatal(err)
	}
	if ttl, err := cli.TimeToLive(ctx, lockLease); err != nil || ttl.TTL <= 0 {
		t.Fatalf("the Mutex's lease after the refused attempt: %+v, %v; want it kept", ttl, err)
	}
	if res := s.Renew(ctx, []driver.Request{a}); res[0] != (driver.RenewResult{Status: driver.Renewed}) {
		t.Fatalf("Renew(a) = %+v, want Renewed", res[0])
	}
	// The Client's next lock joins the lease the Store still keeps.
	a2 := driver.Request{Kind: driver.KindMutex, Name: "a2", Owner: c + ":3", Lease: a.Lease}
	if g, err := s.Acquire(ctx, a2); err != nil || !g.Acquired {
		t.Fatalf("Acquire(a2) = %+v, %v", g, err)
	}
	if got := keyLease(t, cli, prefix+"lock/a2"); got != lockLease {
		t.Errorf("a2 is on lease %x, a on %x: the Store forgot the Mutex's live lease", int64(got), int64(lockLease))
	}
	for _, r := range []driver.Request{a, a2, b} {
		if err := s.Release(ctx, r); err != nil {
			t.Error(err)
		}
	}
	if err := s.Withdraw(ctx, fb); err != nil {
		t.Error(err)
	}
}

// TestRenewLeaseNotKept moves a lock key, value unchanged, to an etcd lease
// the Store does not keep alive: the key is its owner's, but it expires
// with a lease nobody extends, so Renew must not report it Renewed.
func TestRenewLeaseNotKept(t *testing.T) {
	cli := sharedCli(t)
	ctx := bg(t)
	s := etcdstore.New(cli, nil)
	r := driver.Request{Kind: driver.KindMutex, Name: lockName(t), Owner: "0a0b0c0d-0000-4000-8000-000000000008:1", Lease: 5 * time.Second}
	if g, err := s.Acquire(ctx, r); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	if err := s.KeepAlive(ctx, driver.OwnerClient(r.Owner)); err != nil {
		t.Fatal(err)
	}
	if res := s.Renew(ctx, []driver.Request{r}); res[0] != (driver.RenewResult{Status: driver.Renewed}) {
		t.Fatalf("Renew before the move = %+v, want Renewed", res[0])
	}
	key := etcdstore.DefaultPrefix + "lock/" + r.Name
	kv, err := cli.Get(ctx, key)
	if err != nil || len(kv.Kvs) != 1 {
		t.Fatalf("the lock key = %v, %v", kv, err)
	}
	foreign, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Revoke(context.WithoutCancel(ctx), foreign.ID) //nolint:errcheck // it expires anyway
	if _, err := cli.Put(ctx, key, string(kv.Kvs[0].Value), clientv3.WithLease(foreign.ID)); err != nil {
		t.Fatal(err)
	}
	res := s.Renew(ctx, []driver.Request{r})
	if res[0].Err == nil && res[0].Status == driver.Renewed {
		t.Fatalf("Renew of a lock on a lease the Store does not keep alive = Renewed, want RenewGone")
	}
	if res[0] != (driver.RenewResult{Status: driver.RenewGone}) {
		t.Errorf("Renew = %+v, want RenewGone", res[0])
	}
	if err := s.Release(ctx, r); err != nil {
		t.Error(err)
	}
}

// TestPlaceLeaseGoneKeepsHold is TestPlaceLeaseGoneKeepsLockLease through
// the leash core: a Client holds a Mutex while its FairMutex waits, and the
// waiter's place lease is revoked. The Mutex's lease must stay alive as
// long as the hold stays valid: were it forgotten, the server would let it
// expire, and another Client in, while the hold still looked valid.
func TestPlaceLeaseGoneKeepsHold(t *testing.T) {
	cli := sharedCli(t)
	ctx := bg(t)
	const lease = 3 * time.Second
	opts := &leash.Options{Lease: lease}
	c, x, y := newClient(t, cli, opts), newClient(t, cli, opts), newClient(t, cli, opts)
	na, nb := lockName(t)+"/a", lockName(t)+"/b"
	ha, err := c.Mutex(na).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Mutex(nb).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	lockLease := keyLease(t, cli, etcdstore.DefaultPrefix+"lock/"+na)
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan struct{})
	defer func() { cancel(); <-waited }()
	go func() {
		defer close(waited)
		_, _ = c.FairMutex(nb, &leash.QueueOptions{QueueLease: time.Second}).Lock(wctx)
	}()
	placeLease := func() clientv3.LeaseID {
		r, err := cli.Get(ctx, etcdstore.DefaultPrefix+"queue/"+nb+"\x00", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) == 0 {
			return 0
		}
		return clientv3.LeaseID(r.Kvs[0].Lease)
	}
	revoked := poll(t, ctx, placeLease, func(id clientv3.LeaseID) bool { return id != 0 })
	// A lease not found has expired already: the same case.
	if _, err := cli.Revoke(ctx, revoked); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatal(err)
	}
	// The waiter's next attempt is refused for the revoked lease, and puts
	// its place again under a new one.
	poll(t, ctx, placeLease, func(id clientv3.LeaseID) bool { return id != 0 && id != revoked })
	retried := time.Now()
	// Either the Mutex's lease is kept alive while the hold's validity runs
	// well past any expiry of a forgotten lease, or, if the lease is gone,
	// the hold must know.
	for {
		ttl, err := cli.TimeToLive(ctx, lockLease)
		if err != nil {
			t.Fatal(err)
		}
		if ttl.TTL < 0 {
			if h, err := y.Mutex(na).TryLock(ctx); err == nil && ha.Err() == nil && ha.ValidUntil().After(time.Now()) {
				t.Fatalf("two holders of %s: c's hold is valid for %v more, y took it (fence %d)", na, time.Until(ha.ValidUntil()), h.Fence())
			}
			t.Fatalf("the Mutex's lease %x expired while c held it (hold: %v)", int64(lockLease), ha.Err())
		}
		if ha.Err() != nil {
			t.Fatalf("c lost its hold of %s: %v", na, ha.Err())
		}
		if ha.ValidUntil().After(retried.Add(3 * lease)) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the hold's validity never passed %v after the retry", 3*lease)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := y.Mutex(na).TryLock(ctx); !errors.Is(err, leash.ErrNotAcquired) {
		t.Fatalf("y's TryLock(%s) while c holds it = %v, want ErrNotAcquired", na, err)
	}
}

// keyLease is the etcd lease key is attached to.
func keyLease(t *testing.T, cli *clientv3.Client, key string) clientv3.LeaseID {
	t.Helper()
	r, err := cli.Get(context.Background(), key)
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease == 0 {
		t.Fatalf("key %q = %v, %v; want one key on a lease", key, r, err)
	}
	return clientv3.LeaseID(r.Kvs[0].Lease)
}

// poll calls get until ok accepts what it returns, or ctx ends.
func poll[T any](t *testing.T, ctx context.Context, get func() T, ok func(T) bool) T {
	t.Helper()
	for {
		if v := get(); ok(v) {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatal("the condition never held")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestSessionsSwept takes a lock, a queue place and a holder record for a
// Client, then lets it go: once the time its leases were kept until has
// passed, the Store's sweep forgets the Client's sessions (locks', places',
// record's); a sweep before then keeps them.
func TestSessionsSwept(t *testing.T) {
	cli := sharedCli(t)
	ctx := bg(t)
	s := etcdstore.New(cli, &etcdstore.Options{Prefix: "test-" + t.Name() + "/"})
	const c, x = "0a0b0c0d-0000-4000-8000-00000000000a", "0a0b0c0d-0000-4000-8000-00000000000b"
	a := driver.Request{Kind: driver.KindMutex, Name: "a", Owner: c + ":1", Lease: 5 * time.Second}
	b := driver.Request{Kind: driver.KindMutex, Name: "b", Owner: x + ":1", Lease: 5 * time.Second}
	fb := driver.Request{Kind: driver.KindFair, Name: "b", Owner: c + ":2", Lease: 5 * time.Second, Wait: time.Second}
	for _, r := range []driver.Request{a, b, fb} {
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutClient(ctx, driver.ClientRecord{ID: c, Host: "h", PID: 1, Started: time.Now()}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	s.SweepNow(time.Now())
	if got := len(s.SessionKeys()); got != 4 {
		t.Fatalf("sessions before their leases' time = %q, want 4 (c's locks, places, record; x's locks)", s.SessionKeys())
	}
	for _, r := range []driver.Request{a, b} {
		if err := s.Release(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Withdraw(ctx, fb); err != nil {
		t.Fatal(err)
	}
	s.SweepNow(time.Now().Add(time.Hour))
	if got := s.SessionKeys(); len(got) != 0 {
		t.Errorf("sessions after their leases' time = %q, want none", got)
	}
	if err := s.KeepAlive(ctx, c); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("KeepAlive of a swept client = %v, want ErrNotHeld", err)
	}
	// The next lock of the Client grants a new lease.
	if g, err := s.Acquire(ctx, a); err != nil || !g.Acquired {
		t.Fatalf("Acquire after the sweep = %+v, %v", g, err)
	}
	if err := s.Release(ctx, a); err != nil {
		t.Error(err)
	}
}
