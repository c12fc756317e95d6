package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/pgstore"
)

// statementCounter counts the statements a pool sends.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// benchStore returns a migrated store on its own table of the shared
// server, whose pool counts its statements.
func benchStore(b *testing.B, opts *pgstore.Options) (*pgstore.Store, *statementCounter) {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(sharedPostgres(b).URL())
	if err != nil {
		b.Fatal(err)
	}
	counter := &statementCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	o := pgstore.Options{}
	if opts != nil {
		o = *opts
	}
	o.Table = tableName(b)
	s := pgstore.New(pool, &o)
	b.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s, counter
}

// BenchmarkLockUnlock is an uncontended Lock and Unlock through a
// leash.Client: two statements each.
func BenchmarkLockUnlock(b *testing.B) {
	s, counter := benchStore(b, nil)
	c, err := leash.New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	m := c.Mutex("bench")
	before := counter.n.Load()
	b.ResetTimer()
	for b.Loop() {
		h, err := m.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(counter.n.Load()-before)/float64(b.N), "statements/op")
}

// BenchmarkRenew10000 renews 10,000 held locks in one Renew call, as the
// watchdog does: one statement per batch of Options.BatchSize (1000).
func BenchmarkRenew10000(b *testing.B) {
	const locks = 10000
	s, counter := benchStore(b, nil)
	ctx := context.Background()
	reqs := make([]driver.Request, locks)
	for i := range reqs {
		reqs[i] = driver.Request{Name: fmt.Sprintf("bench/%05d", i), Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < locks; i += 16 {
				if g, err := s.Acquire(ctx, reqs[i]); err != nil || !g.Acquired {
					errs <- fmt.Errorf("acquire %d: %+v, %v", i, g, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	before := counter.n.Load()
	b.ResetTimer()
	for b.Loop() {
		for i, res := range s.Renew(ctx, reqs) {
			if res.Err != nil || res.Status != driver.Renewed {
				b.Fatalf("renewal %d: %+v", i, res)
			}
		}
	}
	b.ReportMetric(float64(counter.n.Load()-before)/float64(b.N), "statements/renewal")
	b.ReportMetric(float64(locks)*float64(b.N)/b.Elapsed().Seconds(), "locks/s")
}

// BenchmarkClaimEndRun claims the next tick of one job and records its
// end, as package schedule does for each run: one statement each, the
// job keeping its last 100 records.
func BenchmarkClaimEndRun(b *testing.B) {
	s, counter := benchStore(b, nil)
	ctx := context.Background()
	client := "00000000-0000-4000-8000-000000000001"
	tick := time.UnixMilli(time.Now().Add(-time.Hour).UnixMilli())
	before := counter.n.Load()
	b.ResetTimer()
	for b.Loop() {
		tick = tick.Add(time.Millisecond)
		r, err := s.ClaimTick(ctx, driver.TickClaim{Job: "bench", Tick: tick, Attempt: 1, Run: driver.RunRecord{Client: client}})
		if err != nil || r.Status != driver.ClaimGranted {
			b.Fatalf("ClaimTick = %+v, %v", r, err)
		}
		if err := s.EndRun(ctx, driver.RunEnd{Job: "bench", Tick: tick, Attempt: 1, Client: client, Outcome: driver.OutcomeOK}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(counter.n.Load()-before)/float64(b.N), "statements/op")
}
