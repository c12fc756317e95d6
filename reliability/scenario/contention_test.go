package scenario_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leash-go/leash/internal/faultproxy"
	"github.com/leash-go/leash/reliability/history"
)

// TestBaselineContention: six clients contend for two locks with no fault.
// Every grant must be safe and every holder's deadline respected.
func TestBaselineContention(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnvOn(t, b)
		srv := e.server()
		locks := e.lockNames(2)
		const lease = time.Second
		var waits []func()
		for i := range 6 {
			cfg := e.config(fmt.Sprintf("client-%d", i), srv.Addr, locks, lease, b.window(time.Duration(scale())*8*time.Second))
			cfg.Reenter = 1
			cfg.HoldMin, cfg.HoldMax = lease/100, lease/25
			waits = append(waits, e.goWorker(cfg))
		}
		for _, w := range waits {
			w()
		}
		e.verify("baseline contention", 0, expect{})
	})
}

// nemesis injects one random network fault at a time into random proxies
// until the deadline, and heals everything at the end. It returns how many
// faults it injected.
func (e *env) nemesis(proxies []*faultproxy.Proxy, lease time.Duration, until int64) int {
	n := 0
	for history.Now() < until {
		time.Sleep(time.Duration(e.rng.Int64N(int64(lease))))
		p := proxies[e.rng.IntN(len(proxies))]
		d := lease/5 + time.Duration(e.rng.Int64N(int64(5*lease/2)))
		switch e.rng.IntN(5) {
		case 0:
			p.Blackhole()
		case 1:
			p.BlackholeReplies()
		case 2:
			p.SetLatency(time.Duration(e.rng.Int64N(int64(lease / 3))))
		case 3:
			p.Refuse()
			p.Reset()
		case 4:
			p.Reset()
			d = 0
		}
		n++
		time.Sleep(d)
		p.Heal()
	}
	return n
}

// partitioned runs workers each behind its own proxy under the nemesis, on
// each backend.
func partitioned(t *testing.T, scenario string, clients, locks, reenter int) {
	forEachBackend(t, func(t *testing.T, b backend) { partitionedOn(t, b, scenario, clients, locks, reenter) })
}

// partitionedOn runs partitioned's scenario on b.
func partitionedOn(t *testing.T, b backend, scenario string, clients, locks, reenter int) {
	e := newEnvOn(t, b)
	srv := e.server()
	names := e.lockNames(locks)
	const lease = time.Second
	d := b.window(time.Duration(scale()) * 20 * time.Second)
	var (
		waits   []func()
		proxies []*faultproxy.Proxy
	)
	for i := range clients {
		p := e.proxy(srv.Addr)
		proxies = append(proxies, p)
		cfg := e.config(fmt.Sprintf("client-%d", i), p.Addr, names, lease, d)
		cfg.Margin = lease / 5
		cfg.Reenter = reenter
		cfg.HoldMax, cfg.Writes = 2*lease, 6 // some holds outlive a cut-off
		waits = append(waits, e.goWorker(cfg))
	}
	faults := e.nemesis(proxies, lease, history.Now()+int64(d))
	for _, w := range waits {
		w()
	}
	e.verify(scenario, faults, expect{})
	if reenter > 0 {
		ops := e.ops()
		problems, reentries := reentryProblems(ops)
		if reentries == 0 {
			problems = append(problems, "no re-entry happened: the scenario proved nothing about re-entry")
		}
		for _, p := range problems {
			t.Error(p)
		}
		if len(problems) > 0 {
			t.Log(e.saveHistory(ops))
		}
		t.Logf("%d re-entries", reentries)
	}
}

// TestRandomPartitions: six clients, each behind its own proxy, contend for
// two locks while one random fault at a time — black hole, replies lost
// (ambiguous results), latency, refused and reset connections — hits a
// random client for 0.2–2.7 leases.
func TestRandomPartitions(t *testing.T) { partitioned(t, "random partitions via the proxy", 6, 2, 0) }

// TestReentrantUnderPartitions: as TestRandomPartitions, with holders that
// re-enter their lock (up to three deep) through the hold's context. Every
// re-entry must carry its tenure's token, and only the outermost Unlock may
// release the lock on the server.
func TestReentrantUnderPartitions(t *testing.T) {
	partitioned(t, "re-entrant holders under partitions", 4, 1, 2)
}

// reentryProblems checks the re-entry invariants of a history (ops in call
// order) and returns what breaks them, and how many re-entries it holds:
// every re-entry carries its tenure's token, and no tenure is released on
// the server after its Lock returned and before its outermost Unlock, unless
// its holder was told it lost the lock by the time the release returned (a
// session store's lost lock, which the core releases as it tells the
// holder). A release sent before the tenure's Lock returned is the core
// giving back a grant that came too late to use (see lateGrant), before it
// tried again under the same owner; the grant checker judges the retake.
func reentryProblems(ops []history.Op) (problems []string, reentries int) {
	fence := map[string]int64{}
	locked := map[string]int64{}   // owner: Return of its outermost Lock
	unlocked := map[string]int64{} // owner: Call of its outermost Unlock
	told := map[string]int64{}     // owner: when its holder was told of a loss
	for _, op := range ops {
		switch {
		case op.Kind == history.Told:
			if _, ok := told[op.Owner]; !ok {
				told[op.Owner] = op.Call
			}
		case op.Kind == history.Lock && op.OK && op.Depth == 1:
			fence[op.Owner], locked[op.Owner] = op.Fence, op.Return
		case op.Kind == history.Lock && op.OK:
			reentries++
			if f, ok := fence[op.Owner]; !ok || f != op.Fence {
				problems = append(problems, fmt.Sprintf("re-entry of %s at depth %d has token %d, want its tenure's %d", op.Owner, op.Depth, op.Fence, f))
			}
		case op.Kind == history.Unlock && op.Depth == 1:
			unlocked[op.Owner] = op.Call
		}
	}
	for _, op := range ops {
		if op.Kind != history.StoreRelease || op.Ambiguous || !op.OK {
			continue
		}
		if at, ok := locked[op.Owner]; !ok || op.Call < at {
			continue // not a hold yet: a late grant given back, or a Lock that failed
		}
		if at, ok := told[op.Owner]; ok && at <= op.Return {
			continue
		}
		if at, ok := unlocked[op.Owner]; !ok || op.Call < at {
			problems = append(problems, fmt.Sprintf("tenure %s released on the server before its outermost Unlock, its holder not told", op.Owner))
		}
	}
	return problems, reentries
}

// TestReentryProblems checks reentryProblems on small histories: a grant
// given back before its Lock returned and a release its holder was told of
// pass; a release behind a holder's back, a missing Unlock and a re-entry
// with another token are caught.
func TestReentryProblems(t *testing.T) {
	const o = "owner:1"
	lock := func(call, ret int64, depth int, fence int64) history.Op {
		return history.Op{Kind: history.Lock, Owner: o, Call: call, Return: ret, OK: true, Depth: depth, Fence: fence}
	}
	release := func(call, ret int64) history.Op {
		return history.Op{Kind: history.StoreRelease, Owner: o, Call: call, Return: ret, OK: true}
	}
	unlock := func(call, ret int64) history.Op {
		return history.Op{Kind: history.Unlock, Owner: o, Call: call, Return: ret, OK: true, Depth: 1}
	}
	told := func(at int64) history.Op { return history.Op{Kind: history.Told, Owner: o, Call: at, Return: at} }
	for _, tc := range []struct {
		name string
		ops  []history.Op
		want int // problems
	}{
		{"released at the outermost Unlock", []history.Op{lock(10, 20, 1, 7), lock(30, 31, 2, 7), unlock(40, 50), release(41, 49)}, 0},
		{"late grant given back inside Lock", []history.Op{release(12, 14), lock(10, 20, 1, 7), lock(30, 31, 2, 7), unlock(40, 50), release(41, 49)}, 0},
		{"told before the release returned", []history.Op{lock(10, 20, 1, 7), lock(30, 31, 2, 7), release(32, 36), told(35), unlock(40, 50)}, 0},
		{"released behind the holder's back", []history.Op{lock(10, 20, 1, 7), lock(30, 31, 2, 7), release(32, 33), unlock(40, 50)}, 1},
		{"told only after the release returned", []history.Op{lock(10, 20, 1, 7), release(32, 33), told(34), unlock(40, 50)}, 1},
		{"released with no Unlock", []history.Op{lock(10, 20, 1, 7), release(32, 33)}, 1},
		{"re-entry with another token", []history.Op{lock(10, 20, 1, 7), lock(30, 31, 2, 8), unlock(40, 50), release(41, 49)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems, _ := reentryProblems(tc.ops)
			if len(problems) != tc.want {
				t.Errorf("problems %q, want %d", problems, tc.want)
			}
		})
	}
}
