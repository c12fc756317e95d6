// Command bench measures leash against the Go peers on one redis-server that
// it starts itself, and rewrites BENCHMARKS.md and the wait chart beside it.
// With -stores it measures instead leash on each of its stores (memstore,
// Redis, PostgreSQL, MySQL, etcd, ZooKeeper) beside the Go peers that lock
// with a database and etcd's own concurrency.Mutex, on servers it starts itself, and rewrites only BENCHMARKS.md's stores
// section; a run without -stores keeps that section as it is. It is its own
// module, so that the peers never become dependencies of leash. From the
// repository root:
//
//	./scripts/bench.sh            # or: cd bench && GOWORK=off go run .
//	./scripts/bench.sh -stores    # or: cd bench && GOWORK=off go run . -stores
//
// Every contended run checks mutual exclusion and fails the whole programme
// on a violation.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/leash-go/leash/internal/testserver"
	"github.com/redis/go-redis/v9"
)

type config struct {
	runs        int
	uncontended time.Duration
	contended   time.Duration
	renewN      []int
	settle      time.Duration
	window      time.Duration
	out         string // BENCHMARKS.md
	chart       string // the PNG
}

func main() {
	var cfg config
	flag.IntVar(&cfg.runs, "runs", 5, "runs of the timed scenarios; the tables report medians")
	flag.DurationVar(&cfg.uncontended, "uncontended", 2*time.Second, "length of each uncontended run")
	flag.DurationVar(&cfg.contended, "contended", 3*time.Second, "length of each contended run")
	flag.DurationVar(&cfg.settle, "settle", 4*time.Second, "renewal: time between taking the locks and measuring")
	flag.DurationVar(&cfg.window, "window", 6*time.Second, "renewal: measuring window")
	quick := flag.Bool("quick", false, "a short smoke run (1 run, short windows, 1,000 renewed locks) that writes nothing unless -out is given")
	flag.StringVar(&cfg.out, "out", "", "markdown file to write (default ../BENCHMARKS.md; none with -quick)")
	stores := flag.Bool("stores", false, "measure leash on each store beside the database peers (3 runs unless -runs), and rewrite only the stores section")
	renewalOnly := flag.String("renewal", "", "with -stores: run only the renewal case, of the libraries whose name contains this (\"leash on etcd\"), and write nothing")
	flag.Parse()
	if *stores {
		runsSet := false
		flag.Visit(func(f *flag.Flag) { runsSet = runsSet || f.Name == "runs" })
		sc := storesConfig{runs: 3, uncontended: 1500 * time.Millisecond, handoffs: 20, budget: 8 * time.Second,
			renewN: 10_000, renewBig: 100_000, settle: 3 * time.Second, window: 5 * time.Second, pollN: 5, out: cfg.out}
		if runsSet {
			sc.runs = cfg.runs
		}
		sc.renewalOnly = *renewalOnly
		if *quick {
			sc.runs, sc.uncontended, sc.handoffs, sc.budget = 1, 300*time.Millisecond, 3, 2*time.Second
			sc.renewN, sc.renewBig, sc.settle, sc.window, sc.pollN = 1_000, 2_000, 2*time.Second, 2*time.Second, 2
		} else if sc.out == "" && sc.renewalOnly == "" {
			sc.out = filepath.Join("..", "BENCHMARKS.md")
		}
		if err := runStores(sc); err != nil {
			fail(err)
		}
		return
	}
	cfg.renewN = []int{1_000, 10_000, 100_000}
	if *quick {
		cfg.runs, cfg.uncontended, cfg.contended = 1, 300*time.Millisecond, 500*time.Millisecond
		cfg.settle, cfg.window, cfg.renewN = time.Second, 2*time.Second, []int{1_000}
	} else if cfg.out == "" {
		cfg.out = filepath.Join("..", "BENCHMARKS.md")
	}
	if cfg.out != "" {
		cfg.chart = filepath.Join(filepath.Dir(cfg.out), "bench", "contended-waits.png")
	}
	if err := run(cfg); err != nil {
		fail(err)
	}
}

// fail ends the programme: status 2 for a mutual-exclusion violation, 1 for
// any other error.
func fail(err error) {
	if errors.Is(err, errExclusion) {
		log.Printf("FAIL: %v", err)
		os.Exit(2)
	}
	log.Fatalf("FAIL: %v", err)
}

var holds = []time.Duration{0, time.Millisecond}

const (
	contendedWorkers = 16
	// The two-client hand-off: up to handoffSamples per library and run,
	// fewer once handoffBudget has passed (the polling peers take up to
	// their retry interval per hand-off).
	handoffSamples = 100
	handoffBudget  = 2 * time.Second
)

// handoffGap is how long the holder keeps the name after the waiter has
// called Lock, in the two-client hand-off (as TestABHandoff).
var handoffGap = uniformGap(2*time.Millisecond, 4*time.Millisecond)

var goroutineCounts = []int{1, 16, 64}

// results are everything measured in one invocation.
type results struct {
	started     time.Time
	loadStart   string // the load average when the run started
	leash       string // git describe, taken before the run rewrites its outputs
	redis       string
	libs        []lib
	uncontended map[int][]map[string]uncontendedResult         // goroutines → run → lib
	contended   map[time.Duration][]map[string]contendedResult // hold → run → lib
	handoff     []map[string]handoffResult                     // run → lib: two clients, one name
	renewal     map[string][]renewalResult                     // lib → per N
	elapsed     time.Duration
}

func run(cfg config) error {
	srv, err := testserver.StartRedis(testserver.RedisOptions{})
	if err != nil {
		return err
	}
	defer srv.Close()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	ctx := context.Background()
	ver, err := admin.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	res := &results{
		started:     time.Now(),
		loadStart:   loadAvg(),
		leash:       gitDescribe(),
		redis:       infoField(ver, "redis_version"),
		libs:        libs(),
		uncontended: map[int][]map[string]uncontendedResult{},
		contended:   map[time.Duration][]map[string]contendedResult{},
		renewal:     map[string][]renewalResult{},
	}
	log.Printf("redis-server %s on %s; %d runs", res.redis, srv.Addr, cfg.runs)
	for r := range cfg.runs {
		order := rotated(res.libs, r)
		for _, g := range goroutineCounts {
			m := map[string]uncontendedResult{}
			for _, l := range order {
				u, err := runUncontended(l, srv.Addr, g, cfg.uncontended, fmt.Sprintf("%d:%d", r, g), srv.CPU)
				if err != nil {
					return err
				}
				m[l.name] = u
				client, server := u.cpuPerLock()
				log.Printf("run %d  uncontended %2d goroutines  %-16s %8.0f ops/s  p50 %-9s p99 %-9s cpu/lock client %-9s redis %s",
					r+1, g, l.name, u.opsPerSec, fmtDur(u.p50), fmtDur(u.p99), fmtDur(client), fmtDur(server))
			}
			res.uncontended[g] = append(res.uncontended[g], m)
		}
		for _, hold := range holds {
			m := map[string]contendedResult{}
			for _, l := range order {
				c, err := runContended(l, srv.Addr, contendedWorkers, hold, cfg.contended,
					fmt.Sprintf("bench:hot:%d:%d:%s", r, hold.Milliseconds(), l.name))
				if err != nil {
					return err
				}
				m[l.name] = c
				log.Printf("run %d  contended hold %v  %-16s %6.0f grants/s  wait p50 %-9s p99 %-9s max %-9s hand-off p50 %-9s  exclusion ok",
					r+1, hold, l.name, c.perSec, fmtDur(pct(c.waits, 0.5)), fmtDur(pct(c.waits, 0.99)),
					fmtDur(pct(c.waits, 1)), fmtDur(pct(c.handoffs, 0.5)))
			}
			res.contended[hold] = append(res.contended[hold], m)
		}
		rtt, err := measureRTT(ctx, admin, rttPings)
		if err != nil {
			return err
		}
		m := map[string]handoffResult{}
		for _, l := range order {
			h, err := runHandoff(l, srv.Addr, handoffSamples, handoffBudget, handoffGap, false, handoffStuckTolerated, fmt.Sprintf("bench:handoff:%d:%s", r, l.name))
			if err != nil {
				return err
			}
			h.rtt = rtt
			m[l.name] = h
			log.Printf("run %d  hand-off  %-16s %3d hand-offs  p50 %-9s = %.2f RTT (PING %s)  p99 %s  stuck %d",
				r+1, l.name, len(h.handoffs), fmtDur(pct(h.handoffs, 0.5)), h.rtts(), fmtDur(rtt), fmtDur(pct(h.handoffs, 0.99)), h.stuck)
		}
		res.handoff = append(res.handoff, m)
	}
	for _, rn := range renewers() {
		for _, n := range cfg.renewN {
			rr, err := runRenewal(rn.name, rn.open, rn.interval, srv.Addr, admin, n, cfg.settle, cfg.window, fmt.Sprintf("%s:%d", rn.name, n))
			if err != nil {
				return err
			}
			res.renewal[rn.name] = append(res.renewal[rn.name], rr)
			if rr.failed != "" {
				log.Printf("renewal %-12s %6d locks: %s", rn.name, n, rr.failed)
				continue
			}
			log.Printf("renewal %-12s %6d locks: %8.1f scripts/s  %9.0f commands/s  redis cpu %4.0f%%  %6.0f B/lock  %6d goroutines  (took %v to lock)",
				rn.name, n, rr.scriptsSec, rr.commandsSec, 100*rr.cpu, rr.heapPerLock, rr.goroutines, rr.acquireTime.Round(time.Millisecond))
		}
	}
	res.elapsed = time.Since(res.started)
	if cfg.out == "" {
		return nil
	}
	if err := drawChart(cfg.chart, chartPanels(res)); err != nil {
		return err
	}
	md, err := report(res, cfg)
	if err != nil {
		return err
	}
	// Keep the stores section, which only -stores rewrites.
	if old, err := os.ReadFile(cfg.out); err == nil {
		_, section := splitStores(old)
		md = append(md, section...)
	}
	if err := os.WriteFile(cfg.out, md, 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s and %s", cfg.out, cfg.chart)
	return nil
}

// rotated returns libs rotated left by r, the order of run r: the order
// of the libraries changes from run to run, so that none is always first
// (cold) or last (after the others' garbage).
func rotated[T any](libs []T, r int) []T {
	k := r % len(libs)
	return append(slices.Clone(libs[k:]), libs[:k]...)
}

// chartPanels pools each library's waits over every run.
func chartPanels(res *results) []panel {
	var panels []panel
	for _, hold := range holds {
		p := panel{title: fmt.Sprintf("One hot name, %d clients, hold %s", contendedWorkers, holdText(hold))}
		for i, l := range res.libs {
			var all []time.Duration
			for _, m := range res.contended[hold] {
				all = append(all, m[l.name].waits...)
			}
			slices.Sort(all)
			p.series = append(p.series, series{name: l.name, col: palette[i%len(palette)], waits: all})
		}
		panels = append(panels, p)
	}
	return panels
}

func holdText(h time.Duration) string {
	if h == 0 {
		return "0 (no work)"
	}
	return h.String()
}
