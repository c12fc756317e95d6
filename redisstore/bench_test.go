package redisstore_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// Run with:
//
//	cd redisstore && go test -run '^$' -bench . -benchmem
//
// Each benchmark starts its own redis-server (no persistence) on loopback.

func benchRedis(b *testing.B) (*testserver.Redis, *redis.Client) {
	b.Helper()
	srv := testserver.NewRedis(b, testserver.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 128})
	b.Cleanup(func() { rdb.Close() })
	return srv, rdb
}

func benchClient(b *testing.B, rdb redis.UniversalClient, opts *leash.Options) *leash.Client {
	b.Helper()
	c, err := leash.New(redisstore.New(rdb, nil), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// cpuPerOp reports, per operation of the benchmark's timed loop, the CPU
// time redis-server spent and the CPU time this process spent (getrusage):
// on a machine where both share the cores, their sum is what bounds
// throughput. Call it after the set-up and before the loop; call the
// returned function when the loop ends.
func cpuPerOp(b *testing.B, srv *testserver.Redis) func() {
	b.Helper()
	server := func() time.Duration {
		d, err := srv.CPU()
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	client := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	s0, c0 := server(), client()
	return func() {
		c1 := client() // before the INFO round trip
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
		b.ReportMetric(per(server()-s0), "redis-cpu-µs/op")
		b.ReportMetric(per(c1-c0), "client-cpu-µs/op")
	}
}

// benchUncontended runs a Lock+Unlock loop at 1, 16 and 64 goroutines, each
// goroutine on a name of its own, through one client per sub-benchmark, and
// reports the CPU per operation. setup makes, on a fresh server, what each
// goroutine builds from its name: its Lock+Unlock.
func benchUncontended(b *testing.B, setup func(b *testing.B, rdb *redis.Client) func(name string) func(context.Context) error) {
	for _, par := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", par), func(b *testing.B) {
			srv, rdb := benchRedis(b)
			lockUnlock := setup(b, rdb)
			ctx := context.Background()
			var id atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			done := cpuPerOp(b, srv)
			testkit.Loop(par, b.N, func(next func() bool) {
				op := lockUnlock(fmt.Sprintf("bench/uncontended/%d", id.Add(1)))
				for next() {
					if err := op(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			done()
		})
	}
}

// BenchmarkLockUnlock is an uncontended Lock+Unlock: two round trips. The
// parallel variants give each goroutine its own lock name.
func BenchmarkLockUnlock(b *testing.B) {
	benchUncontended(b, func(b *testing.B, rdb *redis.Client) func(string) func(context.Context) error {
		c := benchClient(b, rdb, nil)
		return func(name string) func(context.Context) error {
			m := c.Mutex(name)
			return func(ctx context.Context) error {
				h, err := m.Lock(ctx)
				if err != nil {
					return err
				}
				return h.Unlock(ctx)
			}
		}
	})
}

// BenchmarkBaselineSetNX is the peers' pattern, for comparison with
// BenchmarkLockUnlock on the same machine: SET NX PX to lock, a GET-and-DEL
// script to unlock, no fencing token, restart grace, wake-up or retry latch.
func BenchmarkBaselineSetNX(b *testing.B) {
	unlock := redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)
	benchUncontended(b, func(b *testing.B, rdb *redis.Client) func(string) func(context.Context) error {
		return func(key string) func(context.Context) error {
			return func(ctx context.Context) error {
				if ok, err := rdb.SetNX(ctx, key, "owner", 30*time.Second).Result(); err != nil || !ok {
					return fmt.Errorf("SET NX = %v, %v", ok, err)
				}
				return unlock.Run(ctx, rdb, []string{key}, "owner").Err()
			}
		}
	})
}

// BenchmarkHeldLockMemory holds b.N locks and reports the client heap per
// held lock (the store's connection pool is shared and excluded).
func BenchmarkHeldLockMemory(b *testing.B) {
	_, rdb := benchRedis(b)
	c := benchClient(b, rdb, nil)
	ctx := context.Background()
	names := make([]*leash.Mutex, b.N)
	for i := range names {
		names[i] = c.Mutex(fmt.Sprintf("bench/held/%d", i))
	}
	holds := make([]*leash.Hold, b.N)
	// Warm the pool and the scheduler before measuring.
	if h, err := c.Mutex("bench/warm").Lock(ctx); err == nil {
		_ = h.Unlock(ctx)
	}
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
	b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
	for _, h := range holds {
		_ = h.Unlock(ctx)
	}
	runtime.KeepAlive(names)
}

// BenchmarkRenew100k renews 100,000 held locks in one Store.Renew call, as
// the watchdog does once per interval: 200 scripts of 500 locks, pipelined in
// one round trip. ns/op is the time of one whole renewal round.
func BenchmarkRenew100k(b *testing.B) {
	const n = 100_000
	_, rdb := benchRedis(b)
	s := redisstore.New(rdb, nil)
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	reqs := make([]driver.Request, n)
	pipe := rdb.Pipeline()
	for i := range reqs {
		reqs[i] = driver.Request{Name: fmt.Sprintf("bench/renew/%d", i), Owner: "00000000-0000-4000-8000-000000000007:1", Lease: 30 * time.Second}
		pipe.HSet(ctx, reqs[i].Name, "00000000-0000-4000-8000-000000000007:1", 1)
		pipe.PExpire(ctx, reqs[i].Name, 30*time.Second)
		if i%5000 == 4999 {
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	s.Renew(ctx, reqs[:1]) // load the script, so no round pays for NOSCRIPT
	before := evalCalls(b, rdb)
	b.ResetTimer()
	for range b.N {
		for i, r := range s.Renew(ctx, reqs) {
			if r.Err != nil || r.Status != driver.Renewed {
				b.Fatalf("lock %d: %+v", i, r)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(evalCalls(b, rdb)-before)/float64(b.N), "scripts/round")
}

// BenchmarkContention has 16 goroutines, each with its own Client (as
// separate instances would have), take one lock in turn and hold it 0 or
// 1ms. It reports grants per second and the wait for the lock at p50, p99 and
// max. With hold 0, ns/op is the cost of a hand-off: release, wake-up by
// pub/sub, and the next acquire. With FIFO hand-off the longest wait is about
// (waiters-1) × the time per grant; herds and polling show far longer tails.
//
//	cd redisstore && go test -run '^$' -bench Contention -benchtime 2000x -count 5
func BenchmarkContention(b *testing.B) {
	for _, tc := range []struct {
		kind string
		hold time.Duration
	}{{"mutex", 0}, {"fair", 0}, {"mutex", time.Millisecond}, {"fair", time.Millisecond}} {
		kind := tc.kind
		b.Run(fmt.Sprintf("%s/hold=%v", kind, tc.hold), func(b *testing.B) {
			_, rdb := benchRedis(b)
			const workers = 16
			clients := make([]*leash.Client, workers)
			for i := range clients {
				clients[i] = benchClient(b, rdb, nil)
			}
			ctx := context.Background()
			var (
				left    atomic.Int64
				holders atomic.Int32
				mu      sync.Mutex
				waits   = make([]time.Duration, 0, b.N)
				wg      sync.WaitGroup
			)
			left.Store(int64(b.N))
			b.ResetTimer()
			for _, c := range clients {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						asked := time.Now()
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
						wait := time.Since(asked)
						if holders.Add(1) != 1 {
							b.Error("two holders at once")
						}
						if tc.hold > 0 {
							time.Sleep(tc.hold)
						}
						holders.Add(-1)
						if err := h.Unlock(ctx); err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						waits = append(waits, wait)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(waits)
			pct := func(p float64) float64 { return float64(waits[int(p*float64(len(waits)-1))]) / 1e6 }
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "grants/s")
			b.ReportMetric(pct(0.50), "wait-p50-ms")
			b.ReportMetric(pct(0.99), "wait-p99-ms")
			b.ReportMetric(pct(1), "wait-max-ms")
		})
	}
}

// BenchmarkJobTick measures what one tick of a scheduled job costs the
// store, beside its run lock's Lock+Unlock: the claim that wins (granted,
// with its record), the end recorded, and the claims of two more instances
// that find the tick taken. 64 goroutines each run a job of their own, one
// tick per op.
//
//	cd redisstore && go test -run '^$' -bench JobTick -benchtime 20000x
func BenchmarkJobTick(b *testing.B) {
	srv, rdb := benchRedis(b)
	s := redisstore.New(rdb, nil)
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	base := time.UnixMilli(time.Now().Add(-time.Hour).UnixMilli())
	var id atomic.Int64
	b.SetParallelism(max(64/runtime.GOMAXPROCS(0), 1))
	b.ReportAllocs()
	b.ResetTimer()
	done := cpuPerOp(b, srv)
	b.RunParallel(func(pb *testing.PB) {
		job := fmt.Sprintf("bench/job/%d", id.Add(1))
		run := driver.RunRecord{Host: "bench", PID: 1, Client: "00000000-0000-4000-8000-000000000001"}
		for i := 0; pb.Next(); i++ {
			c := driver.TickClaim{Job: job, Tick: base.Add(time.Duration(i) * time.Millisecond), Attempt: 1, Run: run}
			for k := range 3 {
				r, err := s.ClaimTick(ctx, c)
				if err != nil || (k == 0) != (r.Status == driver.ClaimGranted) {
					b.Errorf("claim %d of tick %d: %v, %v", k, i, r.Status, err)
					return
				}
			}
			if err := s.EndRun(ctx, driver.RunEnd{Job: job, Tick: c.Tick, Attempt: 1, Client: run.Client, Outcome: driver.OutcomeOK}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	done()
}

// BenchmarkScriptCost takes b.N locks on free names, then releases them,
// and reports what Redis says each script call cost it (INFO commandstats:
// the microseconds it spent in EVALSHA, per call), for the acquire and the
// release apart, and per Lock+Unlock: the server's share of an uncontended
// lock, without the network or the client.
//
//	cd redisstore && go test -run '^$' -bench ScriptCost -benchtime 20000x
func BenchmarkScriptCost(b *testing.B) {
	_, rdb := benchRedis(b)
	c := benchClient(b, rdb, nil)
	ctx := context.Background()
	if h, err := c.Mutex("bench/warm").Lock(ctx); err == nil { // load the scripts
		_ = h.Unlock(ctx)
	}
	holds := make([]*leash.Hold, b.N)
	b.ResetTimer()
	u0 := evalStat(b, rdb, "usec")
	for i := range holds {
		h, err := c.Mutex(fmt.Sprintf("bench/cost/%d", i)).Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		holds[i] = h
	}
	u1 := evalStat(b, rdb, "usec")
	for _, h := range holds {
		if err := h.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	u2 := evalStat(b, rdb, "usec")
	b.StopTimer()
	b.ReportMetric((u1-u0)/float64(b.N), "acquire-redis-µs/call")
	b.ReportMetric((u2-u1)/float64(b.N), "release-redis-µs/call")
	b.ReportMetric((u2-u0)/float64(b.N), "redis-µs/lock")
}

// BenchmarkForceUnlockTold measures a force unlock (revocation) of a lock
// held by another Client: ns/op is the whole cycle (Lock, ForceUnlock, the
// holder told, the name free again); told-µs is the time from the start of
// ForceUnlock to the holder's Lost firing, and free-µs to the waiting
// third Client's grant (after the holder's acknowledgement).
func BenchmarkForceUnlockTold(b *testing.B) {
	_, rdb := benchRedis(b)
	holder := benchClient(b, rdb, &leash.Options{Lease: time.Minute})
	op := benchClient(b, rdb, nil)
	waiter := benchClient(b, rdb, &leash.Options{Lease: time.Minute})
	ctx := context.Background()
	name := "bench/revoke"
	var told, free time.Duration
	listening := false
	for b.Loop() {
		h, err := holder.Mutex(name).Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if !listening { // the holder's Client listens from its first grant on
			ch := "leash_revoke__channel:" + holder.ID()
			for {
				if m, _ := rdb.PubSubNumSub(ctx, ch).Result(); m[ch] == 1 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			listening = true
		}
		got := make(chan time.Time, 1)
		go func() {
			wh, err := waiter.Mutex(name).Lock(ctx)
			if err != nil {
				b.Error(err)
				got <- time.Time{}
				return
			}
			got <- time.Now()
			_ = wh.Unlock(ctx)
		}()
		for { // the waiter has tried once and watches
			if m, _ := rdb.PubSubNumSub(ctx, "redisson_lock__channel:{"+name+"}").Result(); m["redisson_lock__channel:{"+name+"}"] >= 1 {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		start := time.Now()
		if _, err := op.ForceUnlock(ctx, name); err != nil {
			b.Fatal(err)
		}
		<-h.Lost()
		told += time.Since(start)
		free += (<-got).Sub(start)
	}
	b.ReportMetric(float64(told.Microseconds())/float64(b.N), "told-µs")
	b.ReportMetric(float64(free.Microseconds())/float64(b.N), "free-µs")
}
