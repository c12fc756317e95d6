package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
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
	// MarkFresh writes every slot's marker: a client with go-redis's
	// default timeouts, which a busy machine's pipelines of 500 writes fit.
	fresh := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer fresh.Close()
	if err := redisstore.New(fresh, nil).MarkFresh(bg(t)); err != nil {
		t.Fatal(err)
	}
	return cl, clusterClient(t, cl)
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

// TestClusterFailoverDuringHolds holds a lock of every kind on every master
// and makes master 0's replica take over with CLUSTER FAILOVER (the manual
// failover: the replica has every write before it takes over). Every hold
// is renewed through the failover (its renewals follow the MOVED reply to
// the new master) and stays refused to another client. A fresh grant on the
// promoted shard waits out the restart grace, counted from the promotion
// (ErrRestartGrace), while the other shards grant at once.
func TestClusterFailoverDuringHolds(t *testing.T) {
	const lease = 2 * time.Second
	cl, cc := newReplicatedCluster(t, testserver.ClusterOptions{})
	c := clusterLeash(t, cc, lease, nil)
	// A grace far longer than the test's steps: the check below cannot race
	// its end on a slow machine.
	other := clusterLeash(t, cc, lease, &redisstore.Options{RestartGrace: time.Minute})
	var locks []kindLock
	for i := range cl.Masters {
		locks = append(locks, everyKind(t, namesOn(t, cc, lockName(t), len(cl.Masters), i, 5))...)
	}
	hs := takeAll(t, c, locks)
	if err := cl.Failover(cl.Replicas[0][0], false); err != nil {
		t.Fatal(err)
	}
	renewedSince(t, hs, "after the failover")
	for i := range cl.Masters {
		fresh := namesOn(t, cc, lockName(t)+"/fresh", len(cl.Masters), i, 1)[0]
		h, err := other.Mutex(fresh).TryLock(bg(t))
		switch {
		case i == 0 && !errors.Is(err, leash.ErrRestartGrace):
			t.Errorf("fresh lock on the promoted shard: %v; want the restart grace", err)
		case i != 0 && err != nil:
			t.Errorf("fresh lock on shard %d, not failed over: %v; want granted", i, err)
		}
		if err == nil {
			_ = h.Unlock(bg(t))
		}
	}
	refused(t, other, hs, "after the failover")
	renewedSince(t, hs, "after the failover, later")
	unlockAll(t, c, hs) // c's grace is its lease: Lock waits it out
}

// TestClusterLaggingPromotionWaitsOutTheGrace promotes a replica that missed
// a grant: master 0's replica is paused (SIGSTOP) and its link cut, a
// fixed-lease lock is granted on master 0 (the replica never receives it),
// master 0 is killed,
// and its replica, resumed, is promoted with CLUSTER FAILOVER FORCE, as an
// automatic failover would. The new master has no trace of the grant. A
// rival client that knew the old slot map then asks for the same lock: it
// must not be granted before the first holder's validity has ended (the
// restart grace, counted from the promotion). A lock granted before the
// pause, which the replica received, is renewed on the new master throughout.
func TestClusterLaggingPromotionWaitsOutTheGrace(t *testing.T) {
	if got := laggingPromotion(t, false); got != "" {
		t.Error(got)
	}
}

// TestClusterLaggingPromotionControl is the negative control of
// TestClusterLaggingPromotionWaitsOutTheGrace: a rival that trusts the
// restart marker alone (the marker was replicated before the pause, so the
// promoted node carries its old master's) is granted the lock while its
// first holder still holds it.
func TestClusterLaggingPromotionControl(t *testing.T) {
	if got := laggingPromotion(t, true); got == "" {
		t.Error("a rival trusting the marker alone waited for the first holder: the scenario does not test the grace")
	} else {
		t.Logf("caught, as expected: %s", got)
	}
}

// laggingPromotion runs the scenario of
// TestClusterLaggingPromotionWaitsOutTheGrace, the rival trusting the
// restart marker alone if markerOnly, and returns a description of two
// holders if the rival was granted the lost lock within its first holder's
// validity ("" if not).
func laggingPromotion(t *testing.T, markerOnly bool) string {
	const lease, fixed = 2 * time.Second, 15 * time.Second
	cl, cc := newReplicatedCluster(t, testserver.ClusterOptions{})
	holder := clusterLeash(t, cc, lease, nil)
	rivalCC := clusterClient(t, cl)
	rs := redisstore.New(rivalCC, &redisstore.Options{RestartGrace: fixed})
	if markerOnly {
		redisstore.MarkerOnly(rs)
	}
	rival, err := leash.New(rs, &leash.Options{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rival.Close() })
	names := namesOn(t, cc, lockName(t), len(cl.Masters), 0, 2)
	kept, lostName := names[0], names[1]

	// A lease the failover fits in: the holder keeps it through the
	// promotion and renews it on the new master.
	k, err := holder.Mutex(kept, &leash.LockOptions{Lease: 30 * time.Second}).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	// The rival knows the slot map and master 0's process.
	if _, err := rival.Mutex(kept).TryLock(bg(t)); !errors.Is(err, leash.ErrNotAcquired) {
		t.Fatalf("rival's try of a held lock: %v; want not acquired", err)
	}
	onReplica := redis.NewClient(&redis.Options{Addr: cl.Replicas[0][0].Addr,
		OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }})
	defer onReplica.Close()
	waitFor(t, "the kept grant on master 0's replica", func() bool {
		n, err := onReplica.Exists(bg(t), kept).Result()
		return err == nil && n == 1
	})
	onReplica.Close()
	replica := cl.Replicas[0][0]
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = replica.Resume()
		}
	}()
	// A paused replica still receives what its master sends (the kernel
	// buffers it): cut the link, so the master's next writes stay behind.
	master := redis.NewClient(&redis.Options{Addr: cl.Masters[0].Addr})
	defer master.Close()
	if err := master.ClientKillByFilter(bg(t), "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	h, err := holder.Mutex(lostName, &leash.LockOptions{Lease: fixed, RenewInterval: leash.NoRenewal}).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Masters[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	if err := cl.Failover(replica, true); err != nil {
		t.Fatal(err)
	}
	k.Touch()
	valid := k.ValidUntil()

	// Until the rival's client reloads its slot map, its acquires go to the
	// dead master and fail (a dial error): Lock reports that at once, and a
	// caller tries again, as here.
	var g *leash.Hold
	waitFor(t, "the rival's Lock to reach the new master", func() bool {
		g, err = rival.Mutex(lostName).Lock(bg(t))
		if err != nil && !errors.Is(err, leash.ErrNotAcquired) {
			t.Logf("rival's Lock: %v", err)
			time.Sleep(500 * time.Millisecond)
			return false
		}
		return true
	})
	if err != nil {
		t.Fatalf("rival's Lock after the promotion: %v", err)
	}
	defer g.Unlock(bg(t))
	// g.ValidUntil() - lease is no later than the rival's acquire was sent,
	// and so than the grant.
	var twoHolders string
	if grantedBy := g.ValidUntil().Add(-lease); grantedBy.Before(h.ValidUntil()) {
		twoHolders = fmt.Sprintf("the rival was granted %s (token %d) %v before the first holder's validity ended (token %d)",
			lostName, g.Fence(), h.ValidUntil().Sub(grantedBy), h.Fence())
	}
	if g.Fence() <= h.Fence() {
		t.Errorf("rival's token %d, want > the first holder's %d", g.Fence(), h.Fence())
	}
	for !k.ValidUntil().After(valid) { // its next renewal, within a third of its lease
		select {
		case <-k.Lost():
			t.Fatalf("the kept lock, which the replica had, was lost: %v", k.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return twoHolders
}

// TestClusterKilledMasterOnlyItsLocks holds three locks on each master (one
// renewal round spans the three nodes) and kills master 2 (SIGKILL; the
// node timeout is longer than the test, so its replica is not promoted).
// Only master 2's holders are told, each with "store unreachable"; the
// others are renewed after the kill and never told anything. Master 2 then
// restarts empty (no persistence): its locks are granted again only after
// the restart grace, with larger tokens.
func TestClusterKilledMasterOnlyItsLocks(t *testing.T) {
	const lease = 2 * time.Second
	cl, cc := newReplicatedCluster(t, testserver.ClusterOptions{})
	c := clusterLeash(t, cc, lease, nil)
	other := clusterLeash(t, cc, lease, &redisstore.Options{RestartGrace: time.Minute})
	var healthy, doomed []held
	for i := range cl.Masters {
		for _, name := range namesOn(t, cc, lockName(t), len(cl.Masters), i, 3) {
			l := kindLock{what: fmt.Sprintf("mutex %s on master %d", name, i),
				take:  func(c *leash.Client) (*leash.Hold, error) { return c.Mutex(name).Lock(bg(t)) },
				rival: func(c *leash.Client) (*leash.Hold, error) { return c.Mutex(name).TryLock(bg(t)) }}
			if i == 2 {
				doomed = append(doomed, takeAll(t, c, []kindLock{l})...)
			} else {
				healthy = append(healthy, takeAll(t, c, []kindLock{l})...)
			}
		}
	}
	if err := cl.Masters[2].Kill(); err != nil {
		t.Fatal(err)
	}
	for _, h := range doomed {
		select {
		case <-h.h.Lost():
		case <-time.After(20 * lease): // a hang, not a slow machine
			t.Fatalf("%s not told within %v of its master's death", h.lock.what, 20*lease)
		}
		var lost *leash.LostError
		if !errors.As(h.h.Err(), &lost) || lost.Reason != leash.ReasonUnreachable {
			t.Errorf("%s: %v; want lost, store unreachable", h.lock.what, h.h.Err())
		}
	}
	// Every doomed hold's validity has passed: the healthy ones have been
	// renewed since the kill (on a busy machine too).
	renewedSince(t, healthy, "master 2 dead")
	refused(t, other, healthy, "master 2 dead")

	if err := cl.Masters[2].Start(); err != nil { // its data is gone
		t.Fatal(err)
	}
	if err := cl.WaitHealthy(); err != nil {
		t.Fatal(err)
	}
	for _, h := range doomed {
		var g *leash.Hold
		var err error
		waitFor(t, "an answer from the restarted master", func() bool {
			g, err = h.lock.rival(other) // a dial error until the client reconnects
			return err == nil || errors.Is(err, leash.ErrNotAcquired)
		})
		if !errors.Is(err, leash.ErrRestartGrace) {
			t.Errorf("%s after its master restarted empty: %v; want the restart grace", h.lock.what, err)
		}
		if err == nil {
			_ = g.Unlock(bg(t))
		}
		if g, err = h.lock.take(c); err != nil { // c's grace is the lease: Lock waits it out
			t.Errorf("%s after the grace: %v", h.lock.what, err)
			continue
		}
		if g.Fence() <= h.h.Fence() {
			t.Errorf("%s: token %d after the restart, want > %d", h.lock.what, g.Fence(), h.h.Fence())
		}
		_ = g.Unlock(bg(t))
	}
	unlockAll(t, other, healthy)
}

// TestClusterSlotMigrationUnderHolds holds a lock of every kind in one hash
// slot (names sharing a hash tag) and migrates the slot to another master
// while they are held, as redis-cli --cluster reshard does. At each step —
// the slot MIGRATING/IMPORTING with the keys still on the source, the keys
// moved (the source answers ASK), the slot reassigned (MOVED) — every hold
// is renewed explicitly (Hold.Renew), and another client tries to take each.
// A renewal may fail while the slot is half-way (a script whose keys are
// split between the nodes gets TRYAGAIN), but no hold is told it is lost,
// no other client gets a held lock, and after the migration every hold is
// renewed on the new master. One more lock, unlocked while its key is on the
// target and the slot still the source's, is free afterwards (its release
// went through, or leash's background retry of it did) with a larger token.
func TestClusterSlotMigrationUnderHolds(t *testing.T) {
	const lease = 6 * time.Second
	cl, cc := newReplicatedCluster(t, testserver.ClusterOptions{})
	c := clusterLeash(t, cc, lease, nil)
	// The rival tries once: with the store's retries of TRYAGAIN (about
	// 1.3 s each), the tries of every step would keep the slot half-way
	// past the lease, which the write lock's renewals (TRYAGAIN too) do not
	// survive.
	other, err := leash.New(redisstore.NoTryAgainRetry(redisstore.New(cc, nil)), &leash.Options{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	tag := namesOn(t, cc, "tag", len(cl.Masters), 0, 1)[0]
	slot, err := cc.ClusterKeySlot(bg(t), tag).Result()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range 6 {
		names = append(names, fmt.Sprintf("{%s}/%s/%d", tag, lockName(t), i))
	}
	hs := takeAll(t, c, everyKind(t, names))
	released, err := c.Mutex(names[5]).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	step := func(when string) {
		t.Helper()
		for _, h := range hs {
			if err := h.h.Renew(bg(t)); err != nil {
				t.Logf("%s: renewal of %s: %v", when, h.lock.what, err)
			}
			select {
			case <-h.h.Lost():
				t.Errorf("%s: %s lost: %v", when, h.lock.what, h.h.Err())
			default:
			}
			g, err := h.lock.rival(other)
			switch {
			case err == nil:
				t.Errorf("%s: another client got %s while it was held", when, h.lock.what)
				_ = g.Unlock(bg(t))
			case !errors.Is(err, leash.ErrNotAcquired):
				t.Logf("%s: another client's try of %s: %v", when, h.lock.what, err)
			}
		}
	}
	err = cl.MigrateSlot(int(slot), cl.Masters[0], cl.Masters[1], func(when string) {
		step(when)
		if when == "moved" {
			if err := released.Unlock(bg(t)); err != nil {
				t.Logf("Unlock while the keys are on the target: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	step("migrated")
	for _, h := range hs {
		if err := h.h.Renew(bg(t)); err != nil {
			t.Errorf("migrated: renewal of %s on the new master: %v", h.lock.what, err)
		}
	}
	renewedSince(t, hs, "migrated")
	g, err := other.Mutex(names[5]).Lock(bg(t))
	if err != nil {
		t.Fatalf("the lock unlocked during the migration: %v", err)
	}
	if g.Fence() <= released.Fence() {
		t.Errorf("token %d after the migration, want > %d", g.Fence(), released.Fence())
	}
	_ = g.Unlock(bg(t))
	unlockAll(t, other, hs)
	if m, err := cl.MasterOf(int(slot)); err != nil || m != cl.Masters[1] {
		t.Errorf("slot %d served by %v (%v) after the migration, want master 1", slot, m, err)
	}
}

// TestClusterWaitersWokenAcrossNodes has one client wait for a lock on each
// master, all through its one pub/sub connection, and releases them: by
// leash, and by a raw Redisson-style release (DEL and PUBLISH "0" on the
// lock's channel, which a Cluster forwards to every node). The holders'
// leases are 30s, so a waiter woken by its fallback timer would take about
// that; each is woken by the release.
func TestClusterWaitersWokenAcrossNodes(t *testing.T) {
	cl, cc := newReplicatedCluster(t, testserver.ClusterOptions{})
	holder, waiter := clusterLeash(t, cc, 30*time.Second, nil), clusterLeash(t, cc, 30*time.Second, nil)
	for _, redisson := range []bool{false, true} {
		var names []string
		for i := range cl.Masters {
			names = append(names, namesOn(t, cc, fmt.Sprintf("%s/redisson=%v", lockName(t), redisson), len(cl.Masters), i, 1)[0])
		}
		holds := make([]*leash.Hold, len(names))
		for i, name := range names {
			var err error
			if holds[i], err = holder.Mutex(name).Lock(bg(t)); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]<-chan *leash.Hold, len(names))
		for i, name := range names {
			got[i] = lockAsync(t, waiter, name)
		}
		for _, name := range names {
			channel := "redisson_lock__channel:{" + name + "}"
			waitFor(t, "the waiter's subscription to "+channel, func() bool {
				var subs atomic.Int64 // ForEachMaster asks the masters concurrently
				_ = cc.ForEachMaster(bg(t), func(ctx context.Context, m *redis.Client) error {
					n, err := m.PubSubNumSub(ctx, channel).Result()
					subs.Add(n[channel])
					return err
				})
				return subs.Load() > 0
			})
		}
		released := time.Now()
		for i, name := range names {
			if !redisson {
				if err := holds[i].Unlock(bg(t)); err != nil {
					t.Fatal(err)
				}
				continue
			}
			// The Redisson way, with the hold forgotten by leash first:
			// it was never released by leash, only deleted under it.
			if err := cc.Del(bg(t), name).Err(); err != nil {
				t.Fatal(err)
			}
			if err := cc.Publish(bg(t), "redisson_lock__channel:{"+name+"}", "0").Err(); err != nil {
				t.Fatal(err)
			}
		}
		for i, ch := range got {
			h := <-ch
			if h == nil {
				t.FailNow()
			}
			// Half the fallback is a hang, not a slow machine.
			if d := time.Since(released); d > 15*time.Second {
				t.Errorf("redisson=%v: the waiter on master %d woke %v after the release, want at once", redisson, i, d)
			}
			_ = h.Unlock(bg(t))
		}
	}
}
