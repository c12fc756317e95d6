package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// isPeer reports whether a library is one of the peers (not leash).
func isPeer(name string) bool { return !strings.HasPrefix(name, "leash") }

// ratioToBestPeer is the median over runs of value(lib) / value(best peer in
// that run), where higher is better.
func ratioToBestPeer[T any](runs []map[string]T, lib string, value func(T) float64) float64 {
	var ratios []float64
	for _, m := range runs {
		best := 0.0
		for name, r := range m {
			if isPeer(name) {
				best = max(best, value(r))
			}
		}
		if best > 0 {
			ratios = append(ratios, value(m[lib])/best)
		}
	}
	return median(ratios)
}

// fairLib returns the name of the first library that serves waiters in
// arrival order, or "" if none does.
func fairLib(libs []lib) string {
	if i := slices.IndexFunc(libs, func(l lib) bool { return l.fair }); i >= 0 {
		return libs[i].name
	}
	return ""
}

// fifoIdeal is the FIFO ideal wait of one contended run: every waiter waits
// for the others' turns, (contendedWorkers − 1) × (hold + hand-off), the
// means of the fair library's holds and hand-offs in that run (a turn's
// expected length; medians would leave out the long turns that a FIFO
// queue makes every waiter wait through alike). The hold is as long as the
// holders held, not as long as they asked to: a 1 ms sleep lasts longer
// than 1 ms on a busy machine, for every library alike.
func fifoIdeal(m map[string]contendedResult, fair string) time.Duration {
	return time.Duration(contendedWorkers-1) * (mean(m[fair].holds) + mean(m[fair].handoffs))
}

// overIdeal is the median over runs of lib's p-quantile wait over that run's
// FIFO ideal.
func overIdeal(runs []map[string]contendedResult, lib, fair string, p float64) float64 {
	var xs []float64
	for _, m := range runs {
		if ideal := fifoIdeal(m, fair); ideal > 0 {
			xs = append(xs, float64(pct(m[lib].waits, p))/float64(ideal))
		}
	}
	return median(xs)
}

func medianOf[T any](runs []map[string]T, lib string, value func(T) float64) float64 {
	var xs []float64
	for _, m := range runs {
		xs = append(xs, value(m[lib]))
	}
	return median(xs)
}

func report(res *results, cfg config) ([]byte, error) {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Benchmarks: leash and the Go peers\n\n")
	p("<!-- Written by the bench programme (bench/); do not edit by hand: run ./scripts/bench.sh. -->\n\n")
	writeSummary(p, res)
	p("## How it was measured\n\n")
	p("Every number below was measured in one run of one command, on one redis-server that the programme started for the run, with every library on the same server, goroutine counts and names. ")
	p("Timed scenarios ran %d times, each time with the libraries in a rotated order; the tables give the **median** of the runs, and **× best peer** is the median over runs of the ratio to the best of redsync, bsm/redislock and rueidislock *in the same run* (above 1: ahead). ", cfg.runs)
	p("Absolute times on a shared 2-core machine are noisy (the client and redis-server share the two cores); the ratios are the figures to read.\n\n")
	p("```sh\n./scripts/bench.sh          # = cd bench && GOWORK=off go run . (rewrites this file and bench/contended-waits.png)\n```\n\n")

	p("## Machine and versions\n\n")
	p("| | |\n|---|---|\n")
	p("| date | %s |\n", res.started.UTC().Format("2006-01-02 15:04 MST"))
	p("| CPU | %s, %d cores (GOMAXPROCS %d) |\n", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	p("| memory | %s |\n", memTotal())
	p("| OS | Linux %s |\n", strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")))
	p("| Go | %s, race detector off |\n", runtime.Version())
	p("| redis-server | %s, no persistence, loopback TCP |\n", res.redis)
	p("| leash | %s |\n", res.leash)
	for _, mod := range []string{"github.com/go-redsync/redsync/v4", "github.com/bsm/redislock", "github.com/redis/rueidis", "github.com/redis/go-redis/v9"} {
		p("| %s | %s |\n", mod, modVersion(mod))
	}
	p("| load average (1, 5, 15 min) | %s at the start, %s at the end (the machine is shared) |\n", res.loadStart, loadAvg())
	p("| whole run | %v |\n\n", res.elapsed.Round(time.Second))

	p("## How each library is configured\n\n")
	p("Each as its documentation recommends; every go-redis client uses go-redis's defaults (pool of 10 connections per CPU).\n\n")
	p("| library | settings |\n|---|---|\n")
	for _, l := range res.libs {
		p("| %s | %s |\n", l.name, l.settings)
	}
	p("\n")

	p("## Uncontended Lock + Unlock\n\n")
	p("Each goroutine locks and unlocks a name of its own, in a loop, for %v, through **one** client shared by all goroutines (one process). Latency is one Lock + Unlock. *Client CPU* is the programme's own CPU time (getrusage; every library runs in this one process, one after another) over the timed interval, *Redis CPU* redis-server's (INFO cpu, used_cpu_sys + used_cpu_user) over the same interval, each divided by the Lock + Unlock pairs done in it; *CPU × best peer* is the best peer's client + Redis CPU per lock over the library's, per run (above 1: less CPU than every peer). *Stuck*: Lock calls on the free name that had not returned after %v, summed over the runs (each is cancelled and the loop goes on).\n\n", cfg.uncontended, stuckAfter)
	p("| goroutines | library | ops/s | × best peer | p50 | p99 | client CPU/lock | Redis CPU/lock | CPU × best peer | stuck |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, g := range goroutineCounts {
		runs := res.uncontended[g]
		for _, l := range res.libs {
			ops := medianOf(runs, l.name, func(u uncontendedResult) float64 { return u.opsPerSec })
			ratio := ratioToBestPeer(runs, l.name, func(u uncontendedResult) float64 { return u.opsPerSec })
			stuck := 0
			for _, m := range runs {
				stuck += m[l.name].stuck
			}
			p("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", g, l.name, fmtNum(ops), fmtRatio(ratio, isPeer(l.name)),
				fmtDur(time.Duration(medianOf(runs, l.name, func(u uncontendedResult) float64 { return float64(u.p50) }))),
				fmtDur(time.Duration(medianOf(runs, l.name, func(u uncontendedResult) float64 { return float64(u.p99) }))),
				fmtDur(time.Duration(medianOf(runs, l.name, func(u uncontendedResult) float64 { c, _ := u.cpuPerLock(); return float64(c) }))),
				fmtDur(time.Duration(medianOf(runs, l.name, func(u uncontendedResult) float64 { _, s := u.cpuPerLock(); return float64(s) }))),
				fmtRatio(ratioToBestPeer(runs, l.name, lessIsMore(cpuPerLock)), isPeer(l.name)), stuck)
		}
	}
	p("\n")

	p("## One hot name, %d clients\n\n", contendedWorkers)
	p("%d goroutines, **each with its own client** (as %d processes would have), take the same name in a loop for %v, hold it (0 or 1 ms), and release it. ", contendedWorkers, contendedWorkers, cfg.contended)
	p("*Wait* is from calling Lock to holding the lock. *Hand-off* is from the holder calling Unlock to **another** client's Lock returning (a re-grant to the client that just released is counted under *self*, not as a hand-off). ")
	p("Mutual exclusion is checked on every grant of every run — each holder marks the lock taken and free with a compare-and-swap, and any overlap fails the programme — and held in every run below. ")
	p("*gave up*: times a peer's Lock returned its own give-up error (redsync after 32 tries, bsm/redislock at its deadline) and was called again; the wait counts from the first call. *stuck*: Lock calls still waiting %v after the run ended, cancelled then (their waits are in the chart as at least that long). Counts are summed over the runs.\n\n", stuckGrace)
	p("![Share of waits longer than x, per library](bench/contended-waits.png)\n\n")
	p("Lower and further left is better: a curve is the share of a library's waits longer than x, so one that reaches the bottom early has no long waits. The chart pools the waits of every run (its legend's percentiles are of the pooled waits); the tables give the medians of each run's figures.\n\n")
	fair := fairLib(res.libs)
	if fair != "" {
		p("*p99 ÷ ideal* is the wait p99 over the FIFO ideal of the same run (the sentence under each table), the median over runs.\n\n")
	}
	for _, hold := range holds {
		runs := res.contended[hold]
		p("### Hold %s\n\n", holdText(hold))
		idealCol, idealSep := "", ""
		if fair != "" {
			idealCol, idealSep = " p99 ÷ ideal |", "---:|"
		}
		p("| library | grants/s | × best peer | wait p50 | wait p99 | wait max |%s hand-off p50 | hand-off p99 | self | gave up | stuck | exclusion |\n", idealCol)
		p("|---|---:|---:|---:|---:|---:|%s---:|---:|---:|---:|---:|---|\n", idealSep)
		for _, l := range res.libs {
			med := func(f func(contendedResult) float64) float64 { return medianOf(runs, l.name, f) }
			total, selfN, gave, stuck := 0, 0, 0, 0
			for _, m := range runs {
				total += m[l.name].grants
				selfN += m[l.name].selfGrant
				gave += m[l.name].gaveUp
				stuck += m[l.name].stuck
			}
			ideal := ""
			if fair != "" {
				ideal = " " + fmtTimes(overIdeal(runs, l.name, fair, 0.99)) + " |"
			}
			p("| %s | %s | %s | %s | %s | %s |%s %s | %s | %s | %d | %d | ok, %d grants |\n", l.name,
				fmtNum(med(func(c contendedResult) float64 { return c.perSec })),
				fmtRatio(ratioToBestPeer(runs, l.name, func(c contendedResult) float64 { return c.perSec }), isPeer(l.name)),
				fmtDur(time.Duration(med(func(c contendedResult) float64 { return float64(pct(c.waits, 0.5)) }))),
				fmtDur(time.Duration(med(func(c contendedResult) float64 { return float64(pct(c.waits, 0.99)) }))),
				fmtDur(time.Duration(med(func(c contendedResult) float64 { return float64(pct(c.waits, 1)) }))), ideal,
				fmtDur(time.Duration(med(func(c contendedResult) float64 { return float64(pct(c.handoffs, 0.5)) }))),
				fmtDur(time.Duration(med(func(c contendedResult) float64 { return float64(pct(c.handoffs, 0.99)) }))),
				fmtPct(float64(selfN)/float64(max(total, 1))), gave, stuck, total)
		}
		if fair != "" {
			ho := time.Duration(medianOf(runs, fair, func(c contendedResult) float64 { return float64(mean(c.handoffs)) }))
			hd := time.Duration(medianOf(runs, fair, func(c contendedResult) float64 { return float64(mean(c.holds)) }))
			var ideals []float64
			for _, m := range runs {
				ideals = append(ideals, float64(fifoIdeal(m, fair)))
			}
			ideal := time.Duration(median(ideals))
			p("\nFIFO ideal, from %s's holds and hand-offs: every waiter waits for the %d others' turns, (%d − 1) × (mean hold + mean hand-off) = %d × (%s + %s) ≈ %s (medians over runs; a hold is as long as the holder's %v sleep lasted).\n",
				fair, contendedWorkers-1, contendedWorkers, contendedWorkers-1, fmtDur(hd), fmtDur(ho), fmtDur(ideal), hold)
		}
		p("\n")
	}

	writeHandoff(p, res)

	p("## Keeping many locks held (renewal)\n\n")
	p("One client takes N locks and keeps them; after %v the server's counters are read over %v. ", cfg.settle, cfg.window)
	p("Both renewing libraries use a 5 s lease here (rueidislock's default validity; leash's default is 30 s), so that they renew on comparable schedules: leash every lease/3, rueidislock every validity/2. ")
	p("*Scripts* are EVALSHA calls (one per request to Redis, except that leash pipelines all of a round's scripts in one round trip); *commands* also counts the commands run inside scripts (INFO commandstats). ")
	p("*Heap/lock* and *goroutines* are the client process's growth while holding N locks (the heap live after a GC, lowest of six samples over a renewal interval, so that a renewal round's passing buffers do not count; it includes the client's fixed cost, which shows at small N). Every lock was checked still held at the end of the window; a library that could not take N locks within %v, or lost some, is reported so. Measured once per invocation: these are counts, not timings.\n\n", renewalTakeLimit)
	p("| library | N | renew interval | scripts/s | scripts per interval | commands/s | Redis CPU | heap/lock | goroutines |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, rn := range renewers() {
		for _, r := range res.renewal[rn.name] {
			if r.failed != "" {
				p("| %s | %s | %v | %s | | | | | |\n", rn.name, fmtNum(float64(r.n)), r.interval.Round(time.Millisecond), r.failed)
				continue
			}
			p("| %s | %s | %v | %s | %s | %s | %.0f %% | %s | %s |\n", rn.name, fmtNum(float64(r.n)),
				r.interval.Round(time.Millisecond), fmtNum(r.scriptsSec), fmtNum(r.perInterval), fmtNum(r.commandsSec),
				100*r.cpu, fmtBytes(r.heapPerLock), fmtInt(r.goroutines))
		}
	}
	p("| redsync | — | cannot renew by itself: manual `Extend` only (auto-extend declined upstream, PR #153) | | | | | | |\n")
	p("| bsm/redislock | — | cannot renew by itself: manual `Refresh` only (a watchdog is declined by design) | | | | | | |\n\n")
	if notes, err := os.ReadFile("NOTES.md"); err == nil {
		b.Write(notes)
	}
	return b.Bytes(), nil
}

// writeHandoff writes the two-client hand-off section: each library's
// hand-off in time and in loopback round trips.
func writeHandoff(p func(string, ...any), res *results) {
	if len(res.handoff) == 0 {
		return
	}
	var rtts []float64
	for _, m := range res.handoff {
		for _, h := range m {
			rtts = append(rtts, float64(h.rtt))
			break // one round trip per run
		}
	}
	p("## Hand-off between two clients\n\n")
	p("Two clients of one library, one name: the holder takes it, the other client calls Lock, the holder releases it %s–%s later (`handoffGap`), and the **hand-off** is from the holder's Unlock **returning** to the other client's Lock returning, up to %d times per run, fewer once %v have passed (the polling peers wait out their retry intervals). A waiter whose Lock returned before the holder's Unlock did counts as 0: a lock granted in the release script reaches the waiter with the wake-up, which can arrive before the release's own reply. ",
		fmtDur(2*time.Millisecond), fmtDur(4*time.Millisecond), handoffSamples, handoffBudget)
	p("*RTT* is the loopback round trip, the median of %d PINGs on a go-redis client measured just before each run's hand-offs (median over runs %s); *in RTTs* is each run's hand-off p50 over that run's round trip, the median over runs. *Stuck*: waiters whose Lock had not returned %v after they called it, cancelled then and left out of the hand-offs, summed over the runs. A waiter granted before the holder released fails the programme.\n\n",
		rttPings, fmtDur(time.Duration(median(rtts))), handoffWait)
	p("| library | hand-off p50 | hand-off p99 | in RTTs (p50) | hand-offs | stuck |\n|---|---:|---:|---:|---:|---:|\n")
	for _, l := range res.libs {
		n, stuck := 0, 0
		for _, m := range res.handoff {
			n += len(m[l.name].handoffs)
			stuck += m[l.name].stuck
		}
		p("| %s | %s | %s | %s | %d | %d |\n", l.name,
			fmtDur(time.Duration(medianOf(res.handoff, l.name, func(h handoffResult) float64 { return float64(pct(h.handoffs, 0.5)) }))),
			fmtDur(time.Duration(medianOf(res.handoff, l.name, func(h handoffResult) float64 { return float64(pct(h.handoffs, 0.99)) }))),
			fmtNum(medianOf(res.handoff, l.name, handoffResult.rtts)), n, stuck)
	}
	p("\n")
}

func fmtNum(f float64) string {
	switch {
	case f >= 100:
		s := fmt.Sprintf("%.0f", f)
		var out []byte
		for i := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				out = append(out, ',')
			}
			out = append(out, s[i])
		}
		return string(out)
	case f >= 10:
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprintf("%.2f", f)
}

func fmtInt(n int) string {
	if n < 100 {
		return fmt.Sprint(n)
	}
	return fmtNum(float64(n))
}

func fmtRatio(r float64, peer bool) string {
	s := fmt.Sprintf("%.2f×", r)
	if !peer {
		s = "**" + s + "**"
	}
	return s
}

func fmtPct(f float64) string { return fmt.Sprintf("%.0f %%", 100*f) }

func fmtBytes(b float64) string {
	if b >= 1024 {
		return fmt.Sprintf("%.1f KiB", b/1024)
	}
	return fmt.Sprintf("%.0f B", b)
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// loadAvg is the machine's load average over 1, 5 and 15 minutes.
func loadAvg() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}

func cpuModel() string {
	for _, line := range strings.Split(readFile("/proc/cpuinfo"), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func memTotal() string {
	for _, line := range strings.Split(readFile("/proc/meminfo"), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(v), "%f", &kb)
			return fmt.Sprintf("%.0f GiB", kb/1024/1024)
		}
	}
	return "unknown"
}

func gitDescribe() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "local tree (git unavailable)"
	}
	return "commit " + strings.TrimSpace(string(out)) + " (local tree, through `replace`)"
}

func modVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return "unknown"
}

// infoField returns one field of an INFO reply.
func infoField(info, key string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return "unknown"
}
