package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// A summaryRow is one line of the page's opening table: leash's figure in
// the row's unit, the best peer, and the goal (issue #17) with whether it is
// met.
type summaryRow struct {
	what   string
	values map[string]float64 // leash library → figure; absent: not measured
	notes  map[string]string  // leash library → what the figure is made of, printed after it
	unit   string             // unitRatio, unitIdeal, unitRTT or unitBytes
	peer   string             // the best peer, with its own figure when the row is not a ratio to it
	goal   goal
}

// The units of a summaryRow's values.
const (
	unitRatio = "×"       // ratio to the best peer, above 1 ahead
	unitIdeal = "× ideal" // ratio to the FIFO ideal wait, lower better
	unitRTT   = "RTT"     // loopback round trips
	unitBytes = "B"
)

// A goal is what a row's figure should reach.
type goal struct {
	text   string             // as the table prints it; "" for none
	limit  map[string]float64 // leash library → the bound its figure must reach
	atMost bool               // the figure must be at most the bound (else at least)
}

// met says, for the libraries with a bound, whether their figures reach it:
// "yes", "no", or per library when they differ; "—" without a goal.
func (g goal) met(values map[string]float64, libs []string) string {
	var parts []string
	yes, no := 0, 0
	for _, l := range libs {
		lim, ok := g.limit[l]
		if !ok {
			continue
		}
		v, ok := values[l]
		verdict := "not measured"
		switch {
		case !ok:
		case g.atMost && v <= lim || !g.atMost && v >= lim:
			verdict = "yes"
			yes++
		default:
			verdict = "no"
			no++
		}
		parts = append(parts, strings.TrimPrefix(l, "leash ")+" "+verdict)
	}
	switch {
	case len(parts) == 0:
		return "—"
	case yes == len(parts):
		return "yes"
	case no == len(parts):
		return "no"
	}
	return strings.Join(parts, ", ")
}

// fmtValue prints one figure of a row in its unit.
func (r summaryRow) fmtValue(v float64) string {
	switch r.unit {
	case unitIdeal:
		return fmtTimes(v) + " ideal"
	case unitRTT:
		return fmtNum(v) + " RTT"
	case unitBytes:
		return fmtBytes(v)
	}
	return fmtTimes(v)
}

// bestPeer returns the peer with the best figure, and that figure; higher
// says which way is better.
func bestPeer(libs []lib, value func(name string) (float64, bool), higher bool) (string, float64) {
	name, best := "", 0.0
	for _, l := range libs {
		v, ok := value(l.name)
		if !isPeer(l.name) || !ok || v <= 0 {
			continue
		}
		if name == "" || higher && v > best || !higher && v < best {
			name, best = l.name, v
		}
	}
	return name, best
}

// perLib bounds every leash library's figure by fair for a fair one and by
// other for the rest; a bound of 0 means none.
func perLib(libs []lib, other, fair float64) map[string]float64 {
	m := map[string]float64{}
	for _, l := range libs {
		b := other
		if l.fair {
			b = fair
		}
		if !isPeer(l.name) && b > 0 {
			m[l.name] = b
		}
	}
	return m
}

// cpuPerLock is a run's client + server CPU per Lock+Unlock, in ns.
func cpuPerLock(u uncontendedResult) float64 {
	c, s := u.cpuPerLock()
	return float64(c + s)
}

// lessIsMore turns a lower-is-better figure into a higher-is-better one, so
// that ratioToBestPeer gives the best peer's figure over the library's.
func lessIsMore[T any](f func(T) float64) func(T) float64 {
	return func(x T) float64 {
		if v := f(x); v > 0 {
			return 1 / v
		}
		return 0
	}
}

// summaryRows derives the opening table from the measured results: the
// throughput and CPU ratios exactly as the tables print them (the median over
// runs of the ratio to that run's best peer), the longest waits (the best
// peer's median over leash's), the hot name's waits over the FIFO ideal and
// the hand-off in round trips (medians over runs of each run's ratio), and
// the renewal costs at the largest N.
func summaryRows(res *results) []summaryRow {
	var rows []summaryRow
	leashes := func(f func(name string) (float64, bool)) map[string]float64 {
		m := map[string]float64{}
		for _, l := range res.libs {
			if v, ok := f(l.name); !isPeer(l.name) && ok {
				m[l.name] = v
			}
		}
		return m
	}
	for _, g := range goroutineCounts {
		runs := res.uncontended[g]
		ops := func(u uncontendedResult) float64 { return u.opsPerSec }
		peer, _ := bestPeer(res.libs, func(n string) (float64, bool) { return medianOf(runs, n, ops), true }, true)
		rows = append(rows, summaryRow{
			what:   fmt.Sprintf("Uncontended Lock + Unlock, %d goroutine%s: locks/s", g, plural(g)),
			values: leashes(func(n string) (float64, bool) { return ratioToBestPeer(runs, n, ops), true }),
			unit:   unitRatio,
			peer:   peer,
			goal:   goal{text: "≥ 1× (aim 1.5×)", limit: perLib(res.libs, 1, 1)},
		})
	}
	if g := slices.Max(goroutineCounts); len(res.uncontended[g]) > 0 {
		runs := res.uncontended[g]
		split := func(n string) string {
			c := medianOf(runs, n, func(u uncontendedResult) float64 { c, _ := u.cpuPerLock(); return float64(c) })
			s := medianOf(runs, n, func(u uncontendedResult) float64 { _, s := u.cpuPerLock(); return float64(s) })
			return fmtDur(time.Duration(c)) + " + " + fmtDur(time.Duration(s))
		}
		peer, _ := bestPeer(res.libs, func(n string) (float64, bool) { return medianOf(runs, n, cpuPerLock), true }, false)
		notes := map[string]string{}
		for _, l := range res.libs {
			if !isPeer(l.name) {
				notes[l.name] = split(l.name)
			}
		}
		if peer != "" {
			peer += " (" + split(peer) + ")"
		}
		rows = append(rows, summaryRow{
			what:   fmt.Sprintf("CPU per uncontended Lock + Unlock, %d goroutines, client + Redis", g),
			values: leashes(func(n string) (float64, bool) { return ratioToBestPeer(runs, n, lessIsMore(cpuPerLock)), true }),
			notes:  notes,
			unit:   unitRatio,
			peer:   peer,
			goal:   goal{text: "below every peer (≥ 1×)", limit: perLib(res.libs, 1, 1)},
		})
	}
	for _, hold := range holds {
		runs := res.contended[hold]
		per := func(c contendedResult) float64 { return c.perSec }
		peer, _ := bestPeer(res.libs, func(n string) (float64, bool) { return medianOf(runs, n, per), true }, true)
		row := summaryRow{
			what:   fmt.Sprintf("One hot name, %d clients, hold %s: grants/s", contendedWorkers, holdText(hold)),
			values: leashes(func(n string) (float64, bool) { return ratioToBestPeer(runs, n, per), true }),
			unit:   unitRatio,
			peer:   peer,
		}
		if hold > 0 {
			row.goal = goal{text: "≥ 0.9×", limit: perLib(res.libs, 0.9, 0.9)}
		}
		rows = append(rows, row)
	}
	for _, hold := range holds {
		runs := res.contended[hold]
		longest := func(n string) (float64, bool) {
			return medianOf(runs, n, func(c contendedResult) float64 { return float64(pct(c.waits, 1)) }), true
		}
		peer, best := bestPeer(res.libs, longest, false)
		rows = append(rows, summaryRow{
			what:   fmt.Sprintf("One hot name, hold %s: longest wait", holdText(hold)),
			values: leashes(func(n string) (float64, bool) { v, _ := longest(n); return best / v, v > 0 }),
			unit:   unitRatio,
			peer:   peer,
		})
	}
	if fair := fairLib(res.libs); fair != "" {
		for _, hold := range holds {
			runs := res.contended[hold]
			if hold == 0 || len(runs) == 0 {
				continue // issue #17's goals are at a held lock
			}
			for _, q := range []struct {
				what      string
				p         float64
				goal      string
				other, fr float64
			}{
				{"wait p99", 0.99, "Mutex ≤ 2×, FairMutex ≤ 1.25×", 2, 1.25},
				{"longest wait", 1, "Mutex ≤ 4×", 4, 0},
			} {
				over := func(n string) (float64, bool) { return overIdeal(runs, n, fair, q.p), true }
				peer, best := bestPeer(res.libs, over, false)
				if peer != "" {
					peer += " " + fmtTimes(best)
				}
				rows = append(rows, summaryRow{
					what:   fmt.Sprintf("One hot name, %d clients, hold %s: %s ÷ FIFO ideal", contendedWorkers, holdText(hold), q.what),
					values: leashes(over),
					unit:   unitIdeal,
					peer:   peer,
					goal:   goal{text: q.goal, limit: perLib(res.libs, q.other, q.fr), atMost: true},
				})
			}
		}
	}
	if len(res.handoff) > 0 {
		rtts := func(n string) (float64, bool) {
			return medianOf(res.handoff, n, handoffResult.rtts), true
		}
		peer, best := bestPeer(res.libs, rtts, false)
		if peer != "" {
			peer += " " + fmtNum(best) + " RTT"
		}
		rows = append(rows, summaryRow{
			what:   "Hand-off between two clients, Unlock returned → the other's Lock returned, p50: loopback round trips",
			values: leashes(rtts),
			unit:   unitRTT,
			peer:   peer,
			goal:   goal{text: "≤ 2 RTT", limit: perLib(res.libs, 2, 2), atMost: true},
		})
	}
	rows = append(rows, renewalRows(res)...)
	return rows
}

// renewalRows are the summary's renewal rows, at the largest N that leash
// Mutex held: Redis scripts/s against the best peer holding as many, and
// the heap per held lock against its goal.
func renewalRows(res *results) []summaryRow {
	at := func(name string) (renewalResult, bool) {
		rs := res.renewal[name]
		for i := len(rs) - 1; i >= 0; i-- {
			if rs[i].failed == "" {
				return rs[i], true
			}
		}
		return renewalResult{}, false
	}
	lr, ok := at("leash Mutex")
	if !ok {
		return nil
	}
	same := func(value func(renewalResult) float64) func(n string) (float64, bool) {
		return func(n string) (float64, bool) {
			r, ok := at(n)
			return value(r), ok && r.n == lr.n
		}
	}
	held := fmt.Sprintf("Keeping %s locks held", fmtNum(float64(lr.n)))
	var rows []summaryRow
	scripts := func(r renewalResult) float64 { return r.scriptsSec }
	if peer, best := bestPeer(res.libs, same(scripts), false); peer != "" {
		rows = append(rows, summaryRow{
			what:   held + ": Redis scripts/s",
			values: map[string]float64{"leash Mutex": best / lr.scriptsSec},
			unit:   unitRatio,
			peer:   peer,
		})
	}
	heap := func(r renewalResult) float64 { return r.heapPerLock }
	peer, best := bestPeer(res.libs, same(heap), false)
	if peer != "" {
		peer += " " + fmtBytes(best)
	} else {
		// Say why no peer is beside it: each renewing peer's failure at this N.
		var why []string
		for _, l := range res.libs {
			for _, r := range res.renewal[l.name] {
				if isPeer(l.name) && r.n == lr.n && r.failed != "" {
					why = append(why, l.name+": "+r.failed)
				}
			}
		}
		peer = "none held " + fmtNum(float64(lr.n))
		if len(why) > 0 {
			peer += " (" + strings.Join(why, "; ") + ")"
		}
	}
	rows = append(rows, summaryRow{
		what:   held + ": client heap per held lock",
		values: map[string]float64{"leash Mutex": lr.heapPerLock},
		unit:   unitBytes,
		peer:   peer,
		goal:   goal{text: "≤ 512 B", limit: map[string]float64{"leash Mutex": 512}, atMost: true},
	})
	return rows
}

// fmtTimes formats a ratio with the digits that matter.
func fmtTimes(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f×", r)
	case r >= 10:
		return fmt.Sprintf("%.1f×", r)
	case r < 0.1:
		return fmt.Sprintf("%.2g×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// writeSummary writes the page's opening: the table, where leash is behind
// its goals, when to choose leash, and how to read the chart.
func writeSummary(p func(string, ...any), res *results) {
	var leashes []string
	for _, l := range res.libs {
		if !isPeer(l.name) {
			leashes = append(leashes, l.name)
		}
	}
	rows := summaryRows(res)
	p("## In short\n\n")
	p("Each figure is leash's, measured in the same run as the peers (redsync, bsm/redislock and rueidislock). ")
	p("A figure with a bare **×** is a ratio to the **best peer** of its row, turned so that **above 1× leash is ahead, below 1× behind**: for throughput, the *× best peer* column of the tables below; for CPU, the best peer's CPU per lock over leash's (leash's client + Redis CPU per lock in brackets); for the longest waits and renewal costs, the best peer's median over leash's. ")
	p("*× ideal* is a wait over the FIFO ideal of the same run (lower is better; the best peer's own ratio is beside it), *RTT* a time in loopback round trips (PING on a go-redis client, measured in the run), *B* bytes. ")
	p("*Goal* is issue #17's; *met* says whether this run's figure reaches it.\n\n")
	p("| | %s | best peer | goal | met |\n|---|%s---|---|---|\n", strings.Join(leashes, " | "), strings.Repeat("---:|", len(leashes)))
	behind := true
	var missed []string
	for _, r := range rows {
		var cells []string
		for _, l := range leashes {
			v, ok := r.values[l]
			if !ok {
				cells = append(cells, "—")
				continue
			}
			c := r.fmtValue(v)
			if n := r.notes[l]; n != "" {
				c += " (" + n + ")"
			}
			cells = append(cells, c)
			if strings.HasPrefix(r.what, "Uncontended") && v >= 1 {
				behind = false
			}
		}
		goalText, met := "—", r.goal.met(r.values, leashes)
		if r.goal.text != "" {
			goalText = r.goal.text
		}
		if met != "yes" && met != "—" {
			var figs []string
			for i, l := range leashes {
				if _, ok := r.goal.limit[l]; ok {
					figs = append(figs, strings.TrimPrefix(l, "leash ")+" "+cells[i])
				}
			}
			missed = append(missed, fmt.Sprintf("- %s: %s; goal %s.\n", r.what, strings.Join(figs, ", "), goalText))
		}
		p("| %s | %s | %s | %s | %s |\n", r.what, strings.Join(cells, " | "), r.peer, goalText, met)
	}
	if len(missed) > 0 {
		p("\n**Where leash is still behind its goals in this run:**\n\n%s\n", strings.Join(missed, ""))
	} else {
		p("\n**Every goal is met in this run.**\n\n")
	}
	p("**Choose leash when** a lock must be held exactly as long as its holder works (the watchdog renews it; a crashed holder's lock frees itself within one lease), the holder must be told at once when it loses the lock, writes must be fenced against a paused holder (every grant carries a growing fencing token), waiters must be woken by the release rather than poll, waits must stay short (the plain Mutex lets the releasing client re-take the lock until a waiter has waited 1 ms, then serves the starving waiters in order, as Go's sync.Mutex does; FairMutex serves every waiter in arrival order), one process keeps thousands of locks, or Java services using Redisson must exclude the Go ones on the same names. ")
	if behind {
		p("**Choose a peer** for short, uncontended locks that need none of that, where locks per second per core is what counts: the peers do less per lock and are ahead in every uncontended row.\n\n")
	} else {
		p("**Choose a peer** for short, uncontended locks that need none of that, where locks per second per core is what counts: the peers do less per lock.\n\n")
	}
	p("**The chart** (under *One hot name*) plots, for each library, the share of waits longer than x: **lower and further left is better** — a curve that reaches the bottom early has no long waits; one that stays up to the right has waits of seconds.\n\n")
}
