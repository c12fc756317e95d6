package leash_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/memstore"
)

// The core's own costs, on memstore (no network): what a change to the
// engine (acquire, release, the watchdog) adds or saves per lock. Run with:
//
//	go test -run '^$' -bench . -benchmem -count 5
//
// redisstore's benchmarks measure the same paths against a real server.

func benchClient(b *testing.B, o *leash.Options) *leash.Client {
	b.Helper()
	c, err := leash.New(memstore.New(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// cpu returns this process's CPU time so far (user + system).
func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLockUnlock is an uncontended Lock+Unlock of each lock type, at 1
// and 16 goroutines, each goroutine on a name of its own.
func BenchmarkLockUnlock(b *testing.B) {
	type lockFunc func(c *leash.Client, name string) func(context.Context) (*leash.Hold, error)
	for _, kind := range []struct {
		name string
		lock lockFunc
	}{
		{"mutex", func(c *leash.Client, n string) func(context.Context) (*leash.Hold, error) { return c.Mutex(n).Lock }},
		{"fair", func(c *leash.Client, n string) func(context.Context) (*leash.Hold, error) {
			return c.FairMutex(n, nil).Lock
		}},
		{"owner", func(c *leash.Client, n string) func(context.Context) (*leash.Hold, error) {
			m := c.Mutex(n)
			return func(ctx context.Context) (*leash.Hold, error) { return m.Lock(leash.WithOwner(ctx, "job")) }
		}},
		{"multi3", func(c *leash.Client, n string) func(context.Context) (*leash.Hold, error) {
			return c.MultiLock([]string{n + "/a", n + "/b", n + "/c"}).Lock
		}},
	} {
		for _, par := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", kind.name, par), func(b *testing.B) {
				c := benchClient(b, nil)
				ctx := context.Background()
				var id atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				testkit.Loop(par, b.N, func(next func() bool) {
					lock := kind.lock(c, fmt.Sprintf("bench/uncontended/%d", id.Add(1)))
					for next() {
						h, err := lock(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						if err := h.Unlock(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkHeldLockMemory holds b.N locks and reports the heap per held
// lock, memstore's share included.
func BenchmarkHeldLockMemory(b *testing.B) {
	c := benchClient(b, nil)
	ctx := context.Background()
	names := make([]*leash.Mutex, b.N)
	for i := range names {
		names[i] = c.Mutex(fmt.Sprintf("bench/held/%d", i))
	}
	holds := make([]*leash.Hold, b.N)
	before := testkit.MarkHeap()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range holds {
		h, err := names[i].Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		holds[i] = h
	}
	b.StopTimer()
	testkit.ReportHeldHeap(b, before, testkit.MarkHeap(), b.N)
	testkit.ProfileHeld(b)
	for _, h := range holds {
		_ = h.Unlock(ctx)
	}
	runtime.KeepAlive(names)
}

// roundCounter counts the watchdog's renewal rounds.
type roundCounter struct {
	rounds chan int
}

func (r roundCounter) Observe(e leash.Event) {
	if e.Op == leash.OpRenewed {
		select {
		case r.rounds <- e.Locks:
		default:
		}
	}
}

// BenchmarkWatchdog holds 10,000 locks and lets the watchdog renew them: an
// op is one renewal round. It reports the process's CPU time per round (the
// scheduler's bookkeeping plus memstore's Renew) and per lock renewed; ns/op
// is mostly the renew interval.
func BenchmarkWatchdog(b *testing.B) {
	const n = 10_000
	rc := roundCounter{rounds: make(chan int, 1024)}
	c := benchClient(b, &leash.Options{Lease: 600 * time.Millisecond, RenewInterval: 20 * time.Millisecond, Observer: rc})
	ctx := context.Background()
	holds := make([]*leash.Hold, n)
	for i := range holds {
		h, err := c.Mutex(fmt.Sprintf("bench/watchdog/%d", i)).Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		holds[i] = h
	}
	// Let the cohorts merge into one (see renew.go) before measuring.
	for locks := 0; locks < n; {
		locks = <-rc.rounds
	}
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpu()
	renewed := 0
	for range b.N {
		renewed += <-rc.rounds
	}
	b.StopTimer()
	d := cpu() - c0
	b.ReportMetric(float64(d.Microseconds())/float64(b.N), "cpu-µs/round")
	b.ReportMetric(float64(d.Nanoseconds())/float64(max(renewed, 1)), "cpu-ns/lock")
	for _, h := range holds {
		if err := h.Err(); err != nil {
			b.Fatal(err)
		}
		_ = h.Unlock(ctx)
	}
}

// BenchmarkContention has 16 goroutines, each with its own Client, take one
// lock in turn and hold it for no time: ns/op is the cost of a hand-off
// (release, wake-up, the next acquire).
func BenchmarkContention(b *testing.B) {
	for _, kind := range []string{"mutex", "fair"} {
		b.Run(kind, func(b *testing.B) {
			const workers = 16
			s := memstore.New()
			clients := make([]*leash.Client, workers)
			for i := range clients {
				c, err := leash.New(s, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { c.Close() })
				clients[i] = c
			}
			ctx := context.Background()
			var (
				left    atomic.Int64
				holders atomic.Int32
				wg      sync.WaitGroup
			)
			left.Store(int64(b.N))
			b.ReportAllocs()
			b.ResetTimer()
			for _, c := range clients {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						var (
							h   *leash.Hold
							err error
						)
						if kind == "fair" {
							h, err = c.FairMutex("bench/contention", nil).Lock(ctx)
						} else {
							h, err = c.Mutex("bench/contention").Lock(ctx)
						}
						if err != nil {
							b.Error(err)
							return
						}
						if holders.Add(1) != 1 {
							b.Error("two holders at once")
						}
						holders.Add(-1)
						if err := h.Unlock(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
