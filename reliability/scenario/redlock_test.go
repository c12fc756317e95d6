package scenario_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/faultproxy"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/leash-go/leash/redlock"
	"github.com/leash-go/leash/reliability/history"
	"github.com/redis/go-redis/v9"
)

// The Redlock scenarios: a redlock.Store over three independent
// redis-servers (no persistence, restart grace on), each worker reaching
// each master through a fault proxy of its own. They are not in [backends]:
// the shared scenarios fault "the" server, and a quorum has three. Rows in
// RELIABILITY.md are named "redlock: <scenario>".
var redlockBackend = backend{name: "redlock"}

// quorumMasters is the number of masters of the Redlock scenarios.
const quorumMasters = 3

// redlockClient builds a worker's Redlock store over the masters at addrs.
// Its readiness probe succeeds once a majority of them answer PING.
func redlockClient(cfg workerConfig, addrs []string) (lockClient, error) {
	timeout := workerTimeout(cfg)
	rdbs := make([]*redis.Client, len(addrs))
	members := make([]driver.Store, len(addrs))
	for i, a := range addrs {
		rdbs[i] = newRDB(a, timeout)
		members[i] = redisstore.New(rdbs[i], &redisstore.Options{RestartGrace: cfg.Grace, HealthCheck: 200 * time.Millisecond})
	}
	q, err := redlock.New(members, nil)
	if err != nil {
		return lockClient{}, err
	}
	ping := func(ctx context.Context) error {
		var ok atomic.Int32
		errs := make(chan error, len(rdbs))
		for _, r := range rdbs {
			// Owner: ping. Stops when the PING returns (bounded by ctx).
			go func() {
				err := r.Ping(ctx).Err()
				if err == nil {
					ok.Add(1)
				}
				errs <- err
			}()
		}
		var last error
		for range rdbs {
			if err := <-errs; err != nil {
				last = err
			}
		}
		if int(ok.Load()) < q.Quorum() {
			return fmt.Errorf("%d of %d masters answer: %w", ok.Load(), len(rdbs), last)
		}
		return nil
	}
	closeAll := func() {
		_ = q.Close()
		for _, r := range rdbs {
			_ = r.Close()
		}
	}
	return lockClient{store: q, ping: ping, close: closeAll}, nil
}

// goRedlock runs cfg in this process on a Redlock over addrs.
func (e *env) goRedlock(cfg workerConfig, addrs []string) (wait func()) {
	return e.goRun(cfg, func(rec *history.Recorder) error {
		lc, err := redlockClient(cfg, addrs)
		if err != nil {
			return err
		}
		return runOn(cfg, lc, rec, nil)
	})
}

// quorumProxies gives one client its own fault proxy to each master.
func (e *env) quorumProxies(ms []*testserver.Redis) ([]*faultproxy.Proxy, []string) {
	ps := make([]*faultproxy.Proxy, len(ms))
	addrs := make([]string, len(ms))
	for i, m := range ms {
		ps[i] = e.proxy(m.Addr)
		addrs[i] = ps[i].Addr
	}
	return ps, addrs
}

func (e *env) masters() []*testserver.Redis {
	ms := make([]*testserver.Redis, quorumMasters)
	for i := range ms {
		ms[i] = e.redis(testserver.RedisOptions{})
	}
	return ms
}

// TestRedlockMinorityFaults runs four clients contending for one lock over
// three masters while one fault at a time hits one master or one client's
// link to it: a master paused (SIGSTOP) for half a lease to two leases,
// killed and restarted without persistence (its restart grace keeps it from
// granting what it forgot), or one client's link black-holed. A majority
// stays healthy throughout: no double grant, no stale write, no holder told
// late.
func TestRedlockMinorityFaults(t *testing.T) {
	e := newEnvOn(t, redlockBackend)
	ms := e.masters()
	const lease = time.Second
	d := time.Duration(scale()) * 16 * time.Second
	locks := e.lockNames(1)
	var proxies []*faultproxy.Proxy
	var waits []func()
	for i := range 4 {
		ps, addrs := e.quorumProxies(ms)
		proxies = append(proxies, ps...)
		cfg := e.config(fmt.Sprintf("client-%d", i), "redlock", locks, lease, d)
		cfg.Margin = lease / 5
		cfg.HoldMin, cfg.HoldMax, cfg.Writes = lease/10, lease, 4
		waits = append(waits, e.goRedlock(cfg, addrs))
	}
	until := history.Now() + int64(d)
	runs := 0
	for history.Now() < until-int64(3*lease) {
		time.Sleep(lease/2 + time.Duration(e.rng.Int64N(int64(lease))))
		m := ms[e.rng.IntN(len(ms))]
		switch e.rng.IntN(3) {
		case 0:
			if err := m.Pause(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(lease/2 + time.Duration(e.rng.Int64N(int64(3*lease/2))))
			if err := m.Resume(); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := m.Restart(); err != nil {
				t.Fatal(err)
			}
		case 2:
			p := proxies[e.rng.IntN(len(proxies))]
			p.Blackhole()
			time.Sleep(lease/5 + time.Duration(e.rng.Int64N(int64(2*lease))))
			p.Heal()
		}
		runs++
	}
	for _, w := range waits {
		w()
	}
	e.verify("a minority of masters paused, restarted or cut off", runs, expect{})
}

// TestRedlockRestartGrace is Kleppmann's restart counter-example: a holder
// that reaches only masters 0 and 1 holds the lock; master 1 is killed and
// restarted without persistence, forgetting it; a second client, which
// reaches every master, tries the lock. Master 1's restart grace refuses it
// until the forgotten lease has ended: no double grant. The negative
// control declares the restarted master fresh (an operator's mistake, or a
// store without a grace): the second client gets masters 1 and 2 while the
// first still holds, and the checker must find the double grant.
func TestRedlockRestartGrace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fresh bool
		want  expect
	}{
		{"master restarted without persistence (restart grace)", false, expect{}},
		{"master restarted without persistence, declared fresh (negative control)", true,
			expect{DoubleGrant: true, Note: "control: without the grace the restarted master grants what it forgot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvOn(t, redlockBackend)
			ms := e.masters()
			const lease = time.Second
			locks := e.lockNames(1)
			ps, addrs := e.quorumProxies(ms)
			ps[2].Refuse() // the first holder reaches masters 0 and 1 only
			first := e.oneHold("holder", "redlock", locks, lease)
			first.HoldMin, first.HoldMax = 4*lease, 4*lease
			waitFirst := e.goRedlock(first, addrs)
			awaitHolding(t, e, locks[0])
			if err := ms[1].Restart(); err != nil {
				t.Fatal(err)
			}
			if tc.fresh {
				if err := ms[1].MarkFresh(); err != nil {
					t.Fatal(err)
				}
			}
			second := e.oneHold("second", "redlock", locks, lease)
			second.LockWait = 10 * lease
			direct := make([]string, len(ms))
			for i, m := range ms {
				direct[i] = m.Addr
			}
			waitSecond := e.goRedlock(second, direct)
			waitFirst()
			waitSecond()
			e.verify(tc.name, 1, tc.want)
		})
	}
}

// awaitHolding waits until one of e's workers holds lock (a minute at most:
// the worker must start, see its masters answer and take the lock).
func awaitHolding(t *testing.T, e *env, lock string) {
	t.Helper()
	for start := time.Now(); !e.holding(lock); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > time.Minute {
			t.Fatalf("no worker held %q within a minute", lock)
		}
	}
}
