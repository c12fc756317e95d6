package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// storeRenewal is the cost of keeping n locks held by one client of one
// library, counted at the server.
type storeRenewal struct {
	n           int
	interval    time.Duration // the library's renewal (heartbeat, ping) interval
	counted     bool          // the server counted statements (not memstore)
	stmtsSec    float64       // statements (Redis: scripts) per second
	perInterval float64       // statements per renewal interval
	cpu         float64       // server CPU, fraction of one core
	renewed     float64       // renewals of each lock per interval
	rounds      float64       // leash: renewal rounds per interval
	roundP50    time.Duration // leash: wall time of one renewal round
	roundMax    time.Duration
	goroutines  int     // client goroutines while holding, beyond the baseline
	heapPerLock float64 // client HeapInuse while holding, beyond the baseline, per lock, after GC
	livePerLock float64 // the same of HeapAlloc (live objects, not their spans)
	acquireTime time.Duration
	short       string // why it holds fewer than it was asked to take, or lost some
	failed      string
}

// A serverCounter reads a server's running totals.
type serverCounter struct {
	// statements returns the statements (round trips) the server has run
	// so far, not counting the reads of this counter. nil: no server.
	statements func(ctx context.Context) (int64, error)
	// cpu returns the server's CPU time so far. nil: no server.
	cpu func() (time.Duration, error)
}

func (sc serverCounter) cpuTime() (time.Duration, error) {
	if sc.cpu == nil {
		return 0, nil
	}
	return sc.cpu()
}

// runStoreRenewal takes n locks with one client of sl, lets the renewals
// settle, and counts the server's statements and CPU over window.
func runStoreRenewal(sl storeLib, env *storeEnv, sc serverCounter, n int, settle, window time.Duration) (storeRenewal, error) {
	ctx := context.Background()
	res := storeRenewal{n: n, interval: time.Second}
	obs := &renewObserver{}
	heap0 := readHeap()
	g0 := runtime.NumGoroutine()
	h, err := sl.holder(env, obs)
	if err != nil {
		return res, err
	}
	defer h.close()
	limit := renewalTakeLimit
	if n > 10_000 {
		limit = bigTakeLimit
	}
	tctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// A library that could not take them all is measured on those it holds,
	// and the table says so.
	if res.acquireTime, res.n, res.short = takeAll(tctx, h, n, func(i int) string { return fmt.Sprintf("bench:renew:%d", i) }); res.n == 0 {
		res.n, res.failed = n, res.short
		return res, nil
	}
	n = res.n
	time.Sleep(settle) // the first renewals are due one interval after each take
	var s0, s1 int64
	if sc.statements != nil {
		if s0, err = sc.statements(ctx); err != nil {
			return res, err
		}
	}
	c0, err := sc.cpuTime()
	if err != nil {
		return res, err
	}
	w0 := time.Now()
	obs.record(true)
	time.Sleep(window)
	rounds := obs.record(false)
	if sc.statements != nil {
		if s1, err = sc.statements(ctx); err != nil {
			return res, err
		}
	}
	c1, err := sc.cpuTime()
	if err != nil {
		return res, err
	}
	secs := time.Since(w0).Seconds()
	res.goroutines = runtime.NumGoroutine() - g0
	heap1 := readHeap()
	res.heapPerLock = float64(int64(heap1.HeapInuse)-int64(heap0.HeapInuse)) / float64(n)
	res.livePerLock = float64(int64(heap1.HeapAlloc)-int64(heap0.HeapAlloc)) / float64(n)
	if sc.statements != nil {
		res.counted = true
		res.stmtsSec = float64(s1-s0) / secs
		res.perInterval = res.stmtsSec * res.interval.Seconds()
		if sl.stmtsPerRenewal > 0 {
			res.renewed = res.perInterval / float64(sl.stmtsPerRenewal) / float64(n)
		}
	}
	res.cpu = (c1 - c0).Seconds() / secs
	if len(rounds) > 0 {
		took := make([]time.Duration, len(rounds))
		locks := 0
		for i, e := range rounds {
			took[i] = e.Took
			locks += e.Locks
		}
		res.renewed = float64(locks) / secs * res.interval.Seconds() / float64(n)
		slices.Sort(took)
		res.rounds = float64(len(rounds)) / secs * res.interval.Seconds()
		res.roundP50, res.roundMax = pct(took, 0.5), took[len(took)-1]
	}
	for why, n := range obs.losses() {
		log.Printf("renewal %s: %d locks lost: %s", sl.name, n, why)
	}
	if lost := h.lostCount(); lost > 0 {
		if res.short != "" {
			res.short += "; "
		}
		res.short += fmt.Sprintf("lost %d of the %d locks it held by the end of the window (its figures are of the window)", lost, n)
	}
	h.releaseAll()
	return res, nil
}

// bigTakeLimit is how long a renewal run of more than 10,000 locks may
// take to lock them: it is measured on those it holds after that.
const bigTakeLimit = 2 * time.Minute

// readHeap returns the process's memory statistics after a garbage
// collection.
func readHeap() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// procCPU returns the CPU time (user and system) of process pid, and, with
// children, of its child processes too (PostgreSQL's backends).
func procCPU(pid int, children bool) (time.Duration, error) {
	const tick = 10 * time.Millisecond // USER_HZ, 100 on Linux
	read := func(path string) (ppid int, cpu time.Duration, err error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, 0, err
		}
		// The command name, in parentheses, may hold spaces: the fields
		// after it are state, ppid, … with utime and stime the 12th and 13th.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			return 0, 0, fmt.Errorf("%s: short line", path)
		}
		ppid, _ = strconv.Atoi(f[1])
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		return ppid, time.Duration(u+st) * tick, nil
	}
	_, total, err := read(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil || !children {
		return total, err
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		if ppid, cpu, err := read(p); err == nil && ppid == pid {
			total += cpu
		}
	}
	return total, nil
}
