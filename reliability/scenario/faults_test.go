package scenario_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/leash-go/leash/reliability/check"
	"github.com/leash-go/leash/reliability/history"
	"github.com/redis/go-redis/v9"
)

// TestHolderPause pauses a holder process (SIGSTOP) for 1.5 leases in the
// middle of its hold, while another client takes the lock and writes. No
// lease lock can stop the paused holder from believing it still holds: the
// overlap is expected and reported. The claims are that the server never
// grants overlapping leases, and that the fenced resource rejects the
// paused holder's writes — even from a careless holder that writes without
// checking its hold. The negative control makes the resource unfenced: the
// careless holder's stale write is then accepted, and the checker says so.
func TestHolderPause(t *testing.T) {
	cases := []struct {
		name               string
		careless, unfenced bool
		want               expect
	}{
		{"checks its hold before writing", false, false, expect{LateWhenPaused: true,
			Note: "the paused holder is told late (it was stopped); its first look after SIGCONT reports the loss, so it never writes"}},
		{"careless, fenced resource", true, false, expect{LateWhenPaused: true,
			Note: "the paused holder ignores its validity and writes after SIGCONT; the fence rejects every such write"}},
		{"careless, unfenced resource (negative control)", true, true, expect{LateWhenPaused: true, StaleWrite: true,
			Note: "control: without the fence the stale write lands"}},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnvOn(t, b)
				srv := e.server()
				locks := e.lockNames(1)
				const lease = time.Second
				runs := 2 * scale()
				for i := range runs {
					cfg := e.oneHold(fmt.Sprintf("holder-%d", i), srv.Addr, locks, lease)
					cfg.HoldMin, cfg.HoldMax, cfg.Writes = 4*lease, 4*lease, 40 // a write every 100ms
					cfg.Careless, cfg.Unfenced = tc.careless, tc.unfenced
					h := e.startChild(cfg)
					h.await("held", 30*time.Second)
					time.Sleep(lease / 4)
					h.stop()
					paused := time.Now()
					other := e.oneHold(fmt.Sprintf("other-%d", i), srv.Addr, locks, lease)
					other.HoldMin, other.HoldMax, other.Unfenced = lease/4, lease/4, tc.unfenced
					e.goWorker(other)()                               // waits out the paused holder's lease, then holds and writes
					time.Sleep(time.Until(paused.Add(3 * lease / 2))) // a pause of at least 1.5 leases
					h.cont()
					h.wait(30 * time.Second)
				}
				r := e.verify("holder pause past its lease ("+tc.name+")", runs, tc.want)
				if r.OverlapMS <= 0 {
					t.Errorf("believed overlap %.0fms, want > 0: a paused holder believes it holds", r.OverlapMS)
				}
			})
		}
	})
}

// contend runs n in-process workers on the lock server at addr for d, with
// a lease of 1s and the settings of worker (if not nil), while fault runs;
// it returns what fault returned.
func (e *env) contend(addr string, n int, d time.Duration, worker func(*workerConfig), fault func(until int64) int) int {
	locks := e.lockNames(1)
	const lease = time.Second
	until := history.Now() + int64(d)
	var waits []func()
	for i := range n {
		cfg := e.config(fmt.Sprintf("client-%d", i), addr, locks, lease, d)
		cfg.Margin = lease / 5
		cfg.HoldMin, cfg.HoldMax, cfg.Writes = lease/10, lease, 4
		if worker != nil {
			worker(&cfg)
		}
		waits = append(waits, e.goWorker(cfg))
	}
	runs := fault(until)
	for _, w := range waits {
		w()
	}
	return runs
}

// TestServerPause freezes the lock server (SIGSTOP) for half a lease and
// for two leases while four clients contend. The server's expiry clock runs
// on while it is stopped: after a long pause every lease has ended, so the
// holders must have been told by their deadlines.
func TestServerPause(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnvOn(t, b)
		srv := e.server()
		const lease = time.Second
		runs := e.contend(srv.Addr, 4, time.Duration(scale())*12*time.Second, nil, func(until int64) int {
			n := 0
			for history.Now() < until-int64(3*lease) {
				time.Sleep(lease/2 + time.Duration(e.rng.Int64N(int64(lease))))
				d := lease / 2
				if n%2 == 1 {
					d = 2 * lease
				}
				if err := srv.ctl.Pause(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(d)
				if err := srv.ctl.Resume(); err != nil {
					t.Fatal(err)
				}
				n++
			}
			return n
		})
		e.verify("server paused for 0.5 and 2 leases", runs, expect{})
	})
}

// restartCase is one case of TestServerRestart on a backend.
type restartCase struct {
	// name is the case's name, in the report in parentheses.
	name string
	// start starts the server for the case.
	start func(t *testing.T) server
	// worker, if not nil, sets the workers' case-specific fields.
	worker func(*workerConfig)
	// snapshot, if not nil, makes the server save its data (Redis: SAVE);
	// the crash then comes about a lease after it.
	snapshot func(ctx context.Context, addr string) error
	// window, if not zero, is the case's contention window at scale 1, in
	// place of 10s (20s for a control).
	window time.Duration
	want   expect
}

// durableRestarts are the restart cases of a durable database (a SQL
// store's): kill -9 and restart must lose no grant, so no double grant.
// The negative control runs the same crashes with every lease cut to a
// tenth on its way to the server (a server clock ten times fast, so that
// each lock expires long before its holder renews it at a third of the
// lease), which the history does not see: the checker must find the double
// grants. The control needs a store that keeps a lease of 100ms as such,
// not rounded up to a second. Its window is short: every hold longer than
// a tenth of the lease makes double grants, crash or not, and a long
// history of them only costs the linearizability check time.
func durableRestarts(start func(t *testing.T) server) []restartCase {
	return []restartCase{
		{name: "durable database", start: start},
		{name: "durable database, server clock 10x fast (negative control)", start: start, window: 5 * time.Second,
			worker: func(cfg *workerConfig) { cfg.FastServer = 10 },
			want: expect{DoubleGrant: true,
				Note: "control: the server frees each lock after a tenth of the lease the checker knows of, so the checker sees grants inside running leases"}},
	}
}

// redisRestarts are the restart cases of Redis, one per persistence mode.
// With appendfsync always the locks survive, TTLs included, and the
// operator may declare it (NoRestartGrace, which the store checks against
// the server). Every other mode can lose the last grants: no persistence
// loses them all; an RDB snapshot (taken by the nemesis, the crash at a
// random point after it) and appendfsync everysec keep the restart marker
// but lose recent grants. The restart grace, which tells the new server
// process by its run_id, holds fresh grants back for a lease, so no
// forgotten lease is granted again. The negative controls turn the grace
// off (unchecked: the clients' ACL user may not run INFO) and the checker
// must find the double grants.
func redisRestarts() []restartCase {
	mode := func(name string, opts testserver.RedisOptions, snapshot bool, grace time.Duration, want expect) restartCase {
		noInfo := grace == redisstore.NoRestartGrace && !opts.AOF
		if noInfo {
			opts.Args = append(opts.Args[:len(opts.Args):len(opts.Args)], noInfoArgs...)
		}
		rc := restartCase{name: name, want: want,
			start:  func(t *testing.T) server { return redisServer(testserver.NewRedis(t, opts)) },
			worker: func(cfg *workerConfig) { cfg.Grace, cfg.NoInfo = grace, noInfo },
		}
		if snapshot {
			rc.snapshot = func(ctx context.Context, addr string) error {
				rdb := redis.NewClient(&redis.Options{Addr: addr})
				defer rdb.Close()
				return rdb.Save(ctx).Err()
			}
		}
		return rc
	}
	grace := expect{Note: "no grant for one lease after each restart (the grace)"}
	return []restartCase{
		mode("AOF, appendfsync always, declared durable", testserver.RedisOptions{AOF: true}, false, redisstore.NoRestartGrace, expect{}),
		mode("AOF, appendfsync everysec, restart grace", testserver.RedisOptions{AOF: true, Args: []string{"--appendfsync", "everysec"}}, false, 0, grace),
		mode("RDB snapshot, restart grace", testserver.RedisOptions{}, true, 0, grace),
		mode("no persistence, restart grace", testserver.RedisOptions{}, false, 0, grace),
		mode("RDB snapshot, no grace (negative control)", testserver.RedisOptions{}, true, redisstore.NoRestartGrace, expect{DoubleGrant: true,
			Note: "control: the restarted server grants locks granted after the snapshot, whose leases still run"}),
		mode("no persistence, no grace (negative control)", testserver.RedisOptions{}, false, redisstore.NoRestartGrace, expect{DoubleGrant: true,
			Note: "control: the emptied server grants locks whose leases still run"}),
	}
}

// TestServerRestart kills the lock server (SIGKILL) and restarts it on the
// same port while four clients contend, each time while one of them holds
// the lock, in each of the backend's cases (see redisRestarts and
// durableRestarts).
func TestServerRestart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, tc := range b.restarts {
			t.Run(tc.name, func(t *testing.T) {
				for attempt := 1; ; attempt++ {
					if restartOnce(t, b, tc, attempt) {
						return
					}
				}
			})
		}
	})
}

// controlAttempts is how many runs a negative control of TestServerRestart
// gets, and controlGrants the grants below which a run that showed no
// double grant is too short to count: on a loaded machine a server's
// restart (ZooKeeper's takes seconds) can fill most of a control's short
// window, leaving a couple of grants and nothing to catch. A run with
// controlGrants grants or more must show a double grant, as every control
// must.
const (
	controlAttempts = 3
	controlGrants   = 10
)

// restartOnce runs one attempt of a TestServerRestart case and reports
// whether it was the last: a negative control's run too short to count
// (see controlGrants) is not verified, and another attempt follows, up to
// controlAttempts.
func restartOnce(t *testing.T, b backend, tc restartCase, attempt int) bool {
	e := newEnvOn(t, b)
	srv := tc.start(t)
	const lease = time.Second
	locks := e.lockNames(1)
	wait := func(what string, cond func(ctx context.Context) bool) {
		deadline := time.Now().Add(5 * lease)
		for time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			ok := cond(ctx)
			cancel()
			if ok {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%s: not within %v; going on", what, 5*lease)
	}
	d := time.Duration(scale()) * 10 * time.Second
	switch {
	case tc.window != 0:
		d = time.Duration(scale()) * tc.window
	case tc.want.DoubleGrant:
		// A control must show a double grant every time, and not every
		// crash makes one (the holder may be between holds): twice the
		// crashes make a run without one unlikely.
		d *= 2
	}
	runs := e.contend(srv.Addr, 4, d, tc.worker, func(until int64) int {
		n := 0
		for history.Now() < until-int64(3*lease) {
			if tc.snapshot != nil {
				// Crash at a random point over a lease after the
				// snapshot, once every lease it holds has ended (a
				// lock it brought back would only stand in the way
				// of the grants the control must show), while
				// someone holds the lock.
				wait("a snapshot", func(ctx context.Context) bool { return tc.snapshot(ctx, srv.Addr) == nil })
				time.Sleep(lease + time.Duration(e.rng.Int64N(int64(lease/5))))
			}
			wait("a holder", func(context.Context) bool { return e.holding(locks[0]) })
			if err := srv.ctl.Restart(); err != nil {
				t.Fatal(err)
			}
			n++
			time.Sleep(lease + time.Duration(e.rng.Int64N(int64(lease))))
		}
		return n
	})
	if tc.want.DoubleGrant && attempt < controlAttempts && check.GrantCount(e.ops()) < controlGrants {
		// A short history: checked at once here, and again by verify if it counts.
		if g := check.Grants(e.ops(), 20*time.Second); len(g.DoubleGrants) == 0 && g.Verdict != porcupine.Illegal {
			t.Logf("attempt %d of %d: %d grants (%d ambiguous store ops) and no double grant, too few to count as a control: running it again", attempt, controlAttempts, g.Grants, g.Ambiguous)
			return false
		}
	}
	e.verify("server kill and restart ("+tc.name+")", runs, tc.want)
	return true
}
