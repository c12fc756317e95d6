package schedule_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/pgstore"
	"github.com/leash-go/leash/redisstore"
	"github.com/leash-go/leash/schedule"
	"github.com/redis/go-redis/v9"
)

// The scale benchmark: many jobs with the same schedule, every instance
// running all of them, each instance a process of its own with its own
// Client and connection pool, on one redis-server. See BENCHMARKS.md,
// "Scheduled jobs at scale".
//
// Knobs (environment): LEASH_SCALE_JOBS (default 10000), LEASH_SCALE_TICKS
// (default 3), LEASH_SCALE_SPEC (default "0 * * * * *": every minute),
// LEASH_SCALE_INSTANCES (default 3), LEASH_SCALE_STORE (redis, the default,
// or postgres: one PostgreSQL server, each instance a pgxpool of its own).

// scaleEnv, when set, makes the test binary run as one instance of the
// scale benchmark (see runScaleChild) instead of running tests.
const scaleEnv = "LEASH_TEST_SCALE_CHILD"

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func envString(name, def string) string {
	if s := os.Getenv(name); s != "" {
		return s
	}
	return def
}

// claimCounts counts the claims a scheduler sends its store, by verdict,
// and the run ends it records.
type claimCounts struct {
	claims, granted, taken, early, late, failed, ends atomic.Int64
}

// claim sends c to js and counts it by its verdict.
func (n *claimCounts) claim(ctx context.Context, js driver.JobStore, c driver.TickClaim) (driver.TickResult, error) {
	res, err := js.ClaimTick(ctx, c)
	n.claims.Add(1)
	switch {
	case err != nil:
		n.failed.Add(1)
	case res.Status == driver.ClaimGranted:
		n.granted.Add(1)
	case res.Status == driver.ClaimTaken:
		n.taken.Add(1)
	case res.Status == driver.ClaimEarly:
		n.early.Add(1)
	case res.Status == driver.ClaimLate:
		n.late.Add(1)
	}
	return res, err
}

// end sends e to js and counts it.
func (n *claimCounts) end(ctx context.Context, js driver.JobStore, e driver.RunEnd) error {
	n.ends.Add(1)
	return js.EndRun(ctx, e)
}

// counts returns the counters in the order tick lines print them.
func (n *claimCounts) counts() [7]int64 {
	return [7]int64{n.claims.Load(), n.granted.Load(), n.taken.Load(), n.early.Load(), n.late.Load(), n.failed.Load(), n.ends.Load()}
}

// countingRedis and countingPG are stores that count the claims and ends
// the scheduler sends them; every other method is the store's own (so the
// Client finds the same capabilities).
type (
	countingRedis struct {
		*redisstore.Store
		*claimCounts
	}
	countingPG struct {
		*pgstore.Store
		*claimCounts
	}
)

func (s countingRedis) ClaimTick(ctx context.Context, c driver.TickClaim) (driver.TickResult, error) {
	return s.claim(ctx, s.Store, c)
}

func (s countingRedis) EndRun(ctx context.Context, e driver.RunEnd) error {
	return s.end(ctx, s.Store, e)
}

func (s countingPG) ClaimTick(ctx context.Context, c driver.TickClaim) (driver.TickResult, error) {
	return s.claim(ctx, s.Store, c)
}

func (s countingPG) EndRun(ctx context.Context, e driver.RunEnd) error { return s.end(ctx, s.Store, e) }

// cpuTime is this process's user+system CPU time (getrusage).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scaleRun is one call of a job function in a scale child: which job, which
// tick, how long after the tick (real clock) it started.
type scaleRun struct {
	job  int32
	tick int64 // Unix ms
	late time.Duration
}

// runScaleChild is one instance: it adds $LEASH_SCALE_JOBS jobs named
// $LEASH_SCALE_PREFIX/<i> on $LEASH_SCALE_SPEC, whose functions note when
// they started and return, starts the scheduler 5 s before the tick
// $LEASH_SCALE_FIRST (Unix ms), and for each of the $LEASH_SCALE_TICKS
// ticks measures from 2 s before the tick to half an interval after it
// (the interval is $LEASH_SCALE_INTERVAL ms): it says "tick <k> <tick ms>
// cpu_us=… heap_base=… heap_peak=… goroutines_peak=… claims=… granted=…
// taken=… early=… late=… failed=… ends=… runs=…". After the last window it
// shuts down, says "run <job> <tick ms> <lateness µs>" for every run, and
// "done".
func runScaleChild() int {
	jobs := envInt("LEASH_SCALE_JOBS", 10000)
	ticks := envInt("LEASH_SCALE_TICKS", 3)
	first, _ := strconv.ParseInt(os.Getenv("LEASH_SCALE_FIRST"), 10, 64)
	interval := time.Duration(envInt("LEASH_SCALE_INTERVAL", 60000)) * time.Millisecond
	prefix, spec := os.Getenv("LEASH_SCALE_PREFIX"), envString("LEASH_SCALE_SPEC", "0 * * * * *")

	counts := &claimCounts{}
	var store driver.Store
	if url := os.Getenv("LEASH_SCALE_PGURL"); url != "" {
		pool, err := pgxpool.New(context.Background(), url) // pgx defaults, as a service would
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		defer pool.Close()
		store = countingPG{pgstore.New(pool, nil), counts}
	} else {
		rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("LEASH_TEST_ADDR")}) // go-redis defaults, as a service would
		defer rdb.Close()
		store = countingRedis{redisstore.New(rdb, nil), counts}
	}
	defer store.(interface{ Close() error }).Close()
	c, err := leash.New(store, nil)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer c.Close()
	s, err := schedule.New(c, nil)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	var (
		mu   sync.Mutex
		runs = make([]scaleRun, 0, jobs*ticks)
	)
	for i := range jobs {
		err := s.Add(fmt.Sprintf("%s/%d", prefix, i), spec, func(ctx context.Context, run schedule.Run) error {
			late := time.Since(run.Tick)
			mu.Lock()
			runs = append(runs, scaleRun{int32(i), run.Tick.UnixMilli(), late})
			mu.Unlock()
			return nil
		}, nil)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	fmt.Println("ready")
	t0 := time.UnixMilli(first)
	time.Sleep(time.Until(t0.Add(-5 * time.Second)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/sched/goroutines:goroutines"}}
	read := func() (heap, goroutines uint64) {
		metrics.Read(samples)
		return samples[0].Value.Uint64(), samples[1].Value.Uint64()
	}
	for k := range ticks {
		tick := t0.Add(time.Duration(k) * interval)
		time.Sleep(time.Until(tick.Add(-2 * time.Second)))
		runtime.GC()
		heapBase, _ := read()
		cpu0, n0 := cpuTime(), counts.counts()
		mu.Lock()
		r0 := len(runs)
		mu.Unlock()
		var heapPeak, gorPeak uint64
		for end := tick.Add(interval / 2); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			h, g := read()
			heapPeak, gorPeak = max(heapPeak, h), max(gorPeak, g)
		}
		cpu1, n1 := cpuTime(), counts.counts()
		mu.Lock()
		r1 := len(runs)
		mu.Unlock()
		var d [7]int64
		for i := range d {
			d[i] = n1[i] - n0[i]
		}
		fmt.Printf("tick %d %d cpu_us=%d heap_base=%d heap_peak=%d goroutines_peak=%d claims=%d granted=%d taken=%d early=%d late=%d failed=%d ends=%d runs=%d\n",
			k, tick.UnixMilli(), (cpu1 - cpu0).Microseconds(), heapBase, heapPeak, gorPeak, d[0], d[1], d[2], d[3], d[4], d[5], d[6], r1-r0)
	}
	cancel()
	if err := <-done; err != nil {
		fmt.Println("error", err)
		return 1
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range runs {
		fmt.Println("run", r.job, r.tick, r.late.Microseconds())
	}
	fmt.Println("done")
	return 0
}

// tickLine is a child's "tick" line, its key=value fields by name.
type tickLine struct {
	k      int
	tick   int64
	fields map[string]int64
}

func parseTickLine(line string) (tickLine, error) {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "tick" {
		return tickLine{}, fmt.Errorf("not a tick line: %q", line)
	}
	k, err1 := strconv.Atoi(f[1])
	tick, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return tickLine{}, fmt.Errorf("bad tick line: %q", line)
	}
	tl := tickLine{k: k, tick: tick, fields: map[string]int64{}}
	for _, kv := range f[3:] {
		name, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return tickLine{}, fmt.Errorf("bad field %q in %q", kv, line)
		}
		tl.fields[name] = n
	}
	return tl, nil
}

// serverStats is what the store's server says of the calls it served and
// its CPU: on Redis, INFO's EVALSHA calls and the microseconds it spent in
// them (usec), EVAL calls, and used_cpu_sys+user; on PostgreSQL, the
// transactions committed (pg_stat_database.xact_commit: each store
// operation is one function call) and the CPU of the postmaster and its
// backends (from /proc; usec and evalCalls zero).
type serverStats struct {
	calls, usec, evalCalls, cpuUsec int64
}

func readRedisStats(ctx context.Context, rdb *redis.Client) (serverStats, error) {
	info, err := rdb.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return serverStats{}, err
	}
	var st serverStats
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		name, rest, _ := strings.Cut(line, ":")
		switch name {
		case "cmdstat_evalsha", "cmdstat_eval":
			var calls, usec int64
			for kv := range strings.SplitSeq(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				switch k {
				case "calls":
					calls = n
				case "usec":
					usec = n
				}
			}
			if name == "cmdstat_evalsha" {
				st.calls, st.usec = calls, usec
			} else {
				st.evalCalls = calls
			}
		case "used_cpu_sys", "used_cpu_user":
			f, _ := strconv.ParseFloat(rest, 64)
			st.cpuUsec += int64(f * 1e6)
		}
	}
	return st, nil
}

func readPostgresStats(ctx context.Context, pool *pgxpool.Pool, postmaster int) (serverStats, error) {
	var st serverStats
	if _, err := pool.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		return st, err
	}
	err := pool.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&st.calls)
	if err != nil {
		return st, err
	}
	// CPU in clock ticks (USER_HZ, 100 a second): the postmaster's own and
	// its children's that exited (cutime, cstime), and each live child's.
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return st, err
	}
	var ticks int64
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		_, rest, _ := strings.Cut(string(b), ") ") // after the command, which may hold spaces
		f := strings.Fields(rest)                  // f[0] is field 3 (state)
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		field := func(n int) int64 { v, _ := strconv.ParseInt(f[n-3], 10, 64); return v }
		switch {
		case pid == postmaster:
			ticks += field(14) + field(15) + field(16) + field(17)
		case ppid == postmaster:
			ticks += field(14) + field(15)
		}
	}
	st.cpuUsec = ticks * 10_000
	return st, nil
}

// loadAvg is the first field of /proc/loadavg, or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// BenchmarkJobsAtScale runs LEASH_SCALE_INSTANCES (3) scheduler processes,
// each with the same LEASH_SCALE_JOBS (10,000) jobs on LEASH_SCALE_SPEC
// (every minute), against one redis-server (or, with
// LEASH_SCALE_STORE=postgres, one PostgreSQL server), for LEASH_SCALE_TICKS
// (3) ticks, and reports per tick: the claims the instances sent and won,
// the calls the server served (claims, run locks, ends, releases: EVALSHA
// on Redis, transactions on PostgreSQL) and its CPU, each instance's CPU and
// heap, and how late the runs started after their tick.
// It fails if any (job, tick) ran other than exactly once, by the
// functions' own account and by the store's history. One op is the whole
// run (about 1.5 + TICKS minutes):
//
//	cd schedule && go test -run '^$' -bench JobsAtScale -benchtime 1x -timeout 30m -v
//	cd schedule && LEASH_SCALE_STORE=postgres go test -run '^$' -bench JobsAtScale -benchtime 1x -timeout 30m -v
func BenchmarkJobsAtScale(b *testing.B) {
	jobs := envInt("LEASH_SCALE_JOBS", 10000)
	ticks := envInt("LEASH_SCALE_TICKS", 3)
	instances := envInt("LEASH_SCALE_INSTANCES", 3)
	spec := envString("LEASH_SCALE_SPEC", "0 * * * * *")
	sched, err := schedule.Parse(spec, time.UTC)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	prefix := fmt.Sprintf("scale/%d", time.Now().UnixNano())
	var (
		storeEnv  string
		readStats func(context.Context) (serverStats, error)
		history   driver.JobStore
	)
	switch kind := envString("LEASH_SCALE_STORE", "redis"); kind {
	case "redis":
		srv := testserver.NewRedis(b, testserver.RedisOptions{})
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		b.Cleanup(func() { rdb.Close() })
		rs := redisstore.New(rdb, nil)
		b.Cleanup(func() { rs.Close() })
		storeEnv, history = "LEASH_TEST_ADDR="+srv.Addr, rs
		readStats = func(ctx context.Context) (serverStats, error) { return readRedisStats(ctx, rdb) }
	case "postgres":
		srv := testserver.NewPostgres(b, testserver.PostgresOptions{})
		pool, err := pgxpool.New(ctx, srv.URL())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		ps := pgstore.New(pool, nil)
		b.Cleanup(func() { ps.Close() })
		if err := ps.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		storeEnv, history = "LEASH_SCALE_PGURL="+srv.URL(), ps
		readStats = func(ctx context.Context) (serverStats, error) { return readPostgresStats(ctx, pool, srv.PID()) }
	default:
		b.Fatalf("LEASH_SCALE_STORE=%q: want redis or postgres", kind)
	}

	// The first tick leaves the children 20 s to start and add their jobs.
	first := sched.Next(time.Now().Add(20 * time.Second))
	interval := sched.Next(first).Sub(first)
	env := []string{scaleEnv + "=1", storeEnv, "LEASH_SCALE_PREFIX=" + prefix,
		"LEASH_SCALE_FIRST=" + strconv.FormatInt(first.UnixMilli(), 10),
		"LEASH_SCALE_INTERVAL=" + strconv.FormatInt(interval.Milliseconds(), 10),
		"LEASH_SCALE_JOBS=" + strconv.Itoa(jobs), "LEASH_SCALE_TICKS=" + strconv.Itoa(ticks), "LEASH_SCALE_SPEC=" + spec}
	children := make([]*testkit.Child, instances)
	for i := range children {
		children[i] = testkit.StartSelf(b, fmt.Sprintf("instance %d", i), env...)
	}
	for _, ch := range children {
		if _, err := ch.Await("ready", time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d instances × %d jobs on %q, ticks from %s every %v; load average %s",
		instances, jobs, spec, first.UTC().Format(time.TimeOnly), interval, loadAvg())

	type tickStats struct {
		redis serverStats
		load  string
	}
	var redisPer []tickStats
	for k := range ticks {
		tick := first.Add(time.Duration(k) * interval)
		time.Sleep(time.Until(tick.Add(-2 * time.Second)))
		r0, err := readStats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(time.Until(tick.Add(interval / 2)))
		r1, err := readStats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		redisPer = append(redisPer, tickStats{serverStats{r1.calls - r0.calls, r1.usec - r0.usec,
			r1.evalCalls - r0.evalCalls, r1.cpuUsec - r0.cpuUsec}, loadAvg()})
	}

	// Each child's tick lines, its runs, then "done".
	perTick := make([][]tickLine, ticks)
	count := map[[2]int64]int{}
	late := make([][]time.Duration, ticks)
	tickIndex := map[int64]int{}
	for k := range ticks {
		tickIndex[first.Add(time.Duration(k)*interval).UnixMilli()] = k
	}
	extra := 0
	for i, ch := range children {
		for {
			line, err := ch.Next(2 * time.Minute)
			if err != nil {
				b.Fatalf("instance %d: %v", i, err)
			}
			if line == "done" {
				break
			}
			switch f := strings.Fields(line); f[0] {
			case "tick":
				tl, err := parseTickLine(line)
				if err != nil {
					b.Fatal(err)
				}
				perTick[tl.k] = append(perTick[tl.k], tl)
			case "run":
				job, _ := strconv.ParseInt(f[1], 10, 64)
				tick, _ := strconv.ParseInt(f[2], 10, 64)
				us, _ := strconv.ParseInt(f[3], 10, 64)
				count[[2]int64{job, tick}]++
				if k, ok := tickIndex[tick]; ok {
					late[k] = append(late[k], time.Duration(us)*time.Microsecond)
				} else {
					extra++
				}
			case "error":
				b.Fatalf("instance %d: %s", i, line)
			}
		}
	}

	// Exactly once, by the functions' account.
	var twice, missed int
	for job := range int64(jobs) {
		for k := range ticks {
			switch n := count[[2]int64{job, first.Add(time.Duration(k) * interval).UnixMilli()}]; {
			case n == 0:
				missed++
			case n > 1:
				twice++
			}
		}
	}
	// And by the store's: each job's history holds one record per tick,
	// attempt 1, ended ok.
	var histBad int
	badKinds := map[string]int{} // what the bad records are: outcome, attempt
	var badSample []string
	for job := range jobs {
		st, err := history.History(ctx, fmt.Sprintf("%s/%d", prefix, job), 0)
		if err != nil {
			b.Fatal(err)
		}
		seen := map[int64]int{}
		for _, r := range st.Runs {
			if r.Outcome != driver.OutcomeOK || r.Attempt != 1 {
				histBad++
				badKinds[fmt.Sprintf("%v attempt %d", r.Outcome, r.Attempt)]++
				if len(badSample) < 3 {
					badSample = append(badSample, fmt.Sprintf("%s tick %s: %v attempt %d, started %s ended %s, error %q",
						r.Job, r.Tick.UTC().Format(time.TimeOnly), r.Outcome, r.Attempt, r.Started.UTC().Format("15:04:05.000"),
						r.Ended.UTC().Format("15:04:05.000"), r.Error))
				}
			}
			seen[r.Tick.UnixMilli()]++
		}
		for k := range ticks {
			if n := seen[first.Add(time.Duration(k)*interval).UnixMilli()]; n != 1 {
				histBad++
				badKinds[fmt.Sprintf("%d records of a tick", n)]++
			}
		}
	}
	b.Logf("exactly once: %d (job, tick) pairs ran twice, %d missed, %d runs of other ticks; history: %d bad records",
		twice, missed, extra, histBad)
	if histBad > 0 {
		b.Logf("bad history records by kind: %v; for instance:\n  %s", badKinds, strings.Join(badSample, "\n  "))
	}
	if twice+missed+extra+histBad > 0 {
		b.Errorf("not exactly once: %d twice, %d missed, %d other ticks, %d bad history records", twice, missed, extra, histBad)
	}

	pct := func(ds []time.Duration, p float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		return ds[int(p*float64(len(ds)-1))]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var sumCPU, sumHeap, sumP99, sumMax, sumClaims, sumEval float64
	for k := range ticks {
		slices.Sort(late[k])
		var claims, granted, taken, early, failed int64
		var cpus, heaps []string
		var maxCPU, maxHeap int64
		for _, tl := range perTick[k] {
			claims += tl.fields["claims"]
			granted += tl.fields["granted"]
			taken += tl.fields["taken"]
			early += tl.fields["early"]
			failed += tl.fields["failed"]
			cpus = append(cpus, fmt.Sprintf("%.0f", float64(tl.fields["cpu_us"])/1000))
			heaps = append(heaps, fmt.Sprintf("%.1f→%.1f", float64(tl.fields["heap_base"])/(1<<20), float64(tl.fields["heap_peak"])/(1<<20)))
			maxCPU, maxHeap = max(maxCPU, tl.fields["cpu_us"]), max(maxHeap, tl.fields["heap_peak"])
		}
		r := redisPer[k].redis
		b.Logf("tick %d: claims sent %d (granted %d, taken %d, early %d, failed %d); server: %d calls (EVALSHA; transactions on PostgreSQL), %d µs in them (%.1f µs/call), EVAL %d, CPU %d ms; "+
			"instance CPU ms [%s], heap MiB base→peak [%s]; lateness min %.1f ms, p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d runs; load average %s",
			k, claims, granted, taken, early, failed, r.calls, r.usec, float64(r.usec)/float64(max(r.calls, 1)),
			r.evalCalls, r.cpuUsec/1000, strings.Join(cpus, " "), strings.Join(heaps, " "),
			ms(pct(late[k], 0)), ms(pct(late[k], .5)), ms(pct(late[k], .99)), ms(pct(late[k], 1)), len(late[k]), redisPer[k].load)
		sumCPU += float64(maxCPU) / 1000
		sumHeap += float64(maxHeap) / (1 << 20)
		sumP99 += ms(pct(late[k], .99))
		sumMax += ms(pct(late[k], 1))
		sumClaims += float64(claims)
		sumEval += float64(r.calls)
	}
	n := float64(ticks)
	b.ReportMetric(sumClaims/n, "claims/tick")
	b.ReportMetric(sumEval/n, "server-calls/tick")
	b.ReportMetric(sumCPU/n, "max-instance-cpu-ms/tick")
	b.ReportMetric(sumHeap/n, "max-instance-heap-MiB")
	b.ReportMetric(sumP99/n, "late-p99-ms")
	b.ReportMetric(sumMax/n, "late-max-ms")
}
