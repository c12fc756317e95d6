package redisstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
)

// answeredStore counts the acquires a Store has answered (after the reply).
type answeredStore struct {
	*redisstore.Store
	answered *atomic.Int64
}

func (s answeredStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	g, err := s.Store.Acquire(ctx, r)
	s.answered.Add(1)
	return g, err
}

// TestGuardedWaiterIgnoresHandoff: a Client whose Store has
// the replication guard on (so its Handoff() is false and its own releases
// never hand off) still takes a hand-off grant from another Client's
// release straight from the wake-up, with no acquire and no WAIT. With the
// replica not acknowledging, the guarded Lock must fail (ErrNotReplicated)
// or at least not return a hold; and after a failover to the replica, the
// name must not be grantable to anyone else while the guarded hold is
// valid.
func TestGuardedWaiterIgnoresHandoff(t *testing.T) {
	primary := testserver.NewRedis(t, testserver.RedisOptions{})
	replica := testserver.NewReplica(t, primary.Addr)
	name := lockName(t)

	// The releaser: no guard (hand-off on); a short lease, so that its
	// copy on the replica (whose release never got there) lapses soon.
	plain := newClient(t, primary.Addr, &leash.Options{Lease: 600 * time.Millisecond})
	// The waiter: guard on, answered acquires counted.
	var answered atomic.Int64
	gs := answeredStore{redisstore.New(newRDB(t, primary.Addr), &redisstore.Options{Replicas: 1, ReplicaTimeout: 200 * time.Millisecond}), &answered}
	if gs.Handoff() {
		t.Fatal("a guarded Store reports Handoff() = true")
	}
	guarded, err := leash.New(gs, &leash.Options{SafetyMargin: 50 * time.Millisecond})
	guarded = testkit.Closing(t, guarded, err)

	h, err := plain.FairMutex(name, nil).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	// Cut the replica off (as a partition would): it keeps what it has and
	// hears nothing more, so no WAIT is acknowledged from now on.
	onReplica := newRDB(t, replica.Addr)
	for {
		if n, _ := onReplica.Exists(bg(t), name).Result(); n == 1 {
			break
		}
		time.Sleep(time.Millisecond) // polling a condition: the holder's grant replicated
	}
	if err := onReplica.Do(bg(t), "replicaof", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	type result struct {
		h   *leash.Hold
		err error
	}
	got := make(chan result, 1)
	go func() {
		h, err := guarded.FairMutex(name, nil).Lock(bg(t))
		got <- result{h, err}
	}()
	// First attempt takes a place, second one (after subscribing) answered:
	// the waiter sleeps on its watch.
	for answered.Load() < 2 {
		time.Sleep(time.Millisecond) // polling a condition
	}
	before := answered.Load()
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		if errors.Is(r.err, redisstore.ErrNotReplicated) {
			t.Skipf("the waiter's attempt picked the grant up and the guard refused it (right): %v", r.err)
		}
		t.Fatal(r.err)
	}
	t.Errorf("guarded FairMutex.Lock returned a hold (token %d) with its only replica cut off; %d acquires answered after the release (0: taken from the wake-up, never WAITed for)",
		r.h.Fence(), answered.Load()-before)

	// The consequence: the primary dies before the paused replica got the
	// grant; the replica is promoted; another client takes the name while
	// the guarded holder still believes it holds.
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := onReplica.Do(bg(t), "replicaof", "no", "one").Err(); err != nil {
		t.Fatalf("promote the replica: %v", err)
	}
	// The restart grace (on by default) would refuse every grant on the
	// promoted replica for a lease; a deployment that turns it off
	// (appendfsync always, see Options.RestartGrace) has the guard as its
	// only protection against a failover, which is the case shown.
	for _, kv := range [][2]string{{"appendonly", "yes"}, {"appendfsync", "always"}} {
		if err := newRDB(t, replica.Addr).ConfigSet(bg(t), kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	oc, err := leash.New(redisstore.New(newRDB(t, replica.Addr), &redisstore.Options{RestartGrace: redisstore.NoRestartGrace}), nil)
	oc = testkit.Closing(t, oc, err)
	var other *leash.Hold
	for {
		other, err = oc.FairMutex(name, nil).TryLock(bg(t))
		if err == nil || time.Now().After(r.h.ValidUntil()) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling a condition: the old holder's copy lapsing
	}
	if err == nil {
		if vu := r.h.ValidUntil(); time.Now().Before(vu) && r.h.Context().Err() == nil {
			t.Errorf("two holders: %s holds on the promoted replica (token %d) while the guarded holder's validity runs %v more",
				other.Owner(), other.Fence(), time.Until(vu))
		}
	} else {
		t.Logf("TryLock on the promoted replica: %v", err)
	}
}
