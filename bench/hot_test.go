package main

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leash-go/leash/internal/testserver"
)

// TestHot runs only the hot-name scenario of the programme (16 clients, one
// name, hold 0 and 1 ms; every library, in rotated order, $BENCH_HOT_RUNS
// runs, default 3) on a redis-server of its own, and prints, per hold and
// library, the medians over runs of grants/s, wait p50, p99 and max, and
// their ratios: waits to the FIFO ideal of the same run (15 × (the
// FairMutex's mean hold + mean hand-off), as the report prints it), grants/s to the best
// peer of the same run. It rewrites nothing: it is how a change to the
// contended path is checked before and after without the whole programme.
//
//	cd bench && BENCH_HOT=1 GOWORK=off go test -run TestHot -count 1 -v -timeout 30m .
func TestHot(t *testing.T) {
	if os.Getenv("BENCH_HOT") == "" {
		t.Skip("set BENCH_HOT=1 to run")
	}
	runs := 3
	if v, err := strconv.Atoi(os.Getenv("BENCH_HOT_RUNS")); err == nil && v > 0 {
		runs = v
	}
	srv, err := testserver.StartRedis(testserver.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	all := libs()
	peers := []string{"redsync", "bsm/redislock", "rueidislock"}
	for _, hold := range holds {
		type fig struct{ perSec, p50, p99, max, ideal float64 }
		per := map[string][]fig{}
		var best []float64
		for r := range runs {
			m := map[string]contendedResult{}
			for _, l := range rotated(all, r) {
				c, err := runContended(l, srv.Addr, contendedWorkers, hold, 3*time.Second,
					fmt.Sprintf("hot:%d:%d:%s", r, hold.Milliseconds(), l.name))
				if err != nil {
					t.Fatal(err)
				}
				m[l.name] = c
			}
			ideal := float64(fifoIdeal(m, fairLib(all)))
			b := 0.0
			for _, p := range peers {
				b = max(b, m[p].perSec)
			}
			best = append(best, b)
			for n, c := range m {
				per[n] = append(per[n], fig{c.perSec, float64(pct(c.waits, 0.5)), float64(pct(c.waits, 0.99)),
					float64(pct(c.waits, 1)), ideal})
			}
		}
		fmt.Printf("hold %v, %d runs (medians; ratios per run, then median)\n", hold, runs)
		fmt.Printf("%-16s %9s %7s %10s %10s %10s %8s %8s %8s\n", "library", "grants/s", "×peer", "p50", "p99", "max", "p50/id", "p99/id", "max/id")
		for _, l := range all {
			fs := per[l.name]
			col := func(f func(int, fig) float64) float64 {
				xs := make([]float64, len(fs))
				for i, x := range fs {
					xs[i] = f(i, x)
				}
				return median(xs)
			}
			fmt.Printf("%-16s %9.0f %6.2f× %10s %10s %10s %7.2f× %7.2f× %7.2f×\n", l.name,
				col(func(_ int, x fig) float64 { return x.perSec }),
				col(func(i int, x fig) float64 { return x.perSec / best[i] }),
				fmtDur(time.Duration(col(func(_ int, x fig) float64 { return x.p50 }))),
				fmtDur(time.Duration(col(func(_ int, x fig) float64 { return x.p99 }))),
				fmtDur(time.Duration(col(func(_ int, x fig) float64 { return x.max }))),
				col(func(_ int, x fig) float64 { return x.p50 / x.ideal }),
				col(func(_ int, x fig) float64 { return x.p99 / x.ideal }),
				col(func(_ int, x fig) float64 { return x.max / x.ideal }))
		}
		idealMed := median(func() []float64 {
			var xs []float64
			for _, x := range per[fairLib(all)] {
				xs = append(xs, x.ideal)
			}
			return xs
		}())
		fmt.Printf("FIFO ideal (median over runs): %s\n\n", fmtDur(time.Duration(idealMed)))
	}
}
