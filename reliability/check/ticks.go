package check

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// A TickRun is one run of a scheduled job's tick, as its history or the
// command's own output tells it.
type TickRun struct {
	// Tick is the scheduled instant the run was for.
	Tick time.Time
	// Attempt is 1 for a tick's first run, n for its nth (a retry of a
	// failed run); 0 when the runner has no notion of attempts (a cron
	// line with leash run), which counts as 1.
	Attempt int
	// Outcome is how the run ended, as driver.Outcome names it: "missed"
	// records a tick that no instance ran, and "skipped" one that was
	// claimed but not run (the previous run still held the job's lock).
	// Empty means it ran.
	Outcome string
	// Started is when the run started, by the clock that judges
	// earliness (the store's); zero when unknown.
	Started time.Time
	// Where says who ran it (host:pid, an instance's id), for the report.
	Where string
}

// TickResult is what Ticks found.
type TickResult struct {
	// Ticks is how many expected ticks were checked.
	Ticks int
	// Duplicates are the ticks whose same attempt ran more than once, or
	// that ran an attempt after one that ended ok or lost: a tick run
	// twice. Must be empty.
	Duplicates []string
	// Missed are the expected ticks with no run, skipped or not (a
	// "missed" record does not count): ticks lost while an instance was
	// up. Must be empty.
	Missed []time.Time
	// Early are the runs that started more than the tolerance before
	// their tick. Must be empty.
	Early []string
}

// OK reports whether no tick ran twice, none was missed and none ran
// early.
func (r TickResult) OK() bool {
	return len(r.Duplicates) == 0 && len(r.Missed) == 0 && len(r.Early) == 0
}

func (r TickResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d ticks: %d run more than once, %d missed, %d early", r.Ticks, len(r.Duplicates), len(r.Missed), len(r.Early))
	for _, d := range r.Duplicates {
		fmt.Fprintf(&b, "\n  twice: %s", d)
	}
	for _, m := range r.Missed {
		fmt.Fprintf(&b, "\n  missed: %s", m.UTC().Format(time.RFC3339Nano))
	}
	for _, e := range r.Early {
		fmt.Fprintf(&b, "\n  early: %s", e)
	}
	return b.String()
}

// Ticks checks a scheduled job's runs against the ticks expected to run
// (those that came while at least one instance was up to claim them): no
// attempt of a tick may run more than once, nor follow an attempt that
// ended ok or lost, every expected tick must have
// a run (or a skipped claim), and no run may start more than tolerance
// before its tick. Runs of ticks not expected are checked for duplicates
// and earliness too.
func Ticks(runs []TickRun, expected []time.Time, tolerance time.Duration) TickResult {
	type key struct {
		tick    int64
		attempt int
	}
	var res TickResult
	seen := map[key][]TickRun{}
	claimed := map[int64]bool{}
	for _, r := range runs {
		if r.Outcome == "missed" {
			continue
		}
		claimed[r.Tick.UnixNano()] = true
		if r.Outcome == "skipped" {
			continue
		}
		k := key{r.Tick.UnixNano(), max(r.Attempt, 1)}
		seen[k] = append(seen[k], r)
		if !r.Started.IsZero() && r.Started.Before(r.Tick.Add(-tolerance)) {
			res.Early = append(res.Early, fmt.Sprintf("%s attempt %d by %s started %v before it",
				r.Tick.UTC().Format(time.RFC3339Nano), k.attempt, r.Where, r.Tick.Sub(r.Started)))
		}
	}
	// A tick is run again when any attempt follows one that ended ok or
	// lost (which may have done its work): only a failed or cancelled
	// attempt is retried.
	done := map[int64]int{} // tick -> its first attempt that ended ok or lost
	for k, rs := range seen {
		for _, r := range rs {
			if r.Outcome == "ok" || r.Outcome == "lost" {
				if a, ok := done[k.tick]; !ok || k.attempt < a {
					done[k.tick] = k.attempt
				}
			}
		}
	}
	for k, rs := range seen {
		if a, ok := done[k.tick]; ok && k.attempt > a {
			res.Duplicates = append(res.Duplicates, fmt.Sprintf("%s attempt %d ran (by %s) after attempt %d ended ok or lost",
				time.Unix(0, k.tick).UTC().Format(time.RFC3339Nano), k.attempt, rs[0].Where, a))
		}
		if len(rs) > 1 {
			var where []string
			for _, r := range rs {
				where = append(where, r.Where)
			}
			res.Duplicates = append(res.Duplicates, fmt.Sprintf("%s attempt %d ran %d times (%s)",
				time.Unix(0, k.tick).UTC().Format(time.RFC3339Nano), k.attempt, len(rs), strings.Join(where, ", ")))
		}
	}
	sort.Strings(res.Duplicates)
	sort.Strings(res.Early)
	for _, t := range expected {
		res.Ticks++
		if !claimed[t.UnixNano()] {
			res.Missed = append(res.Missed, t)
		}
	}
	return res
}
