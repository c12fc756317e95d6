package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// TestSummaryRows: the opening table turns every ratio to the best peer so
// that above 1 means leash is ahead, names the best peer of each row, states
// waits over the FIFO ideal and hand-offs in round trips, and says whether
// each goal is met.
func TestSummaryRows(t *testing.T) {
	libs := []lib{{name: "leash Mutex"}, {name: "leash FairMutex", fair: true}, {name: "redsync"}, {name: "bsm/redislock"}, {name: "rueidislock"}}
	res := &results{libs: libs, uncontended: map[int][]map[string]uncontendedResult{},
		contended: map[time.Duration][]map[string]contendedResult{}, renewal: map[string][]renewalResult{}}
	us := time.Microsecond
	// cpu gives a run 1,000 locks at c µs of client and s µs of server CPU each.
	cpu := func(ops float64, c, s time.Duration) uncontendedResult {
		return uncontendedResult{opsPerSec: ops, locks: 1000, clientCPU: 1000 * c, serverCPU: 1000 * s}
	}
	for _, g := range goroutineCounts {
		res.uncontended[g] = []map[string]uncontendedResult{{
			"leash Mutex":     cpu(500, 20*us, 20*us),
			"leash FairMutex": cpu(1100, 30*us, 30*us),
			"redsync":         cpu(1000, 30*us, 20*us),
			"bsm/redislock":   cpu(800, 40*us, 40*us),
			"rueidislock":     cpu(100, 60*us, 20*us),
		}}
	}
	// waits: a run's waits whose p99 is p99 and longest longest.
	waits := func(p99, longest time.Duration) []time.Duration {
		w := make([]time.Duration, 100)
		for i := range w {
			w[i] = time.Millisecond
		}
		w[98], w[99] = p99, longest
		return w
	}
	// The FairMutex's holds, as long as asked, and its hand-off p50 of 1 ms
	// make the FIFO ideal at hold 1 ms 15 × (1 + 1) ms = 30 ms.
	fairHandoffs := []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}
	for _, h := range holds {
		res.contended[h] = []map[string]contendedResult{{
			"leash Mutex":     {perSec: 300, waits: waits(45*time.Millisecond, 20*time.Millisecond+100*time.Millisecond)},
			"leash FairMutex": {perSec: 330, waits: waits(45*time.Millisecond, 40*time.Millisecond+100*time.Millisecond), handoffs: fairHandoffs, holds: []time.Duration{h, h, h}},
			"redsync":         {perSec: 600, waits: waits(600*time.Millisecond, 2*time.Second)},
			"bsm/redislock":   {perSec: 400, waits: waits(300*time.Millisecond, time.Second)},
			"rueidislock":     {perSec: 100, waits: waits(900*time.Millisecond, 4*time.Second)},
		}}
	}
	rtt := 50 * us
	res.handoff = []map[string]handoffResult{{
		"leash Mutex":     {handoffs: []time.Duration{50 * us}, rtt: rtt},
		"leash FairMutex": {handoffs: []time.Duration{150 * us}, rtt: rtt},
		"redsync":         {handoffs: []time.Duration{100 * time.Millisecond}, rtt: rtt},
		"rueidislock":     {handoffs: []time.Duration{130 * us}, rtt: rtt},
	}}
	res.renewal["leash Mutex"] = []renewalResult{{n: 1000, scriptsSec: 2, heapPerLock: 700}, {n: 100_000, scriptsSec: 200, heapPerLock: 460}}
	res.renewal["rueidislock"] = []renewalResult{{n: 1000, scriptsSec: 400, heapPerLock: 2100}, {n: 100_000, failed: "lost 5 of 100000 held locks"}}
	type want struct {
		mutex, fair float64
		peer        string
		met         string
	}
	wants := map[string]want{
		"Uncontended Lock + Unlock, 1 goroutine: locks/s":                                                      {0.5, 1.1, "redsync", "Mutex no, FairMutex yes"},
		"CPU per uncontended Lock + Unlock, 64 goroutines, client + Redis":                                     {50.0 / 40, 50.0 / 60, "redsync (30 µs + 20 µs)", "Mutex yes, FairMutex no"},
		"One hot name, 16 clients, hold 1ms: grants/s":                                                         {0.5, 0.55, "redsync", "no"},
		"One hot name, 16 clients, hold 0 (no work): grants/s":                                                 {0.5, 0.55, "redsync", "—"},
		"One hot name, hold 1ms: longest wait":                                                                 {1000.0 / 120, 1000.0 / 140, "bsm/redislock", "—"},
		"One hot name, 16 clients, hold 1ms: wait p99 ÷ FIFO ideal":                                            {1.5, 1.5, "bsm/redislock 10.0×", "Mutex yes, FairMutex no"},
		"One hot name, 16 clients, hold 1ms: longest wait ÷ FIFO ideal":                                        {4, 140.0 / 30, "bsm/redislock 33.3×", "yes"},
		"Hand-off between two clients, Unlock returned → the other's Lock returned, p50: loopback round trips": {1, 3, "rueidislock 2.60 RTT", "Mutex yes, FairMutex no"},
		"Keeping 100,000 locks held: client heap per held lock":                                                {460, math.NaN(), "none held 100,000 (rueidislock: lost 5 of 100000 held locks)", "yes"},
	}
	seen := 0
	for _, r := range summaryRows(res) {
		w, ok := wants[r.what]
		if !ok {
			continue
		}
		seen++
		check := func(lib string, want float64) {
			got, ok := r.values[lib]
			if math.IsNaN(want) {
				if ok {
					t.Errorf("%s: %s has %v, want none", r.what, lib, got)
				}
				return
			}
			if !ok || math.Abs(got-want) > 1e-9 {
				t.Errorf("%s: %s %v, want %v", r.what, lib, got, want)
			}
		}
		check("leash Mutex", w.mutex)
		check("leash FairMutex", w.fair)
		if r.peer != w.peer {
			t.Errorf("%s: best peer %q, want %q", r.what, r.peer, w.peer)
		}
		if got := r.goal.met(r.values, []string{"leash Mutex", "leash FairMutex"}); got != w.met {
			t.Errorf("%s: met %q, want %q", r.what, got, w.met)
		}
	}
	if seen != len(wants) {
		t.Errorf("summary has %d of the %d rows checked", seen, len(wants))
	}
	var b strings.Builder
	writeSummary(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, res)
	for _, s := range []string{
		"above 1× leash is ahead", "Choose leash when", "lower and further left is better",
		"| 1.25× (20 µs + 20 µs) | 0.83× (30 µs + 30 µs) | redsync (30 µs + 20 µs) | below every peer (≥ 1×) | Mutex yes, FairMutex no |",
		"| 1.00 RTT | 3.00 RTT | rueidislock 2.60 RTT | ≤ 2 RTT |",
		"- Hand-off between two clients, Unlock returned → the other's Lock returned, p50: loopback round trips: Mutex 1.00 RTT, FairMutex 3.00 RTT; goal ≤ 2 RTT.\n",
		"| 460 B | — |",
		"**Where leash is still behind its goals in this run:**\n\n- Uncontended Lock + Unlock, 1 goroutine: locks/s: Mutex 0.50×, FairMutex 1.10×; goal ≥ 1× (aim 1.5×).\n",
	} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("summary lacks %q:\n%s", s, b.String())
		}
	}
	if strings.Contains(b.String(), "ahead in every uncontended row") {
		t.Errorf("summary says the peers are ahead in every uncontended row, but FairMutex is ahead at 1.1×:\n%s", b.String())
	}
}

// TestGoalMet: a goal with no bound says so, and a figure exactly at its
// bound meets it either way.
func TestGoalMet(t *testing.T) {
	libs := []string{"leash Mutex", "leash FairMutex"}
	for _, c := range []struct {
		g      goal
		values map[string]float64
		want   string
	}{
		{goal{}, map[string]float64{"leash Mutex": 3}, "—"},
		{goal{limit: map[string]float64{"leash Mutex": 2}, atMost: true}, map[string]float64{"leash Mutex": 2}, "yes"},
		{goal{limit: map[string]float64{"leash Mutex": 2}}, map[string]float64{"leash Mutex": 2}, "yes"},
		{goal{limit: map[string]float64{"leash Mutex": 2}, atMost: true}, map[string]float64{"leash Mutex": 2.01}, "no"},
		{goal{limit: map[string]float64{"leash Mutex": 1, "leash FairMutex": 1}}, map[string]float64{"leash Mutex": 1}, "Mutex yes, FairMutex not measured"},
	} {
		if got := c.g.met(c.values, libs); got != c.want {
			t.Errorf("%+v on %v: %q, want %q", c.g, c.values, got, c.want)
		}
	}
}

// TestCPUPerLock: the uncontended scenario measures the client's and the
// server's CPU over its timed interval, and divides each by the locks done.
func TestCPUPerLock(t *testing.T) {
	u := uncontendedResult{locks: 4, clientCPU: 100 * time.Microsecond, serverCPU: 60 * time.Microsecond}
	if c, s := u.cpuPerLock(); c != 25*time.Microsecond || s != 15*time.Microsecond {
		t.Errorf("cpuPerLock = %v, %v; want 25µs, 15µs", c, s)
	}
	if c, s := (uncontendedResult{}).cpuPerLock(); c != 0 || s != 0 {
		t.Errorf("cpuPerLock of no locks = %v, %v; want 0, 0", c, s)
	}
}

// TestFIFOIdealCountsHoldsAsHeld: the FIFO ideal counts each turn's hold as
// long as the holders held (their sleep overran), not as long as asked, and
// a turn as long as it lasted on average, long turns included.
func TestFIFOIdealCountsHoldsAsHeld(t *testing.T) {
	ms := time.Millisecond
	m := map[string]contendedResult{"fair": {
		holds:    []time.Duration{ms, 3 * ms / 2, 3 * ms / 2, 3 * ms / 2, 5 * ms},
		handoffs: []time.Duration{ms / 4, ms / 2, ms / 2, ms},
	}}
	// Means: holds 10.5 ms / 5 = 2.1 ms, hand-offs 2.25 ms / 4 = 0.5625 ms.
	if got, want := fifoIdeal(m, "fair"), time.Duration(contendedWorkers-1)*(2100*time.Microsecond+562500*time.Nanosecond); got != want {
		t.Errorf("fifoIdeal = %v, want %d × (mean hold 2.1ms + mean hand-off 0.5625ms) = %v", got, contendedWorkers-1, want)
	}
}
