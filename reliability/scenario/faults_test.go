package scenario_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
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
	for _, tc := range []struct {
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			srv := e.redis(testserver.RedisOptions{})
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
}

// contend runs n in-process workers on the lock server at addr for d, with
// a lease of 1s and the restart grace grace (as the user noInfoUser when
// noInfo), while fault runs; it returns what fault returned.
func (e *env) contend(addr string, n int, d time.Duration, grace time.Duration, noInfo bool, fault func(until int64) int) int {
	locks := e.lockNames(1)
	const lease = time.Second
	until := history.Now() + int64(d)
	var waits []func()
	for i := range n {
		cfg := e.config(fmt.Sprintf("client-%d", i), addr, locks, lease, d)
		cfg.Margin, cfg.Grace, cfg.NoInfo = lease/5, grace, noInfo
		cfg.HoldMin, cfg.HoldMax, cfg.Writes = lease/10, lease, 4
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
	e := newEnv(t)
	srv := e.redis(testserver.RedisOptions{})
	const lease = time.Second
	runs := e.contend(srv.Addr, 4, time.Duration(scale())*12*time.Second, 0, false, func(until int64) int {
		n := 0
		for history.Now() < until-int64(3*lease) {
			time.Sleep(lease/2 + time.Duration(e.rng.Int64N(int64(lease))))
			d := lease / 2
			if n%2 == 1 {
				d = 2 * lease
			}
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(d)
			if err := srv.Resume(); err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	})
	e.verify("server paused for 0.5 and 2 leases", runs, expect{})
}

// TestServerRestart kills the lock server (SIGKILL) and restarts it on the
// same port while four clients contend, once per persistence mode. With
// appendfsync always the locks survive, TTLs included, and the operator may
// declare it (NoRestartGrace, which the store checks against the server).
// Every other mode can lose the last grants: no persistence loses them all;
// an RDB snapshot (taken by the nemesis, the crash at a random point after
// it) and appendfsync everysec keep the restart marker but lose recent
// grants. The restart grace, which tells the new server process by its
// run_id, holds fresh grants back for a lease, so no forgotten lease is
// granted again. The negative controls turn the grace off (unchecked: the
// clients' ACL user may not run INFO) and the checker must find the double
// grants.
func TestServerRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     testserver.RedisOptions
		snapshot bool
		grace    time.Duration
		want     expect
	}{
		{"AOF, appendfsync always, declared durable", testserver.RedisOptions{AOF: true}, false, redisstore.NoRestartGrace, expect{}},
		{"AOF, appendfsync everysec, restart grace", testserver.RedisOptions{AOF: true, Args: []string{"--appendfsync", "everysec"}}, false, 0,
			expect{Note: "no grant for one lease after each restart (the grace)"}},
		{"RDB snapshot, restart grace", testserver.RedisOptions{}, true, 0, expect{Note: "no grant for one lease after each restart (the grace)"}},
		{"no persistence, restart grace", testserver.RedisOptions{}, false, 0, expect{Note: "no grant for one lease after each restart (the grace)"}},
		{"RDB snapshot, no grace (negative control)", testserver.RedisOptions{}, true, redisstore.NoRestartGrace, expect{DoubleGrant: true,
			Note: "control: the restarted server grants locks granted after the snapshot, whose leases still run"}},
		{"no persistence, no grace (negative control)", testserver.RedisOptions{}, false, redisstore.NoRestartGrace, expect{DoubleGrant: true,
			Note: "control: the emptied server grants locks whose leases still run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			noInfo := tc.grace == redisstore.NoRestartGrace && !tc.opts.AOF
			if noInfo {
				tc.opts.Args = append(tc.opts.Args, noInfoArgs...)
			}
			srv := e.redis(tc.opts)
			const lease = time.Second
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
			defer rdb.Close()
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
			if tc.want.DoubleGrant {
				// A control must show a double grant every time, and not every
				// crash makes one (the holder may be between holds): twice the
				// crashes make a run without one unlikely.
				d *= 2
			}
			runs := e.contend(srv.Addr, 4, d, tc.grace, noInfo, func(until int64) int {
				n := 0
				for history.Now() < until-int64(3*lease) {
					if tc.snapshot {
						// Crash at a random point over a lease after the
						// snapshot, once every lease it holds has ended (a
						// lock it brought back would only stand in the way
						// of the grants the control must show), while
						// someone holds the lock.
						wait("a snapshot", func(ctx context.Context) bool { return rdb.Save(ctx).Err() == nil })
						time.Sleep(lease + time.Duration(e.rng.Int64N(int64(lease/5))))
					}
					wait("a holder", func(ctx context.Context) bool {
						held, _ := rdb.Exists(ctx, locks[0]).Result()
						return held == 1
					})
					if err := srv.Restart(); err != nil {
						t.Fatal(err)
					}
					n++
					time.Sleep(lease + time.Duration(e.rng.Int64N(int64(lease))))
				}
				return n
			})
			e.verify("server kill and restart ("+tc.name+")", runs, tc.want)
		})
	}
}
