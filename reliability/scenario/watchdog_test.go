package scenario_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/reliability/history"
	"github.com/redis/go-redis/v9"
)

// TestScriptFlushAndBusy runs four clients while a chaos connection
// empties the script cache (SCRIPT FLUSH, so EVALSHA gets NOSCRIPT and must
// fall back to EVAL) and runs Lua scripts that spin past
// busy-reply-threshold, so that clients get BUSY: an error, never a success.
func TestScriptFlushAndBusy(t *testing.T) {
	e := newEnv(t)
	srv := e.redis(testserver.RedisOptions{Args: []string{"--busy-reply-threshold", "100"}})
	chaos := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 10 * time.Second})
	defer chaos.Close()
	const spin = `local t = redis.call('time'); local s = t[1] * 1000000 + t[2]
while true do t = redis.call('time'); if t[1] * 1000000 + t[2] - s > tonumber(ARGV[1]) then return 1 end end`
	var flushes, busies int
	runs := e.contend(srv.Addr, 4, time.Duration(scale())*10*time.Second, nil, func(until int64) int {
		for history.Now() < until {
			time.Sleep(time.Duration(e.rng.Int64N(int64(300 * time.Millisecond))))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if e.rng.IntN(2) == 0 {
				if err := chaos.ScriptFlush(ctx).Err(); err != nil {
					t.Errorf("SCRIPT FLUSH: %v", err)
				}
				flushes++
			} else {
				us := 150_000 + e.rng.Int64N(150_000) // 150–300ms of a 1s lease
				if err := chaos.Eval(ctx, spin, nil, us).Err(); err != nil && !strings.Contains(err.Error(), "BUSY") {
					t.Errorf("busy script: %v", err)
				}
				busies++
			}
			cancel()
		}
		return flushes + busies
	})
	t.Logf("%d script flushes, %d busy scripts", flushes, busies)
	e.verify("script cache flush and BUSY scripts", runs, expect{})
}

// TestWatchdogUnderLatencyAndResets holds one lock for ten leases through a
// proxy that adds latency and resets the connection every lease, while a
// monitor samples the key: whenever it is missing, the holder must already
// have been told. After Unlock the key must stay gone for three leases —
// no renewal outlives an unlock.
func TestWatchdogUnderLatencyAndResets(t *testing.T) {
	e := newEnv(t)
	srv := e.redis(testserver.RedisOptions{})
	p := e.proxy(srv.Addr)
	const lease = 1500 * time.Millisecond
	locks := e.lockNames(1)
	hold := time.Duration(scale()) * 10 * lease
	cfg := e.oneHold("holder", p.Addr, locks, lease)
	cfg.HoldMin, cfg.HoldMax, cfg.Writes, cfg.Margin = hold, hold, int(hold/(lease/2)), lease/5
	wait := e.goWorker(cfg)
	for held := false; !held; time.Sleep(10 * time.Millisecond) {
		for _, op := range e.recs[1].Ops() {
			held = held || (op.Kind == history.Lock && op.OK)
		}
	}
	p.SetLatency(lease / 50) // 30ms each way: a reconnection (dial, HELLO, EVALSHA) fits in the 500ms renew interval
	mon := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer mon.Close()
	resets, missing := 0, []int64{}
	nextReset := time.Now().Add(lease)
	ctx := context.Background()
	var unlocked bool
	for !unlocked {
		n, err := mon.Exists(ctx, locks[0]).Result()
		if err == nil && n == 0 {
			missing = append(missing, history.Now())
		}
		if time.Now().After(nextReset) {
			p.Reset()
			resets++
			nextReset = time.Now().Add(lease)
		}
		time.Sleep(50 * time.Millisecond)
		for _, op := range e.recs[1].Ops() {
			unlocked = unlocked || (op.Kind == history.Unlock && op.Return != history.Pending)
		}
	}
	wait()
	var granted, told int64 = history.Pending, history.Pending
	for _, op := range e.ops() {
		switch {
		case op.Kind == history.Lock && op.OK:
			granted = op.Return
		case op.Kind == history.Told:
			told = min(told, op.Call)
		case op.Kind == history.Unlock:
			told = min(told, op.Call)
		}
	}
	for _, at := range missing {
		if at > granted && at < told {
			t.Errorf("the key was missing %v after the grant while the holder had not been told", time.Duration(at-granted))
		}
	}
	if told != history.Pending && told < granted+int64(hold) {
		t.Logf("the holder lost the lock %v into its hold (told, as it must be): the faults beat the renewals", time.Duration(told-granted))
	}
	deadline := time.Now().Add(3 * lease)
	for time.Now().Before(deadline) {
		if n, _ := mon.Exists(ctx, locks[0]).Result(); n != 0 {
			t.Fatalf("the key exists after Unlock: a renewal outlived it")
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.verify(fmt.Sprintf("watchdog under %v latency and resets", lease/50), resets, expect{
		Note: "one hold of 10 leases; the key never went missing while the holder believed, and stayed gone 3 leases after Unlock"})
}

// TestHolderDeath kills a holder process (SIGKILL) in the middle of its
// hold, while another client waits for the lock: the holder's watchdog
// dies with it, its lease (or session) runs out, and the waiter gets the
// lock with a larger token. The time from the kill to the waiter's grant —
// the crash-recovery time, bounded by the lease on Redis and the SQL
// stores, by the lease rounded up plus a second on etcd, by the session
// timeout on ZooKeeper — is reported, not asserted.
func TestHolderDeath(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnvOn(t, b)
		srv := e.server()
		locks := e.lockNames(1)
		const lease = time.Second
		runs := 3 * scale()
		var recovery []time.Duration
		for i := range runs {
			cfg := e.oneHold(fmt.Sprintf("holder-%d", i), srv.Addr, locks, lease)
			cfg.HoldMin, cfg.HoldMax, cfg.Writes = 10*lease, 10*lease, 100
			h := e.startChild(cfg)
			h.await("held", 30*time.Second)
			other := e.oneHold(fmt.Sprintf("next-%d", i), srv.Addr, locks, lease)
			other.HoldMin, other.HoldMax, other.LockWait = lease/10, lease/10, 10*lease
			wait := e.goWorker(other)
			for !e.locking(other.Proc) { // the waiter waits for the lock
				time.Sleep(10 * time.Millisecond)
			}
			h.kill()
			killed := history.Now()
			wait()
			if d, ok := e.grantedAfter(other.Proc, killed); ok {
				recovery = append(recovery, d)
			}
		}
		note := "no grant after a kill"
		if len(recovery) > 0 {
			slices.Sort(recovery)
			note = fmt.Sprintf("next holder (waiting) in median %v, at worst %v after the kill (%d kills, lease %v)",
				recovery[len(recovery)/2].Round(10*time.Millisecond), recovery[len(recovery)-1].Round(10*time.Millisecond), len(recovery), lease)
		}
		t.Logf("crash recovery: %s; each: %v", note, recovery)
		e.verify("holder killed (SIGKILL)", runs, expect{Note: note})
	})
}

// locking reports whether proc, a worker of this process, has begun a Lock.
func (e *env) locking(proc string) bool {
	e.mu.Lock()
	recs := slices.Clone(e.recs)
	e.mu.Unlock()
	for _, r := range recs {
		for _, op := range r.Ops() {
			if op.Proc == proc && op.Kind == history.Lock {
				return true
			}
		}
	}
	return false
}

// grantedAfter returns how long after at proc's first Lock that returned a
// hold after at returned.
func (e *env) grantedAfter(proc string, at int64) (time.Duration, bool) {
	for _, op := range e.ops() {
		if op.Proc == proc && op.Kind == history.Lock && op.OK && op.Return > at {
			return time.Duration(op.Return - at), true
		}
	}
	return 0, false
}

// TestSkewedClientIsCaught is the notification checker's negative control:
// a client whose server lease is a third of what it believes (a server
// clock three times fast) is cut off by the proxy; the server frees the
// lock long before the client's deadline, another client takes it, and
// the checker must report the holder as told too late.
func TestSkewedClientIsCaught(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnvOn(t, b)
		srv := e.server()
		locks := e.lockNames(1)
		const lease = 1500 * time.Millisecond
		runs := 2 * scale()
		for i := range runs {
			p := e.proxy(srv.Addr)
			cfg := e.oneHold(fmt.Sprintf("skewed-%d", i), p.Addr, locks, lease)
			cfg.HoldMin, cfg.HoldMax, cfg.Writes, cfg.Skew = 3*lease, 3*lease, 30, 3
			h := e.startChild(cfg)
			h.await("held", 30*time.Second)
			p.Blackhole()
			other := e.oneHold(fmt.Sprintf("other-%d", i), srv.Addr, locks, lease)
			other.HoldMin, other.HoldMax = lease/4, lease/4
			e.goWorker(other)()
			p.Heal()
			h.wait(30 * time.Second)
		}
		e.verify("client that believes a 3x longer lease (negative control)", runs, expect{Late: true,
			Note: "control: the checker reports the holder told after the server freed the lock"})
	})
}
