package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
)

// countingStore counts a Store's acquires, and turns its hand-off off when
// handoff is false (as a store without the capability).
type countingStore struct {
	*redisstore.Store
	handoff  bool
	acquires *atomic.Int64
}

func (s countingStore) Handoff() bool { return s.handoff && s.Store.Handoff() }

func (s countingStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	g, err := s.Store.Acquire(ctx, r)
	s.acquires.Add(1) // once answered
	return g, err
}

func countingClient(t *testing.T, addr string, handoff bool, acquires *atomic.Int64, opts *leash.Options) *leash.Client {
	t.Helper()
	s := countingStore{redisstore.New(newRDB(t, addr), nil), handoff, acquires}
	c, err := leash.New(s, opts)
	return testkit.Closing(t, c, err)
}

// TestHandoffWakeUpCarriesGrant: a FairMutex waiter's Lock returns, once the
// holder releases, on the wake-up alone — no acquire after the release —
// with a token above the holder's; the name is then held by the waiter.
//
// A wake-up that overtakes the answer to the waiter's last attempt (the
// holder released while that answer, "held", was on its way, or before the
// waiter read it) is rightly not trusted: the waiter confirms with one more
// acquire. The test cannot see when the waiter has read its answer, so it
// hands off up to five times and wants every hand-off right and at least
// one carried by the wake-up alone; without the hand-off every one needs an
// acquire.
func TestHandoffWakeUpCarriesGrant(t *testing.T) {
	srv := sharedRedis(t)
	var acquires atomic.Int64
	opts := &leash.Options{SafetyMargin: 50 * time.Millisecond}
	holder := countingClient(t, srv.Addr, true, &acquires, opts)
	waiter := countingClient(t, srv.Addr, true, &acquires, opts)
	// The waiter uses a grant untold only while half its short validity is
	// left, counted from its first attempt; a machine that stalled past
	// that makes the waiter confirm with an acquire, which is right too.
	window := (leash.DefaultQueueLease - opts.SafetyMargin) / 2
	var counts []int64
	for round := range 5 {
		name := fmt.Sprintf("%s/%d", lockName(t), round)
		n, took := handOffOnce(t, srv.Addr, holder, waiter, name, &acquires)
		if n > 1 {
			t.Fatalf("round %d: acquires from the release to the waiter's Lock returning = %d, want 0 (the wake-up carries the grant), or 1 (it overtook the answer to the last attempt)", round, n)
		}
		if n == 0 || took >= window {
			return
		}
		counts = append(counts, n)
	}
	t.Errorf("acquires from the release to the waiter's Lock returning, in each of %d hand-offs: %v; want 0 in at least one (the wake-up carries the grant)", len(counts), counts)
}

// handOffOnce has holder take name, waiter wait for it, and holder release
// it; it checks the hand-off (a larger token, the name held by the waiter
// alone in Redisson's layout) and returns how many acquires the waiter made
// after the release, and how long its Lock took.
func handOffOnce(t *testing.T, addr string, holder, waiter *leash.Client, name string, acquires *atomic.Int64) (int64, time.Duration) {
	t.Helper()
	h, err := holder.FairMutex(name, nil).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		h   *leash.Hold
		err error
	}
	got := make(chan result, 1)
	began, from := time.Now(), acquires.Load()
	go func() {
		h, err := waiter.FairMutex(name, nil).Lock(bg(t))
		got <- result{h, err}
	}()
	// The waiter's first attempt takes a place; it then subscribes and tries
	// once more before it sleeps, so that a release in between is not
	// missed. A release before that second attempt answered is picked up by
	// it (one acquire, rightly): unlock only once both attempts have
	// answered.
	for acquires.Load()-from < 2 {
		time.Sleep(time.Millisecond) // polling a condition, not waiting for time
	}
	before := acquires.Load()
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	took := time.Since(began)
	n := acquires.Load() - before
	defer r.h.Unlock(bg(t))
	if r.h.Fence() <= h.Fence() {
		t.Errorf("handed-off token %d, want above the holder's %d", r.h.Fence(), h.Fence())
	}
	info, err := waiter.Inspect(bg(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || len(info.Owners) != 1 || info.Owners[0].Owner != r.h.Owner() || info.Fence != r.h.Fence() {
		t.Errorf("Inspect = %+v, want held by the waiter %q with token %d", info, r.h.Owner(), r.h.Fence())
	}
	// In Redisson's layout, so a Redisson RLock (key absent or its own
	// field) is excluded: it ignores the fair channel and finds the lock held.
	owners, _ := newRDB(t, addr).HGetAll(bg(t), name).Result()
	if len(owners) != 1 || owners[r.h.Owner()] != "1" {
		t.Errorf("lock hash after the hand-off = %v, want only %s -> 1", owners, r.h.Owner())
	}
	return n, took
}

// TestHandoffRoundTrips counts, on a server of its own, what a hot
// FairMutex, and a hot Mutex (whose waiters mark the name: see
// Options.Starvation), cost per grant with the hand-off and without: scripts
// run (INFO commandstats) and acquire calls, with 6 clients taking one name
// 40 times each, hold 0. Every grant is checked for mutual exclusion and a
// growing token. The counts are logged: `go test -run TestHandoffRoundTrips
// -v ./redisstore`.
func TestHandoffRoundTrips(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	kinds := map[string]func(c *leash.Client) locker{
		"fair":  func(c *leash.Client) locker { return c.FairMutex("hot", nil) },
		"mutex": func(c *leash.Client) locker { return c.Mutex("hot") },
	}
	for _, kind := range []string{"fair", "mutex"} {
		for _, handoff := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/handoff=%v", kind, handoff), func(t *testing.T) { handoffRoundTrips(t, kinds[kind], handoff) })
		}
	}
}

// locker is a lock type's Lock.
type locker interface {
	Lock(context.Context) (*leash.Hold, error)
}

// handoffRoundTrips is one run of TestHandoffRoundTrips.
func handoffRoundTrips(t *testing.T, lockerOf func(*leash.Client) locker, handoff bool) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	rdb := newRDB(t, srv.Addr)
	const clients, rounds = 6, 40
	var acquires atomic.Int64
	cs := make([]*leash.Client, clients)
	for i := range cs {
		cs[i] = countingClient(t, srv.Addr, handoff, &acquires, nil)
		// Warm up: scripts loaded, watches made.
		h, err := lockerOf(cs[i]).Lock(bg(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	var (
		inside atomic.Bool
		mu     sync.Mutex
		last   int64
		wg     sync.WaitGroup
		errs   = make(chan error, clients)
	)
	scripts, acq := evalCalls(t, rdb), acquires.Load()
	for _, c := range cs {
		wg.Go(func() {
			m := lockerOf(c)
			for range rounds {
				h, err := m.Lock(bg(t))
				if err != nil {
					errs <- err
					return
				}
				if !inside.CompareAndSwap(false, true) {
					errs <- fmt.Errorf("two holders at once (token %d)", h.Fence())
				}
				mu.Lock()
				if h.Fence() <= last {
					errs <- fmt.Errorf("token %d after %d", h.Fence(), last)
				}
				last = h.Fence()
				mu.Unlock()
				inside.Store(false)
				if err := h.Unlock(bg(t)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	grants := float64(clients * rounds)
	t.Logf("%s: %.2f scripts and %.2f acquires per grant (%d grants)", t.Name(),
		float64(evalCalls(t, rdb)-scripts)/grants, float64(acquires.Load()-acq)/grants, clients*rounds)
}

// TestHandoffRestartGrace: a release on a server restarted from a snapshot
// (which holds the lock and a waiter's place, and the restart marker) hands
// nothing over while the restart grace runs: the lock is freed and the
// waiter, woken, is refused by the grace as any acquire is. The negative
// control (the marker-only rule, which trusts the restored marker) hands the
// lock over at once.
func TestHandoffRestartGrace(t *testing.T) {
	const lease = 2 * time.Second
	for name, markerOnly := range map[string]bool{
		"the grace holds the hand-off back":          false,
		"the marker alone lets it through (control)": true,
	} {
		t.Run(name, func(t *testing.T) {
			srv := testserver.NewRedis(t, testserver.RedisOptions{})
			newStore := func() *redisstore.Store {
				s := redisstore.New(newRDB(t, srv.Addr), nil)
				if markerOnly {
					s = redisstore.MarkerOnly(s)
				}
				return s
			}
			hs, ws := newStore(), newStore()
			holder, err := leash.New(hs, &leash.Options{Lease: lease})
			c := testkit.Closing(t, holder, err)
			h, err := c.FairMutex(lockName(t), nil).Lock(bg(t))
			if err != nil {
				t.Fatal(err)
			}
			waiter := driver.Request{Kind: driver.KindFair, Name: lockName(t), Owner: "0a1b2c3d-0000-4000-8000-000000000009:1",
				Lease: lease, Wait: time.Minute}
			if g, err := ws.Acquire(bg(t), waiter); err != nil || g.Acquired {
				t.Fatalf("waiter's attempt = %+v, %v; want queued", g, err)
			}
			if err := newRDB(t, srv.Addr).Save(bg(t)).Err(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Restart(); err != nil { // SIGKILL, then start from the snapshot
				t.Fatal(err)
			}
			if err := h.Unlock(bg(t)); err != nil {
				t.Fatal(err)
			}
			info, err := hs.Inspect(bg(t), lockName(t))
			if err != nil {
				t.Fatal(err)
			}
			if markerOnly {
				if !info.Held || info.Owners[0].Owner != waiter.Owner {
					t.Fatalf("control: after the release the lock is %+v; want handed to the waiter, or the control proves nothing", info)
				}
				return
			}
			if info.Held {
				t.Errorf("after a release in the restart grace the lock is held by %+v, want free", info.Owners)
			}
			if g, err := ws.Acquire(bg(t), waiter); err != nil || g.Acquired || !g.Grace {
				t.Errorf("the waiter's attempt in the grace = %+v, %v; want refused by the grace", g, err)
			}
		})
	}
}
