package scenario_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestMutexStarvation: many clients take one hot name in a loop. Every grant
// is checked for mutual exclusion (a compare-and-swap on the holder, and
// fencing tokens that grow from grant to grant), and the starvation mode is
// checked in behaviour terms: once a waiting Lock reports itself starving
// (leash.OpStarving, sent after its first attempt with a mark), at most
// clients − 1 other grants may come before its own, one per other client:
// a grant made before the mark but reported after it, or a grant to a mark
// made before it; a client granted once then finds the mark and queues
// behind it, and one granted before the mark used up its own. The negative
// control runs the same loop on a store that claims the mode but ignores the
// marks (the Mutex as it was): the checker must catch a waiter overtaken
// more often than that.
func TestMutexStarvation(t *testing.T) {
	const clients = 8
	stores := []struct {
		name string
		open func(t *testing.T) func() driver.Store
	}{
		{"memstore", func(t *testing.T) func() driver.Store {
			s := memstore.New()
			return func() driver.Store { return s }
		}},
		{"redis", func(t *testing.T) func() driver.Store {
			srv := testserver.NewRedis(t, testserver.RedisOptions{})
			return func() driver.Store {
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
				s := redisstore.New(rdb, nil)
				t.Cleanup(func() { s.Close(); rdb.Close() })
				return s
			}
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			open := st.open(t)
			t.Run("starvation mode", func(t *testing.T) {
				r := hotName(t, open, clients, false, 1500)
				t.Logf("%d grants, %d starving waits, most grants to others after a waiter starved: %d (bound %d)",
					r.grants, r.starved, r.overtaken, clients-1)
				if r.starved == 0 {
					t.Fatalf("no waiter starved in %d grants: the run did not test the mode", r.grants)
				}
				if r.overtaken > clients-1 {
					t.Errorf("a starving waiter was overtaken %d times, more than the %d the marks allow", r.overtaken, clients-1)
				}
			})
			t.Run("negative control: marks ignored", func(t *testing.T) {
				r := hotName(t, func() driver.Store { return marksIgnored{open()} }, clients, true, 20000)
				t.Logf("%d grants, %d starving waits, most grants to others after a waiter starved: %d (bound %d)",
					r.grants, r.starved, r.overtaken, clients-1)
				if r.overtaken <= clients-1 {
					t.Errorf("the checker caught no overtaken waiter in %d grants without the marks", r.grants)
				}
			})
		})
	}
}

// hotRun is what the checker found in one run.
type hotRun struct {
	grants    int
	starved   int // Lock calls that reported starving
	overtaken int // the most grants to others after a call's OpStarving, before its own grant
}

// hotName runs clients, each with its own leash Client on a store from open,
// taking one name in a loop until grants grants were made, or, with
// untilCaught, until a waiter was overtaken more than clients − 1 times.
func hotName(t *testing.T, open func() driver.Store, clients int, untilCaught bool, grants int) hotRun {
	name := fmt.Sprintf("starve/%d", time.Now().UnixNano())
	var (
		mu      sync.Mutex
		res     hotRun
		since   = make([]int, clients) // per client: grants to others since it starved; -1 when not starving
		holder  atomic.Int64           // client+1 of the holder, 0 when free
		fence   int64                  // the last grant's token, under mu
		stop    atomic.Bool
		failure atomic.Pointer[string]
		wg      sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		failure.CompareAndSwap(nil, &msg)
		stop.Store(true)
	}
	// event is every client's observer: one global order of grants and
	// starvations, each call identified by its client (one call at a time).
	event := func(id int, e leash.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Op {
		case leash.OpStarving:
			res.starved++
			since[id] = 0
		case leash.OpAcquired:
			res.grants++
			for j := range since {
				if j != id && since[j] >= 0 {
					since[j]++
					res.overtaken = max(res.overtaken, since[j])
				}
			}
			since[id] = -1
			if res.grants >= grants || (untilCaught && res.overtaken > clients-1) {
				stop.Store(true)
			}
		}
	}
	for i := range since {
		since[i] = -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for id := range clients {
		c, err := leash.New(open(), &leash.Options{
			Observer: leash.ObserverFunc(func(e leash.Event) { event(id, e) }),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		m := c.Mutex(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				h, err := m.Lock(ctx)
				if err != nil {
					fail("client %d: Lock: %v", id, err)
					return
				}
				if !holder.CompareAndSwap(0, int64(id+1)) {
					fail("MUTUAL EXCLUSION VIOLATED: client %d granted while client %d holds", id, holder.Load()-1)
				}
				mu.Lock()
				if h.Fence() <= fence {
					fail("fencing token %d granted after %d", h.Fence(), fence)
				}
				fence = h.Fence()
				mu.Unlock()
				time.Sleep(100 * time.Microsecond) // the work under the lock
				if !holder.CompareAndSwap(int64(id+1), 0) {
					fail("MUTUAL EXCLUSION VIOLATED: client %d's hold overlapped client %d's", id, holder.Load()-1)
				}
				if err := h.Unlock(ctx); err != nil {
					fail("client %d: Unlock: %v", id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if msg := failure.Load(); msg != nil {
		t.Fatal(*msg)
	}
	return res
}

// marksIgnored is a store that claims the starvation mode but ignores the
// marks: a starving waiter's attempts reach the store as plain Mutex
// attempts. It is the negative control of TestMutexStarvation.
type marksIgnored struct{ s driver.Store }

func (m marksIgnored) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if r.Kind == driver.KindMutex {
		r.Wait = 0
	}
	return m.s.Acquire(ctx, r)
}

func (m marksIgnored) Renew(ctx context.Context, rs []driver.Request) []driver.RenewResult {
	return m.s.Renew(ctx, rs)
}

func (m marksIgnored) Release(ctx context.Context, r driver.Request) error {
	return m.s.Release(ctx, r)
}

func (m marksIgnored) Watch(ctx context.Context, kind driver.Kind, name string, wake func(driver.Wake)) (func(), error) {
	return m.s.(driver.Watcher).Watch(ctx, kind, name, wake)
}

func (m marksIgnored) WatchClient(ctx context.Context, kind driver.Kind, name, client string, wake func(driver.Wake)) (func(), error) {
	return driver.WatchClient(ctx, m.s.(driver.Watcher), kind, name, client, wake)
}

func (m marksIgnored) Withdraw(ctx context.Context, r driver.Request) error {
	return m.s.(driver.Withdrawer).Withdraw(ctx, r)
}

func (marksIgnored) Starvation() bool { return true }
