package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/etcdstore"
	"github.com/leash-go/leash/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leader returns the index of c's member that leads the cluster, asking the
// members that run; -1 when none says it leads.
func leader(ctx context.Context, cli *clientv3.Client, c *testserver.EtcdCluster) int {
	for i, m := range c.Members {
		if m.PID() == 0 {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, m.Endpoint)
		cancel()
		if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return i
		}
	}
	return -1
}

// takeOver tries, from a second Client, to take every lock of holds, and
// checks that it gets none whose first holder still believes it holds it:
// a lock is granted again only after its holder was told it lost it. It
// returns how many locks it took.
func takeOver(t *testing.T, ctx context.Context, c2 *leash.Client, holds []*leash.Hold) int {
	t.Helper()
	took := 0
	for _, h := range holds {
		h2, err := c2.Mutex(h.Name()).TryLock(ctx)
		if errors.Is(err, leash.ErrNotAcquired) {
			continue
		}
		if err != nil {
			t.Fatalf("TryLock(%q) by a second client: %v", h.Name(), err)
		}
		took++
		if h.Err() == nil {
			t.Errorf("lock %q granted (fence %d) to a second client while its holder (fence %d) was not told it lost it", h.Name(), h2.Fence(), h.Fence())
		}
		if h2.Fence() <= h.Fence() {
			t.Errorf("lock %q: fence %d after the takeover, want > %d", h.Name(), h2.Fence(), h.Fence())
		}
		if err := h2.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
	return took
}

// TestLeaderKilled kills the leader of a three-member cluster while a
// Client holds locks on it: the holders keep their locks (etcd's new leader
// extends every lease) or are told they lost them, and no lock is granted
// twice; tokens keep growing.
func TestLeaderKilled(t *testing.T) {
	cluster := testserver.NewEtcdCluster(t, 3)
	ctx := bg(t)
	cli := newCli(t, cluster.Endpoints()...)
	c := newClient(t, cli, &leash.Options{Lease: 5 * time.Second})
	c2 := newClient(t, newCli(t, cluster.Endpoints()...), &leash.Options{Lease: 5 * time.Second})
	var holds []*leash.Hold
	for i := range 20 {
		h, err := c.Mutex(fmt.Sprintf("%s/%d", lockName(t), i)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
	}
	l := leader(ctx, cli, cluster)
	if l < 0 {
		t.Fatal("no member leads the cluster")
	}
	if err := cluster.Members[l].Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the leader, member %d", l)
	for leader(ctx, cli, cluster) < 0 {
		if ctx.Err() != nil {
			t.Fatal("no new leader")
		}
		time.Sleep(50 * time.Millisecond) // the election runs
	}
	// Each hold renews against the new leader: it still holds, or learns
	// it lost the lock.
	kept := 0
	for _, h := range holds {
		if err := h.Renew(ctx); err == nil {
			kept++
		} else if !errors.Is(err, leash.ErrLost) {
			t.Logf("Renew(%q) after the failover: %v", h.Name(), err)
		}
	}
	t.Logf("%d of %d holds kept their locks across the failover", kept, len(holds))
	took := takeOver(t, ctx, c2, holds)
	t.Logf("the second client took %d locks", took)
	for _, h := range holds {
		if h.Err() == nil {
			if err := h.Unlock(ctx); err != nil {
				t.Errorf("Unlock(%q) after the failover: %v", h.Name(), err)
			}
		}
	}
	if took := takeOver(t, ctx, c2, holds); took != len(holds) {
		t.Errorf("after every holder unlocked, the second client took %d of %d locks", took, len(holds))
	}
}

// TestServerPausedPastLease stops a single etcd server (SIGSTOP), with
// another client already waiting for the lock, for as long as the etcd
// lease's TTL: once resumed, the server expires the lease and the waiter is
// granted the lock; by then the holder has been told it lost it (its
// validity ended a lease after its last keep-alive was sent, a second
// before the TTL).
func TestServerPausedPastLease(t *testing.T) {
	srv := testserver.NewEtcd(t, testserver.EtcdOptions{})
	ctx := bg(t)
	const lease = 2 * time.Second
	c := newClient(t, newCli(t, srv.Endpoint), &leash.Options{Lease: lease})
	c2 := newClient(t, newCli(t, srv.Endpoint), nil)
	h, err := c.Mutex(lockName(t)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		h       *leash.Hold
		err     error
		believe bool // the holder believed it held the lock when it was granted
	}
	granted := make(chan grant, 1)
	go func() {
		g, err := c2.Mutex(lockName(t)).Lock(ctx)
		granted <- grant{g, err, h.Err() == nil}
	}()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	// The fault's length, not a wait for a condition: the lease's TTL
	// passes while the server is stopped, and it expires the lease once
	// resumed.
	time.Sleep(time.Duration(etcdstore.TTLFor(lease)) * time.Second)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	var g grant
	select {
	case g = <-granted:
	case <-ctx.Done():
		t.Fatal("the waiting client not granted the lock within a minute")
	}
	if g.err != nil {
		t.Fatal(g.err)
	}
	if g.believe {
		t.Fatalf("granted to another client (fence %d) while the holder still believed it held the lock", g.h.Fence())
	}
	select {
	case <-h.Lost():
	case <-ctx.Done():
		t.Fatal("the holder's Lost channel not closed")
	}
	var le *leash.LostError
	if !errors.As(h.Err(), &le) {
		t.Fatalf("hold.Err() = %v, want a *leash.LostError", h.Err())
	}
	t.Logf("lost: %v", le.Reason)
	if g.h.Fence() <= h.Fence() {
		t.Errorf("fence after the takeover = %d, want > %d", g.h.Fence(), h.Fence())
	}
}

// TestRestartKeepsFencing restarts a single etcd server on its data
// directory while a lock is held: the holder keeps the lock or is told, and
// the next grant's token is above every earlier one.
func TestRestartKeepsFencing(t *testing.T) {
	srv := testserver.NewEtcd(t, testserver.EtcdOptions{})
	ctx := bg(t)
	c := newClient(t, newCli(t, srv.Endpoint), &leash.Options{Lease: 5 * time.Second})
	h, err := c.Mutex(lockName(t)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := h.Renew(ctx); err != nil {
		t.Logf("Renew after the restart: %v", err)
	}
	c2 := newClient(t, newCli(t, srv.Endpoint), nil)
	if took := takeOver(t, ctx, c2, []*leash.Hold{h}); took == 0 {
		if err := h.Unlock(ctx); err != nil {
			t.Fatalf("Unlock after the restart: %v", err)
		}
	}
	h2, err := c2.Mutex(lockName(t)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h2.Fence() <= h.Fence() {
		t.Errorf("fence after the restart = %d, want > %d", h2.Fence(), h.Fence())
	}
}
