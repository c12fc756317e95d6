package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/mysqlstore"
)

// Run with:
//
//	cd mysqlstore && go test -run '^$' -bench . -benchtime 2s
//
// The benchmarks use the package's MariaDB (loopback, its own data
// directory, innodb_flush_log_at_trx_commit=2).

func benchClient(b *testing.B, db *sql.DB, opts *leash.Options) *leash.Client {
	b.Helper()
	s := mysqlstore.New(db, nil)
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	c, err := leash.New(s, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkLockUnlock is an uncontended Lock+Unlock through leash.Client:
// two round trips (one CALL, one UPDATE). The parallel variant gives each
// goroutine its own lock name.
func BenchmarkLockUnlock(b *testing.B) {
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("goroutines=%d", par), func(b *testing.B) {
			db := openDB(b, sharedServer(b), testDB, "")
			db.SetMaxOpenConns(64)
			c := benchClient(b, db, nil)
			ctx := context.Background()
			var id atomic.Int64
			b.ResetTimer()
			testkit.Loop(par, b.N, func(next func() bool) {
				m := c.Mutex(fmt.Sprintf("bench/uncontended/%d/%d", par, id.Add(1)))
				for next() {
					h, err := m.Lock(ctx)
					if err == nil {
						err = h.Unlock(ctx)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkHandoff measures the hand-off of a contended lock: one side holds
// it while the other waits in Lock; the holder unlocks after hold, and the
// benchmark times, per hand-off, from the Unlock's return (and from its
// call) to the waiter's Lock's return. "same-store" is two goroutines of one
// Client: the release wakes the waiter in process, with no round trip.
// "two-stores" is two Clients on Stores with a *sql.DB each, as two
// processes would be: the waiter learns of the release from its Store's
// poller, whose interval doubles from 10ms while the holder holds, so the
// hand-off grows with the hold.
//
//	cd mysqlstore && go test -run '^$' -bench Handoff -benchtime 50x
func BenchmarkHandoff(b *testing.B) {
	for _, stores := range []string{"same-store", "two-stores"} {
		for _, hold := range []time.Duration{20 * time.Millisecond, 200 * time.Millisecond} {
			b.Run(fmt.Sprintf("%s/hold=%v", stores, hold), func(b *testing.B) {
				srv := sharedServer(b)
				a := benchClient(b, openDB(b, srv, testDB, ""), nil)
				other := a
				if stores == "two-stores" {
					other = benchClient(b, openDB(b, srv, testDB, ""), nil)
				}
				benchHandoff(b, [2]*leash.Client{a, other}, hold)
			})
		}
	}
}

type release struct{ called, returned time.Time }

func benchHandoff(b *testing.B, clients [2]*leash.Client, hold time.Duration) {
	ctx := context.Background()
	name := "bench/handoff/" + b.Name()
	h, err := clients[0].Mutex(name).Lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var (
		fromReturn = make([]time.Duration, 0, b.N)
		fromCall   = make([]time.Duration, 0, b.N)
	)
	b.ResetTimer()
	for i := range b.N {
		waiter := clients[(i+1)%2]
		got := make(chan *leash.Hold, 1)
		errs := make(chan error, 1)
		// Owner: this iteration. Stops when Lock returns.
		go func() {
			wh, err := waiter.Mutex(name).Lock(ctx)
			if err != nil {
				errs <- err
				return
			}
			got <- wh
		}()
		time.Sleep(hold) // the holder works; the waiter is queued by now
		var r release
		r.called = time.Now()
		if err := h.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		r.returned = time.Now()
		select {
		case h = <-got:
		case err := <-errs:
			b.Fatal(err)
		}
		at := time.Now()
		fromReturn = append(fromReturn, at.Sub(r.returned))
		fromCall = append(fromCall, at.Sub(r.called))
	}
	b.StopTimer()
	_ = h.Unlock(ctx)
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2]) / 1e6
	}
	b.ReportMetric(median(fromReturn), "handoff-p50-ms")
	b.ReportMetric(float64(slices.Max(fromReturn))/1e6, "handoff-max-ms")
	b.ReportMetric(median(fromCall), "from-unlock-call-p50-ms")
}

// BenchmarkRenew10k renews 10,000 held locks in one Store.Renew call, as the
// watchdog does once per interval: 20 CALLs of 500 locks, one UPDATE each.
// ns/op is one whole renewal round; calls/round counts the CALL statements
// the server ran (its Com_call_procedure status).
func BenchmarkRenew10k(b *testing.B) {
	const n = 10_000
	s := benchStore(b)
	ctx := context.Background()
	owner := "00000000-0000-4000-8000-000000000010:1"
	reqs := make([]driver.Request, n)
	for i := range reqs {
		reqs[i] = driver.Request{Name: fmt.Sprintf("bench/renew/%05d", i), Owner: owner, Lease: time.Minute}
	}
	// Take them 500 at a time (AcquireMany), as many acquires would.
	for start := 0; start < n; start += 500 {
		if g, err := s.AcquireMany(ctx, reqs[start:start+500]); err != nil || !g.Acquired {
			b.Fatalf("AcquireMany = %+v, %v", g, err)
		}
	}
	calls := func() int64 {
		var name string
		var v int64
		if err := s.DB().QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Com_call_procedure'").Scan(&name, &v); err != nil {
			b.Fatal(err)
		}
		return v
	}
	before := calls()
	b.ResetTimer()
	for range b.N {
		for i, r := range s.Renew(ctx, reqs) {
			if r.Err != nil || r.Status != driver.Renewed {
				b.Fatalf("lock %d: %+v", i, r)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(calls()-before)/float64(b.N), "calls/round")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/n, "µs/lock")
}

// BenchmarkClaimEndRun claims the next tick of one job and records its
// end, as package schedule does for each run: one CALL each, the job
// keeping its last 100 records.
func BenchmarkClaimEndRun(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	job := fmt.Sprintf("bench/claim/%d", time.Now().UnixNano()) // a fresh job on every run
	client := "00000000-0000-4000-8000-000000000011"
	tick := time.UnixMilli(time.Now().Add(-time.Hour).UnixMilli())
	b.ResetTimer()
	for b.Loop() {
		tick = tick.Add(time.Millisecond)
		r, err := s.ClaimTick(ctx, driver.TickClaim{Job: job, Tick: tick, Attempt: 1, Run: driver.RunRecord{Client: client}})
		if err != nil || r.Status != driver.ClaimGranted {
			b.Fatalf("ClaimTick = %+v, %v", r, err)
		}
		if err := s.EndRun(ctx, driver.RunEnd{Job: job, Tick: tick, Attempt: 1, Client: client, Outcome: driver.OutcomeOK}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchStore returns a migrated Store on the shared server's test
// database, closed at cleanup.
func benchStore(b *testing.B) *mysqlstore.Store {
	b.Helper()
	s := mysqlstore.New(openDB(b, sharedServer(b), testDB, ""), nil)
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
