package main

import (
	"fmt"
	"strings"
)

// A summaryRow is one line of the page's opening table: leash's figure
// against the best peer's, turned so that above 1 means leash is ahead.
type summaryRow struct {
	what   string
	ratios map[string]float64 // leash library → ratio; absent: not measured
	peer   string             // the best peer
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

// summaryRows derives the opening table from the measured results: the
// uncontended and hot-name throughput ratios exactly as the tables print
// them (the median over runs of the ratio to that run's best peer), and, for
// the longest waits and the renewal costs, where lower is better, the best
// peer's median over leash's.
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
			ratios: leashes(func(n string) (float64, bool) { return ratioToBestPeer(runs, n, ops), true }),
			peer:   peer,
		})
	}
	for _, hold := range holds {
		runs := res.contended[hold]
		per := func(c contendedResult) float64 { return c.perSec }
		peer, _ := bestPeer(res.libs, func(n string) (float64, bool) { return medianOf(runs, n, per), true }, true)
		rows = append(rows, summaryRow{
			what:   fmt.Sprintf("One hot name, %d clients, hold %s: grants/s", contendedWorkers, holdText(hold)),
			ratios: leashes(func(n string) (float64, bool) { return ratioToBestPeer(runs, n, per), true }),
			peer:   peer,
		})
	}
	for _, hold := range holds {
		runs := res.contended[hold]
		longest := func(n string) (float64, bool) {
			return medianOf(runs, n, func(c contendedResult) float64 { return float64(pct(c.waits, 1)) }), true
		}
		peer, best := bestPeer(res.libs, longest, false)
		rows = append(rows, summaryRow{
			what:   fmt.Sprintf("One hot name, hold %s: longest wait", holdText(hold)),
			ratios: leashes(func(n string) (float64, bool) { v, _ := longest(n); return best / v, v > 0 }),
			peer:   peer,
		})
	}
	// Renewal, at the largest N every renewing library held.
	at := func(name string) (renewalResult, bool) {
		rs := res.renewal[name]
		for i := len(rs) - 1; i >= 0; i-- {
			if rs[i].failed == "" {
				return rs[i], true
			}
		}
		return renewalResult{}, false
	}
	if lr, ok := at("leash Mutex"); ok {
		for _, c := range []struct {
			what  string
			value func(renewalResult) float64
		}{
			{"Redis scripts/s", func(r renewalResult) float64 { return r.scriptsSec }},
			{"client heap per lock", func(r renewalResult) float64 { return r.heapPerLock }},
		} {
			same := func(n string) (float64, bool) {
				r, ok := at(n)
				return c.value(r), ok && r.n == lr.n
			}
			peer, best := bestPeer(res.libs, same, false)
			if peer == "" {
				continue
			}
			rows = append(rows, summaryRow{
				what:   fmt.Sprintf("Keeping %s locks held: %s", fmtNum(float64(lr.n)), c.what),
				ratios: map[string]float64{"leash Mutex": best / c.value(lr)},
				peer:   peer,
			})
		}
	}
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

// writeSummary writes the page's opening: the table, when to choose leash,
// and how to read the chart.
func writeSummary(p func(string, ...any), res *results) {
	var leashes []string
	for _, l := range res.libs {
		if !isPeer(l.name) {
			leashes = append(leashes, l.name)
		}
	}
	rows := summaryRows(res)
	p("## In short\n\n")
	p("Each figure is leash's against the **best peer** of its row (the best of redsync, bsm/redislock and rueidislock), turned so that **above 1× leash is ahead, below 1× behind**: for throughput, the *× best peer* column of the tables below; for waits and renewal costs, where lower is better, the best peer's median divided by leash's.\n\n")
	p("| | %s | best peer |\n|---|%s---|\n", strings.Join(leashes, " | "), strings.Repeat("---:|", len(leashes)))
	behind := true
	for _, r := range rows {
		var cells []string
		for _, l := range leashes {
			v, ok := r.ratios[l]
			if !ok {
				cells = append(cells, "—")
				continue
			}
			cells = append(cells, fmtTimes(v))
			if strings.HasPrefix(r.what, "Uncontended") && v >= 1 {
				behind = false
			}
		}
		p("| %s | %s | %s |\n", r.what, strings.Join(cells, " | "), r.peer)
	}
	p("\n**Choose leash when** a lock must be held exactly as long as its holder works (the watchdog renews it; a crashed holder's lock frees itself within one lease), the holder must be told at once when it loses the lock, writes must be fenced against a paused holder (every grant carries a growing fencing token), waiters must be woken by the release rather than poll, waits must stay short (the plain Mutex lets the releasing client re-take the lock until a waiter has waited 1 ms, then serves the starving waiters in order, as Go's sync.Mutex does; FairMutex serves every waiter in arrival order), one process keeps thousands of locks, or Java services using Redisson must exclude the Go ones on the same names. ")
	if behind {
		p("**Choose a peer** for short, uncontended locks that need none of that, where locks per second per core is what counts: the peers do less per lock and are ahead in every uncontended row.\n\n")
	} else {
		p("**Choose a peer** for short, uncontended locks that need none of that, where locks per second per core is what counts: the peers do less per lock.\n\n")
	}
	p("**The chart** (under *One hot name*) plots, for each library, the share of waits longer than x: **lower and further left is better** — a curve that reaches the bottom early has no long waits; one that stays up to the right has waits of seconds.\n\n")
}
