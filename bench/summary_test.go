package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// TestSummaryRows: the opening table turns every ratio so that above 1 means
// leash is ahead, and names the best peer of each row.
func TestSummaryRows(t *testing.T) {
	libs := []lib{{name: "leash Mutex"}, {name: "redsync"}, {name: "bsm/redislock"}}
	res := &results{libs: libs, uncontended: map[int][]map[string]uncontendedResult{},
		contended: map[time.Duration][]map[string]contendedResult{}, renewal: map[string][]renewalResult{}}
	for _, g := range goroutineCounts {
		res.uncontended[g] = []map[string]uncontendedResult{{"leash Mutex": {opsPerSec: 500}, "redsync": {opsPerSec: 1000}, "bsm/redislock": {opsPerSec: 800}}}
	}
	waits := func(longest time.Duration) []time.Duration { return []time.Duration{time.Millisecond, longest} }
	for _, h := range holds {
		res.contended[h] = []map[string]contendedResult{{
			"leash Mutex":   {perSec: 300, waits: waits(20 * time.Millisecond)},
			"redsync":       {perSec: 600, waits: waits(2 * time.Second)},
			"bsm/redislock": {perSec: 400, waits: waits(time.Second)},
		}}
	}
	res.renewal["leash Mutex"] = []renewalResult{{n: 1000, scriptsSec: 2, heapPerLock: 700}}
	res.renewal["rueidislock"] = []renewalResult{{n: 1000, scriptsSec: 400, heapPerLock: 2100}}
	libs = append(libs, lib{name: "rueidislock"})
	res.libs = libs
	for _, h := range holds {
		res.contended[h][0]["rueidislock"] = contendedResult{perSec: 100, waits: waits(4 * time.Second)}
	}
	for _, g := range goroutineCounts {
		res.uncontended[g][0]["rueidislock"] = uncontendedResult{opsPerSec: 100}
	}
	want := map[string]struct {
		ratio float64
		peer  string
	}{
		"Uncontended Lock + Unlock, 1 goroutine: locks/s": {0.5, "redsync"},
		"One hot name, 16 clients, hold 1ms: grants/s":    {0.5, "redsync"},
		"One hot name, hold 1ms: longest wait":            {50, "bsm/redislock"},
		"Keeping 1,000 locks held: Redis scripts/s":       {200, "rueidislock"},
		"Keeping 1,000 locks held: client heap per lock":  {3, "rueidislock"},
	}
	seen := 0
	for _, r := range summaryRows(res) {
		w, ok := want[r.what]
		if !ok {
			continue
		}
		seen++
		if got := r.ratios["leash Mutex"]; math.Abs(got-w.ratio) > 1e-9 || r.peer != w.peer {
			t.Errorf("%s: ratio %v against %s, want %v against %s", r.what, got, r.peer, w.ratio, w.peer)
		}
	}
	if seen != len(want) {
		t.Errorf("summary has %d of the %d rows checked", seen, len(want))
	}
	var b strings.Builder
	writeSummary(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, res)
	for _, s := range []string{"above 1× leash is ahead", "Choose leash when", "ahead in every uncontended row", "lower and further left is better"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("summary lacks %q:\n%s", s, b.String())
		}
	}
}
