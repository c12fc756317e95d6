package redisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// tryAgainCounter is a go-redis hook on each Cluster node's client that
// counts the replies TRYAGAIN.
type tryAgainCounter struct{ n *atomic.Int64 }

func (h tryAgainCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h tryAgainCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if redis.IsTryAgainError(cmd.Err()) {
			h.n.Add(1)
		}
		return err
	}
}

func (h tryAgainCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestClusterTryAgainRetried takes a fresh lock (TryLock: one acquire, no
// waiting) of a slot half-way through a migration: its script's keys are
// split between the nodes (the slot's restart marker on the source, the
// lock's keys nowhere), so the source answers TRYAGAIN until the migration
// ends. The migration goes on once the node's client counted a TRYAGAIN;
// the store's retries then get the lock on the new master. The negative
// control (NoTryAgainRetry) waits for the TryLock to end before letting the
// migration go on, and it fails with TRYAGAIN.
func TestClusterTryAgainRetried(t *testing.T) {
	cl, _ := newReplicatedCluster(t, testserver.ClusterOptions{})
	// The grace on the node a slot moves to counts from that node's start:
	// wait until every master has run past it (as the Store's view counts,
	// see upFor, beyond the 2 s lease below).
	for _, m := range cl.Masters {
		upFor(t, m, 2*time.Second)
	}
	for i, retry := range []bool{true, false} {
		var tryAgain atomic.Int64
		cc := clusterClient(t, cl) // new: its node clients are made after the hook is set
		cc.OnNewNode(func(node *redis.Client) { node.AddHook(tryAgainCounter{&tryAgain}) })
		s := redisstore.New(cc, nil)
		if !retry {
			redisstore.NoTryAgainRetry(s)
		}
		// A short lease: the slot's restart marker moves to a node it does
		// not name, whose restart grace (the lease of the lock acquired,
		// counted from the node's start) must not be what the test sees.
		c, err := leash.New(s, &leash.Options{Lease: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		tag := namesOn(t, cc, fmt.Sprintf("tag/retry=%v", retry), len(cl.Masters), i, 1)[0]
		name := "{" + tag + "}/" + lockName(t)
		slot, err := cc.ClusterKeySlot(bg(t), name).Result()
		if err != nil {
			t.Fatal(err)
		}
		from, err := cl.MasterOf(int(slot))
		if err != nil {
			t.Fatal(err)
		}
		to := cl.Masters[(i+1)%len(cl.Masters)]
		type result struct {
			h   *leash.Hold
			err error
		}
		got := make(chan result, 1)
		err = cl.MigrateSlot(int(slot), from, to, func(step string) {
			if step != "migrating" {
				return
			}
			go func() {
				h, err := c.Mutex(name).TryLock(bg(t))
				got <- result{h, err}
			}()
			if retry {
				waitFor(t, "a TRYAGAIN", func() bool { return tryAgain.Load() > 0 })
				return
			}
			r := <-got
			got <- r
		})
		if err != nil {
			t.Fatal(err)
		}
		r := <-got
		t.Logf("retry=%v: %d TRYAGAIN replies; TryLock: %v", retry, tryAgain.Load(), r.err)
		switch {
		case retry && r.err != nil:
			t.Errorf("TryLock across a migration: %v, want the lock", r.err)
		case !retry && !redis.IsTryAgainError(r.err):
			t.Errorf("control: TryLock during a migration without retries: %v, want TRYAGAIN: the control shows nothing", r.err)
		}
		if r.h != nil {
			_ = r.h.Unlock(bg(t))
		}
	}
}
