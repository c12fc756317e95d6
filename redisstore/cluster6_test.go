package redisstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// The tests in this file run on a Cluster of three masters with a replica
// each (testserver.NewClusterWith), the shape of a production Cluster.

// newReplicatedCluster starts a Cluster of three masters with a replica each
// and declares it fresh (MarkFresh: no restart grace for its first lease).
func newReplicatedCluster(t *testing.T, opts testserver.ClusterOptions) (*testserver.Cluster, *redis.ClusterClient) {
	t.Helper()
	opts.Masters, opts.Replicas = 3, 1
	cl := testserver.NewClusterWith(t, opts)
	cc := clusterClient(t, cl)
	if err := redisstore.New(cc, nil).MarkFresh(bg(t)); err != nil {
		t.Fatal(err)
	}
	return cl, cc
}

// clusterClient returns a ClusterClient on every node of cl, with timeouts
// short enough for fault tests, closed at cleanup.
func clusterClient(t *testing.T, cl *testserver.Cluster) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(),
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// clusterLeash returns a leash Client with the lease on a Store of its own on
// cc, closed at cleanup.
func clusterLeash(t *testing.T, cc *redis.ClusterClient, lease time.Duration, opts *redisstore.Options) *leash.Client {
	t.Helper()
	c, err := leash.New(redisstore.New(cc, opts), &leash.Options{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// namesOn returns k lock names, with prefix, whose slots master i of an
// n-master testserver cluster served when it started.
func namesOn(t *testing.T, cc *redis.ClusterClient, prefix string, n, i, k int) []string {
	t.Helper()
	var names []string
	for j := 0; len(names) < k; j++ {
		name := fmt.Sprintf("%s/%d", prefix, j)
		slot, err := cc.ClusterKeySlot(bg(t), name).Result()
		if err != nil {
			t.Fatal(err)
		}
		if int(slot)*n/16384 == i {
			names = append(names, name)
		}
	}
	return names
}

// kindLock is one lock of some kind: how its holder takes it, and how
// another client tries to take it against that hold (refused while held).
type kindLock struct {
	what  string
	take  func(c *leash.Client) (*leash.Hold, error)
	rival func(c *leash.Client) (*leash.Hold, error)
}

// everyKind returns a lock of every kind on the names given (five).
func everyKind(t *testing.T, names []string) []kindLock {
	ctx := bg(t)
	return []kindLock{
		{"mutex " + names[0],
			func(c *leash.Client) (*leash.Hold, error) { return c.Mutex(names[0]).Lock(ctx) },
			func(c *leash.Client) (*leash.Hold, error) { return c.Mutex(names[0]).TryLock(ctx) }},
		{"fair mutex " + names[1],
			func(c *leash.Client) (*leash.Hold, error) { return c.FairMutex(names[1], nil).Lock(ctx) },
			func(c *leash.Client) (*leash.Hold, error) { return c.FairMutex(names[1], nil).TryLock(ctx) }},
		{"read lock " + names[2],
			func(c *leash.Client) (*leash.Hold, error) { return c.RWMutex(names[2], nil).RLock(ctx) },
			func(c *leash.Client) (*leash.Hold, error) { return c.RWMutex(names[2], nil).TryLock(ctx) }},
		{"write lock " + names[3],
			func(c *leash.Client) (*leash.Hold, error) { return c.RWMutex(names[3], nil).Lock(ctx) },
			func(c *leash.Client) (*leash.Hold, error) { return c.RWMutex(names[3], nil).TryRLock(ctx) }},
		{"semaphore " + names[4],
			func(c *leash.Client) (*leash.Hold, error) { return c.Semaphore(names[4], 1).Acquire(ctx) },
			func(c *leash.Client) (*leash.Hold, error) { return c.Semaphore(names[4], 1).TryAcquire(ctx) }},
	}
}

// held is a hold taken in a test, with what it is and its validity when the
// test started watching it.
type held struct {
	lock  kindLock
	h     *leash.Hold
	valid time.Time
}

// takeAll takes every lock with c and fails the test on an error.
func takeAll(t *testing.T, c *leash.Client, locks []kindLock) []held {
	t.Helper()
	out := make([]held, len(locks))
	for i, l := range locks {
		h, err := l.take(c)
		if err != nil {
			t.Fatalf("%s: %v", l.what, err)
		}
		out[i] = held{l, h, h.ValidUntil()}
	}
	return out
}

// refused checks that other cannot take any of hs's locks.
func refused(t *testing.T, other *leash.Client, hs []held, when string) {
	t.Helper()
	for _, h := range hs {
		g, err := h.lock.rival(other)
		if err == nil {
			t.Errorf("%s: another client got %s while it was held", when, h.lock.what)
			_ = g.Unlock(bg(t))
		} else if !errors.Is(err, leash.ErrNotAcquired) {
			t.Errorf("%s: another client's try of %s: %v; want not acquired", when, h.lock.what, err)
		}
	}
}

// renewedSince waits until every hold in hs has been renewed past the
// validity it had when the test started watching it, and fails the test if
// one is told it is lost instead.
func renewedSince(t *testing.T, hs []held, when string) {
	t.Helper()
	for i := range hs {
		h := &hs[i]
		waitFor(t, when+": "+h.lock.what+" renewed", func() bool {
			select {
			case <-h.h.Lost():
				t.Fatalf("%s: %s lost: %v", when, h.lock.what, h.h.Err())
			default:
			}
			return h.h.ValidUntil().After(h.valid)
		})
		h.valid = h.h.ValidUntil()
	}
}

// unlockAll releases every hold and checks that other can then take each.
func unlockAll(t *testing.T, other *leash.Client, hs []held) {
	t.Helper()
	for _, h := range hs {
		if err := h.h.Unlock(bg(t)); err != nil {
			t.Errorf("Unlock %s: %v", h.lock.what, err)
		}
	}
	for _, h := range hs {
		g, err := h.lock.take(other)
		if err != nil {
			t.Errorf("%s after its Unlock: %v; want it free", h.lock.what, err)
			continue
		}
		if g.Fence() <= h.h.Fence() {
			t.Errorf("%s: token %d after the Unlock, want > %d", h.lock.what, g.Fence(), h.h.Fence())
		}
		_ = g.Unlock(bg(t))
	}
}

// TestClusterEveryKindOnEveryMaster holds a lock of every kind (Mutex,
// FairMutex, read and write locks, a semaphore's permit) on every master of
// a Cluster with replicas, all from one client: each is refused to another
// client, each is renewed (one renewal round spans the three nodes), and
// each is free after its Unlock with a larger token.
func TestClusterEveryKindOnEveryMaster(t *testing.T) {
	const lease = 2 * time.Second
	cl, cc := newReplicatedCluster(t, testserver.ClusterOptions{})
	c, other := clusterLeash(t, cc, lease, nil), clusterLeash(t, cc, lease, nil)
	var locks []kindLock
	for i := range cl.Masters {
		locks = append(locks, everyKind(t, namesOn(t, cc, lockName(t), len(cl.Masters), i, 5))...)
	}
	hs := takeAll(t, c, locks)
	refused(t, other, hs, "held")
	renewedSince(t, hs, "held")
	refused(t, other, hs, "renewed")
	unlockAll(t, other, hs)
}
