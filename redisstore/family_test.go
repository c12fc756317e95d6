package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestFairMutexHandsOffInOrder queues waiters from separate clients and
// checks that they get the lock in arrival order, each woken by the release
// (the queue lease is long, so a refresh timer cannot be what wakes them).
func TestFairMutexHandsOffInOrder(t *testing.T) {
	srv := sharedRedis(t)
	name := lockName(t)
	q := &leash.QueueOptions{QueueLease: 30 * time.Second}
	holder := newClient(t, srv.Addr, nil)
	h, err := holder.FairMutex(name, q).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	type grant struct {
		i  int
		at time.Time
		h  *leash.Hold
	}
	grants := make(chan grant, n)
	for i := range n {
		c := newClient(t, srv.Addr, nil)
		go func() {
			h, err := c.FairMutex(name, q).Lock(bg(t))
			if err != nil {
				t.Error(err)
			}
			grants <- grant{i, time.Now(), h}
		}()
		waitFor(t, "the waiter to queue", func() bool {
			info, err := holder.Inspect(bg(t), name)
			return err == nil && info.Queued == i+1
		})
	}
	released := time.Now()
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	var worst time.Duration
	for want := range n {
		g := <-grants
		if g.h == nil {
			t.FailNow()
		}
		if g.i != want {
			t.Fatalf("grant %d went to waiter %d, want arrival order", want, g.i)
		}
		worst = max(worst, g.at.Sub(released))
		released = time.Now()
		if err := g.h.Unlock(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("worst fair hand-off: %v", worst)
	if worst > 2*time.Second {
		t.Errorf("a hand-off took %v: the head was not woken by the release", worst)
	}
}

// TestFairMutexDeadWaiterLeavesQueue kills a process while it waits in the
// queue. The next waiter must get the lock within one queue lease of the
// release, not wait behind the dead one (Redisson's dead waiters block the
// queue for 5 minutes).
func TestFairMutexDeadWaiterLeavesQueue(t *testing.T) {
	srv := sharedRedis(t)
	name := lockName(t)
	holder := newClient(t, srv.Addr, nil)
	h, err := holder.FairMutex(name, nil).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	dead := startWaiter(t, srv.Addr, name, "fair")
	waitFor(t, "the child to queue", func() bool {
		info, err := holder.Inspect(bg(t), name)
		return err == nil && info.Queued == 1
	})
	c := newClient(t, srv.Addr, nil)
	got := grantedAt(t, func() (*leash.Hold, error) { return c.FairMutex(name, nil).Lock(bg(t)) })
	waitFor(t, "the second waiter to queue", func() bool {
		info, err := holder.Inspect(bg(t), name)
		return err == nil && info.Queued == 2
	})
	if err := dead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	if d := (<-got).Sub(released); d > leash.DefaultQueueLease+time.Second {
		t.Errorf("behind a dead waiter, got the lock %v after the release, want within one queue lease (%v)", d, leash.DefaultQueueLease)
	}
}

// TestCancelledWaiterLeavesNothingForEveryKind cancels a waiting call of
// each kind: no lock, no queue place or writer mark, no subscription remains.
func TestCancelledWaiterLeavesNothingForEveryKind(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	for _, k := range holderKinds {
		t.Run(k.holder, func(t *testing.T) {
			name := lockName(t)
			holder, waiter := newClient(t, srv.Addr, nil), newClient(t, srv.Addr, nil)
			h, err := lockKind(bg(t), holder, k.holder, name)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(bg(t))
			errc := make(chan error, 1)
			go func() {
				_, err := lockKind(ctx, waiter, k.contender, name)
				errc <- err
			}()
			waitFor(t, "the waiter to subscribe", func() bool { return waiters(t, holder, name) == 1 })
			cancel()
			if err := <-errc; !errors.Is(err, leash.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled wait = %v, want ErrNotAcquired and Canceled", err)
			}
			waitFor(t, "the subscription to end", func() bool { return waiters(t, holder, name) == 0 })
			info, err := holder.Inspect(bg(t), name)
			if err != nil || info.Queued != 0 || len(info.Owners) != 1 || info.Owners[0].Owner != h.Owner() {
				t.Fatalf("after the cancelled wait: %+v, %v; want only the holder, nothing queued", info, err)
			}
			if err := h.Unlock(bg(t)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			if n, _ := rdb.Exists(bg(t), name).Result(); n != 0 {
				t.Errorf("key left after the holder's Unlock: the cancelled waiter left a lock")
			}
		})
	}
}

func waiters(t *testing.T, c *leash.Client, name string) int {
	t.Helper()
	info, err := c.Inspect(bg(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return info.Waiters
}

// TestMultiLockOneScript checks that names on one server are taken by one
// script in one round trip (counted with INFO commandstats on a server of
// its own), each with its own token.
func TestMultiLockOneScript(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, nil)
	warm, err := c.MultiLock([]string{"warm/a", "warm/b"}).Lock(bg(t)) // loads the script
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	names := []string{"orders:1", "orders:2", "stock:9", "ledger"}
	before := evalCalls(t, rdb)
	h, err := c.MultiLock(names).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	if calls := evalCalls(t, rdb) - before; calls != 1 {
		t.Errorf("scripts run to take %d names = %d, want 1", len(names), calls)
	}
	seen := map[int64]bool{}
	for _, n := range names {
		owners, _ := rdb.HGetAll(bg(t), n).Result()
		if owners[h.Owner()] != "1" || len(owners) != 1 {
			t.Errorf("%q = %v, want held by the multi-lock", n, owners)
		}
		if f := h.FenceOf(n); f <= 0 || seen[f] {
			t.Errorf("%q token %d, want a fresh token of its own", n, f)
		}
		seen[h.FenceOf(n)] = true
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(bg(t), names...).Result(); n != 0 {
		t.Errorf("%d names still held after Unlock", n)
	}
}

func TestMultiLocksOverlapOnRedis(t *testing.T) {
	srv := sharedRedis(t)
	base := lockName(t)
	n := func(s string) string { return base + "/" + s }
	sets := [][]string{{n("a"), n("b")}, {n("b"), n("c")}, {n("c"), n("a")}, {n("a"), n("b"), n("c")}}
	var (
		wg   sync.WaitGroup
		held sync.Map // name -> *atomic.Int32
	)
	for _, nm := range []string{n("a"), n("b"), n("c")} {
		held.Store(nm, new(atomic.Int32))
	}
	for i, set := range sets {
		c := newClient(t, srv.Addr, nil)
		wg.Go(func() {
			for range 30 {
				h, err := c.MultiLock(set).Lock(bg(t))
				if err != nil {
					t.Error(err)
					return
				}
				for _, nm := range set {
					v, _ := held.Load(nm)
					if v.(*atomic.Int32).Add(1) != 1 {
						t.Errorf("client %d: %q held twice", i, nm)
					}
				}
				time.Sleep(time.Millisecond)
				for _, nm := range set {
					v, _ := held.Load(nm)
					v.(*atomic.Int32).Add(-1)
				}
				if err := h.Unlock(bg(t)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestLingerKeepsChannelBriefly: after its last watcher leaves, a channel
// stays subscribed for the linger, a new watch reuses it without another
// SUBSCRIBE, and it is unsubscribed once the linger has passed.
func TestLingerKeepsChannelBriefly(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	s := redisstore.New(newRDB(t, srv.Addr), &redisstore.Options{Linger: 500 * time.Millisecond})
	t.Cleanup(func() { s.Close() })
	name := lockName(t)
	channel := "redisson_lock__channel:{" + name + "}"
	stop, err := s.Watch(bg(t), leash.KindMutex, name, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if n := numSub(t, rdb, channel); n != 1 {
		t.Fatalf("subscribers right after the last watcher left = %d, want 1 (lingering)", n)
	}
	before := subscribeCalls(t, rdb)
	stop, err = s.Watch(bg(t), leash.KindMutex, name, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if got := subscribeCalls(t, rdb) - before; got != 0 {
		t.Errorf("SUBSCRIBE calls for a watch within the linger = %d, want 0", got)
	}
	stop()
	waitFor(t, "the lingering channel to be unsubscribed", func() bool { return numSub(t, rdb, channel) == 0 })
}

func subscribeCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(info, "cmdstat_subscribe:calls=")
	if !ok {
		return 0
	}
	v, _, _ := strings.Cut(rest, ",")
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// TestDowngradedReaderOutlivesWritersHash gives the writer a shorter lease
// than the reader it downgraded to, so that the lock's hash expires while the
// reader's lease runs: another writer must still be refused.
func TestDowngradedReaderOutlivesWritersHash(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	s := redisstore.New(rdb, nil)
	t.Cleanup(func() { s.Close() })
	name := lockName(t)
	w := leash.Request{Kind: leash.KindWrite, Name: name, Owner: "writer:1", Lease: time.Minute}
	r := leash.Request{Kind: leash.KindRead, Name: name, Owner: "reader:1", Parent: w.Owner, Lease: time.Minute}
	for _, req := range []leash.Request{w, r} {
		if g, err := s.Acquire(bg(t), req); err != nil || !g.Acquired {
			t.Fatalf("Acquire(%s) = %+v, %v", req.Kind, g, err)
		}
	}
	w.Lease = 50 * time.Millisecond // the writer renews with a short lease, then dies
	if res := s.Renew(bg(t), []leash.Request{w}); res[0].Err != nil || res[0].Status != leash.Renewed {
		t.Fatalf("Renew(writer) = %+v", res[0])
	}
	time.Sleep(200 * time.Millisecond)
	if n, _ := rdb.Exists(bg(t), name).Result(); n != 0 {
		t.Fatalf("the lock's hash outlived the writer's lease")
	}
	other := leash.Request{Kind: leash.KindWrite, Name: name, Owner: "writer:2", Lease: time.Minute}
	g, err := s.Acquire(bg(t), other)
	if err != nil || g.Acquired {
		t.Fatalf("another writer's Acquire = %+v, %v while the downgraded reader's lease runs; want refused", g, err)
	}
	if g.Remaining < 50*time.Second {
		t.Errorf("refusal's Remaining = %v, want about the reader's lease (1m)", g.Remaining)
	}
	if _, err := s.Release(bg(t), r, leash.ReleaseAll); err != nil {
		t.Fatalf("Release(reader): %v", err)
	}
	if g, err := s.Acquire(bg(t), other); err != nil || !g.Acquired {
		t.Fatalf("another writer's Acquire after the reader left = %+v, %v; want granted", g, err)
	}
}
