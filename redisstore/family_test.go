package redisstore_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestFairMutexHandsOffInOrder queues waiters from separate clients and
// checks that they get the lock in arrival order, each woken by the release:
// a waiter whose wake-up was lost would take its grant at its next attempt,
// which on a store that hands off comes within 1.5 s whatever the (long)
// queue lease, so a hand-off slower than a second was not the release's.
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
	if worst > time.Second {
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
	if err := dead.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	// Slack for a slow machine; Redisson-style blocking would be minutes.
	if d := (<-got).Sub(released); d > leash.DefaultQueueLease+10*time.Second {
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
			// A starving Mutex waiter watches the fair channel too.
			waitFor(t, "the waiter to subscribe", func() bool { return waiters(t, holder, name) >= 1 })
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
	stop, err := s.Watch(bg(t), driver.KindMutex, name, func(driver.Wake) {})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if n := numSub(t, rdb, channel); n != 1 {
		t.Fatalf("subscribers right after the last watcher left = %d, want 1 (lingering)", n)
	}
	before := subscribeCalls(t, rdb)
	stop, err = s.Watch(bg(t), driver.KindMutex, name, func(driver.Wake) {})
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

// downgraded returns a store and a lock on it that writer w took holds times
// (with a minute's lease) and then downgraded to reader r, with r's lease.
func downgraded(t *testing.T, holds int, readLease time.Duration) (s *redisstore.Store, rdb *redis.Client, w, r driver.Request) {
	t.Helper()
	rdb = newRDB(t, sharedRedis(t).Addr)
	s = redisstore.New(rdb, nil)
	t.Cleanup(func() { s.Close() })
	name := lockName(t)
	w = driver.Request{Kind: driver.KindWrite, Name: name, Owner: "00000000-0000-4000-8000-000000000002:1", Lease: time.Minute}
	r = driver.Request{Kind: driver.KindRead, Name: name, Owner: "00000000-0000-4000-8000-000000000003:1", Parent: w.Owner, Lease: readLease}
	for _, req := range append(slices.Repeat([]driver.Request{w}, holds), r) {
		if g, err := s.Acquire(bg(t), req); err != nil || !g.Acquired {
			t.Fatalf("Acquire(%s) = %+v, %v", req.Kind, g, err)
		}
	}
	return s, rdb, w, r
}

// TestDowngradedReaderKeepsTheHash gives the writer a shorter lease than the
// reader it downgraded to (a short renewal, as UnlockAfter makes), then lets
// the writer die: the lock's hash must last as long as the reader's lease, so
// that neither another writer nor a Mutex (nor a Redisson RLock) on the name is
// granted beside the reader. Before the writer's renewal kept the hash as long
// as its readers, the hash expired with the writer's lease and a Mutex was
// granted at once.
func TestDowngradedReaderKeepsTheHash(t *testing.T) {
	s, rdb, w, r := downgraded(t, 1, 2*time.Second)
	name := w.Name
	w.Lease = 50 * time.Millisecond // the writer renews with a short lease, then dies
	if res := s.Renew(bg(t), []driver.Request{w}); res[0].Err != nil || res[0].Status != driver.Renewed {
		t.Fatalf("Renew(writer) = %+v", res[0])
	}
	time.Sleep(200 * time.Millisecond)
	if ttl, _ := rdb.PTTL(bg(t), name).Result(); ttl < time.Second {
		t.Fatalf("the lock's hash has %v left 200ms after the writer's 50ms renewal; want the reader's lease (about 1.8s)", ttl)
	}
	others := []driver.Request{
		{Kind: driver.KindWrite, Name: name, Owner: "writer:2", Lease: time.Minute},
		{Kind: driver.KindMutex, Name: name, Owner: "00000000-0000-4000-8000-000000000004:1", Lease: time.Minute},
	}
	for _, o := range others {
		g, err := s.Acquire(bg(t), o)
		if err != nil || g.Acquired {
			t.Fatalf("%s Acquire = %+v, %v while the downgraded reader's lease runs; want refused", o.Kind, g, err)
		}
		if g.Remaining < time.Second {
			t.Errorf("%s refusal's Remaining = %v, want about the reader's lease (1.8s)", o.Kind, g.Remaining)
		}
	}
	// The reader goes on renewing: the hash goes on covering it.
	time.Sleep(time.Second)
	if res := s.Renew(bg(t), []driver.Request{r}); res[0].Err != nil || res[0].Status != driver.Renewed {
		t.Fatalf("Renew(reader) = %+v", res[0])
	}
	if g, err := s.Acquire(bg(t), others[1]); err != nil || g.Acquired {
		t.Fatalf("Mutex Acquire after the reader renewed = %+v, %v; want refused", g, err)
	}
	if err := s.Release(bg(t), r); err != nil {
		t.Fatalf("Release(reader): %v", err)
	}
	// The dead writer's field stays until the reader's last lease would have
	// ended (at most one lease, as for any crashed holder), then everything frees.
	deadline := time.Now().Add(5 * time.Second)
	for _, o := range others {
		for {
			g, err := s.Acquire(bg(t), o)
			if err != nil {
				t.Fatalf("%s Acquire after the reader left: %v", o.Kind, err)
			}
			if g.Acquired {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s Acquire still refused 5s after a 2s reader lease ended: %+v", o.Kind, g)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := s.Release(bg(t), o); err != nil {
			t.Fatalf("Release(%s): %v", o.Kind, err)
		}
	}
}

// TestWriterReleaseOneKeepsReaders drops one of a writer's two holds after it
// downgraded: the lease it re-applies must not end the hash under the reader.
func TestWriterReleaseOneKeepsReaders(t *testing.T) {
	s, rdb, w, _ := downgraded(t, 2, time.Minute)
	name := w.Name
	w.Lease = 50 * time.Millisecond
	if freed, err := s.ReleaseOne(bg(t), w); err != nil || freed {
		t.Fatalf("ReleaseOne(writer) = %v, %v; want still held", freed, err)
	}
	if ttl, _ := rdb.PTTL(bg(t), name).Result(); ttl < 50*time.Second {
		t.Fatalf("after ReleaseOne with a 50ms lease the hash has %v left; want the reader's lease (1m)", ttl)
	}
}
