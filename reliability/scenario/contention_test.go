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
		checkReentry(t, e.ops())
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

// checkReentry checks the re-entry invariants of a history: every re-entry
// carries its tenure's token, and no tenure is released on the server
// before its outermost Unlock, unless its holder was told it lost the lock
// by then (a session store's lost lock, which the core releases at once).
func checkReentry(t *testing.T, ops []history.Op) {
	t.Helper()
	fence := map[string]int64{}
	unlocked := map[string]int64{} // owner: Call of its outermost Unlock
	told := map[string]int64{}     // owner: when its holder was told of a loss
	reentries := 0
	for _, op := range ops {
		switch {
		case op.Kind == history.Told:
			if _, ok := told[op.Owner]; !ok {
				told[op.Owner] = op.Call
			}
		case op.Kind == history.Lock && op.OK && op.Depth == 1:
			fence[op.Owner] = op.Fence
		case op.Kind == history.Lock && op.OK:
			reentries++
			if f, ok := fence[op.Owner]; !ok || f != op.Fence {
				t.Errorf("re-entry of %s at depth %d has token %d, want its tenure's %d", op.Owner, op.Depth, op.Fence, f)
			}
		case op.Kind == history.Unlock && op.Depth == 1:
			unlocked[op.Owner] = op.Call
		}
	}
	for _, op := range ops {
		if op.Kind == history.StoreRelease && !op.Ambiguous && op.OK {
			if at, ok := told[op.Owner]; ok && at <= op.Return {
				// A lost hold that a session store would keep alive: the
				// core releases it as it tells the holder (the two race:
				// the holder was told by the time the release returned).
				continue
			}
			if at, ok := unlocked[op.Owner]; ok && op.Call < at {
				t.Errorf("tenure %s released on the server before its outermost Unlock", op.Owner)
			}
		}
	}
	if reentries == 0 {
		t.Errorf("no re-entry happened: the scenario proved nothing about re-entry")
	}
	t.Logf("%d re-entries, each with its tenure's token", reentries)
}
