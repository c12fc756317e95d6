package redisstore_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestClusterPausedNodeDoesNotStallOthers holds one lock on each master of a
// three-node Cluster and pauses one node for two and a half leases (renewals
// run per node, and a failing node never stalls renewals on the healthy
// ones). The holders on the healthy nodes are renewed throughout and
// never told anything; the holder on the paused node is told its lock is
// lost, the store unreachable. Once the node is back, its lock can be taken
// again with a larger token.
func TestClusterPausedNodeDoesNotStallOthers(t *testing.T) {
	const lease = 2 * time.Second
	nodes, cc, c := newCluster(t, 3, lease)
	names := namesPerNode(t, cc, len(nodes))
	holds := make([]*leash.Hold, len(names))
	for i, name := range names {
		var err error
		if holds[i], err = c.Mutex(name).Lock(bg(t)); err != nil {
			t.Fatalf("Lock(%s) on node %d: %v", name, i, err)
		}
	}

	validAtPause := make([]time.Time, len(holds))
	for i, h := range holds {
		validAtPause[i] = h.ValidUntil()
	}
	paused := nodes[2]
	if err := paused.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = paused.Resume()
		}
	}()
	select {
	case <-holds[2].Lost():
	case <-time.After(20 * lease): // a hang, not a slow machine
		t.Fatalf("the holder on the paused node not told within %v", 20*lease)
	}
	var lost *leash.LostError
	if !errors.As(holds[2].Err(), &lost) || lost.Reason != leash.ReasonUnreachable {
		t.Errorf("paused node's holder: %v; want lost, store unreachable", holds[2].Err())
	}
	time.Sleep(lease / 2) // two and a half leases in all
	for i, h := range holds[:2] {
		select {
		case <-h.Lost():
			t.Errorf("holder on healthy node %d told %v while another node was paused", i, h.Err())
		default:
		}
		// Renewed since the pause, on a busy machine too: the paused node's
		// holder was told only after its whole validity had passed.
		if !h.ValidUntil().After(validAtPause[i]) {
			t.Errorf("holder on healthy node %d not renewed while another node was paused", i)
		}
	}

	if err := paused.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	h, err := c.Mutex(names[2]).Lock(bg(t)) // granted once the paused lease has run out
	if err != nil {
		t.Fatalf("Lock on the resumed node: %v", err)
	}
	if h.Fence() <= holds[2].Fence() {
		t.Errorf("token on the resumed node %d, want > %d", h.Fence(), holds[2].Fence())
	}
	for _, h := range append(holds[:2], h) {
		if err := h.Unlock(bg(t)); err != nil {
			t.Errorf("Unlock: %v", err)
		}
	}
}

// newCluster starts a Cluster of n masters and returns them, a ClusterClient
// with short timeouts, and a leash Client with the lease on it.
func newCluster(t *testing.T, n int, lease time.Duration) ([]*testserver.Redis, *redis.ClusterClient, *leash.Client) {
	t.Helper()
	nodes := testserver.NewCluster(t, n)
	addrs := make([]string, len(nodes))
	for i, node := range nodes {
		addrs[i] = node.Addr
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs,
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { cc.Close() })
	s := redisstore.New(cc, nil)
	if err := s.MarkFresh(bg(t)); err != nil { // a new cluster: no restart grace
		t.Fatal(err)
	}
	c, err := leash.New(s, &leash.Options{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return nodes, cc, c
}

// namesPerNode returns a lock name for each of the n nodes of a cluster that
// testserver.NewCluster made: node i serves slots [i*16384/n, (i+1)*16384/n).
func namesPerNode(t *testing.T, cc *redis.ClusterClient, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i, found := 0, 0; found < n; i++ {
		name := fmt.Sprintf("%s/%d", lockName(t), i)
		slot, err := cc.ClusterKeySlot(bg(t), name).Result()
		if err != nil {
			t.Fatal(err)
		}
		node := 0
		for int64((node+1)*16384/n) <= slot {
			node++
		}
		if names[node] == "" {
			names[node], found = name, found+1
		}
	}
	return names
}

// TestClusterMultiLockAcrossNodes takes a MultiLock whose names live on three
// different nodes: all are held together (another client is refused each),
// each with a token of its own, and all are free after the Unlock.
func TestClusterMultiLockAcrossNodes(t *testing.T) {
	nodes, cc, c := newCluster(t, 3, 5*time.Second)
	names := namesPerNode(t, cc, len(nodes))
	other, err := leash.New(redisstore.New(cc, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	h, err := c.MultiLock(names).Lock(bg(t))
	if err != nil {
		t.Fatalf("MultiLock across %d nodes: %v", len(nodes), err)
	}
	for _, name := range names {
		if h.FenceOf(name) <= 0 {
			t.Errorf("token of %s = %d, want one of its own", name, h.FenceOf(name))
		}
		if _, err := other.Mutex(name).TryLock(bg(t)); err == nil {
			t.Errorf("another client got %s while the MultiLock held it", name)
		}
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	for _, name := range names {
		g, err := other.Mutex(name).TryLock(bg(t))
		if err != nil {
			t.Errorf("%s after the MultiLock's Unlock: %v; want free", name, err)
			continue
		}
		_ = g.Unlock(bg(t))
	}
}

// TestClusterJobs claims a tick of jobs on each of three nodes, with one
// script each (its keys in the job lock's slot), and lists them all with
// Jobs, which walks every master.
func TestClusterJobs(t *testing.T) {
	_, cc, _ := newCluster(t, 3, 5*time.Second)
	s := redisstore.New(cc, nil)
	t.Cleanup(func() { s.Close() })
	names := namesPerNode(t, cc, 3)
	tick := time.UnixMilli(time.Now().UnixMilli()).Add(-time.Second)
	for _, job := range names {
		res, err := s.ClaimTick(bg(t), driver.TickClaim{Job: job, Tick: tick, Attempt: 1, Run: driver.RunRecord{Client: "c"}})
		if err != nil || res.Status != driver.ClaimGranted {
			t.Fatalf("ClaimTick(%q) = %v, %v; want granted", job, res.Status, err)
		}
		if err := s.EndRun(bg(t), driver.RunEnd{Job: job, Tick: tick, Attempt: 1, Client: "c", Outcome: driver.OutcomeOK}); err != nil {
			t.Fatal(err)
		}
		st, err := s.History(bg(t), job, 0)
		if err != nil || len(st.Runs) != 1 || st.Runs[0].Outcome != driver.OutcomeOK {
			t.Fatalf("History(%q) = %+v, %v; want one ok run", job, st, err)
		}
	}
	got, err := s.Jobs(bg(t), lockName(t)+"/*")
	slices.Sort(names)
	if err != nil || !slices.Equal(got, names) {
		t.Errorf("Jobs = %q, %v; want %q", got, err, names)
	}
}
