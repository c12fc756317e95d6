package prom_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/prom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetrics drives a Client on the in-process store through a grant, a
// release, a refusal, renewals and a loss, and compares the metrics.
func TestMetrics(t *testing.T) {
	// Fake time (testing/synctest): the sleeps and leases below are exact.
	synctest.Test(t, func(t *testing.T) {
		m := prom.New(&prom.Options{ConstLabels: prometheus.Labels{"service": "test"}})
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(m)
		store := memstore.New()
		c, err := leash.New(store, &leash.Options{Lease: 300 * time.Millisecond, Observer: m})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()

		h, err := c.Mutex("a").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Mutex("a").TryLock(ctx); err == nil {
			t.Fatal("TryLock of a held lock succeeded")
		}
		time.Sleep(250 * time.Millisecond) // a renewal round or two
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := c.RWMutex("b", nil).RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.ForceRelease(ctx, "b"); err != nil { // an operator frees it under the holder
			t.Fatal(err)
		}
		select {
		case <-r.Lost():
		case <-time.After(2 * time.Second):
			t.Fatal("the forced-off reader was not told")
		}
		// The holder is told first; the observer hears of the loss just after.
		for deadline := time.Now().Add(time.Second); testutil.CollectAndCount(m, "leash_lost_total") == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no loss observed within 1s of the holder being told")
			}
		}

		want := `
	# HELP leash_acquires_total Attempts to take a lock that ended (re-entries excepted), by result: acquired, not_acquired (held by someone else until the call gave up), restart_grace (refused by the store's restart grace) or error (the store failed, or the Client closed).
	# TYPE leash_acquires_total counter
	leash_acquires_total{kind="mutex",result="acquired",service="test"} 1
	leash_acquires_total{kind="mutex",result="not_acquired",service="test"} 1
	leash_acquires_total{kind="read",result="acquired",service="test"} 1
	# HELP leash_locks_held Locks held now; re-entries count once.
	# TYPE leash_locks_held gauge
	leash_locks_held{kind="mutex",service="test"} 0
	leash_locks_held{kind="read",service="test"} 0
	# HELP leash_lost_total Locks lost while held, by reason.
	# TYPE leash_lost_total counter
	leash_lost_total{kind="read",reason="released_elsewhere",service="test"} 1
	`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "leash_acquires_total", "leash_locks_held", "leash_lost_total"); err != nil {
			t.Error(err)
		}
		for name, atLeast := range map[string]int{"leash_hold_seconds": 2, "leash_acquire_wait_seconds": 2, "leash_renewal_round_seconds": 1} {
			if n := histogramCount(t, reg, name); n < atLeast {
				t.Errorf("%s counted %d observations, want at least %d", name, n, atLeast)
			}
		}
	})
}

// histogramCount sums the sample counts of a histogram family.
func histogramCount(t *testing.T, reg prometheus.Gatherer, name string) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				n += int(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return n
}

// The metrics of a Client are a registered Metrics passed as its Observer.
func Example() {
	m := prom.New(nil)
	reg := prometheus.NewRegistry() // or prometheus.DefaultRegisterer, served by promhttp
	reg.MustRegister(m)
	c, err := leash.New(memstore.New(), &leash.Options{Observer: m})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	h, err := c.Mutex("nightly-report").Lock(context.Background())
	if err != nil {
		panic(err)
	}
	defer h.Unlock(context.Background())

	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() == "leash_locks_held" {
			fmt.Println(f.GetName(), f.GetMetric()[0].GetLabel()[0].GetValue(), f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output: leash_locks_held mutex 1
}

// TestRestartGraceIsItsOwnResult: a refusal by the store's restart grace is
// not counted as contention.
func TestRestartGraceIsItsOwnResult(t *testing.T) {
	m := prom.New(nil)
	m.Observe(leash.Event{Op: leash.OpNotAcquired, Kind: driver.KindMutex, Name: "x",
		Err: &leash.NotAcquiredError{Name: "x", Remaining: time.Second, Grace: true}})
	want := `
	# HELP leash_acquires_total Attempts to take a lock that ended (re-entries excepted), by result: acquired, not_acquired (held by someone else until the call gave up), restart_grace (refused by the store's restart grace) or error (the store failed, or the Client closed).
	# TYPE leash_acquires_total counter
	leash_acquires_total{kind="mutex",result="restart_grace"} 1
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "leash_acquires_total"); err != nil {
		t.Error(err)
	}
}
