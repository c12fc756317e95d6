package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/leash-go/leash/redlock"
	"github.com/redis/go-redis/v9"
)

// redlockLibs are the two Redlock implementations, each over the masters
// whose addresses are joined by commas in addr.
func redlockLibs() []lib {
	return []lib{
		{
			name:     "leash Mutex on redlock",
			settings: "`redlock.New(three redisstore Stores, nil)` (1 % + 2 ms drift allowance, member timeout max(lease/20, 250 ms)); `leash.New(q, nil)`: 30 s lease renewed every 10 s; `c.Mutex(name).Lock(ctx)`",
			open:     openRedlock,
		},
		{
			name:     "redsync",
			settings: "`redsync.New(three goredis pools).NewMutex(name)`: defaults (8 s expiry, 1 % drift, 32 tries, 50–250 ms retry delay); `LockContext`/`UnlockContext`",
			open:     openRedsyncQuorum,
		},
	}
}

type redlockLocker struct {
	leashLocker
	rdbs []*redis.Client
}

func openRedlock(addrs string) (locker, error) {
	var members []driver.Store
	var rdbs []*redis.Client
	for a := range strings.SplitSeq(addrs, ",") {
		rdb := goRedis(a)
		rdbs = append(rdbs, rdb)
		members = append(members, redisstore.New(rdb, nil))
	}
	q, err := redlock.New(members, nil)
	if err != nil {
		return nil, err
	}
	c, err := leash.New(q, nil)
	if err != nil {
		return nil, err
	}
	return &redlockLocker{leashLocker: leashLocker{c: c, rdb: rdbs[0]}, rdbs: rdbs}, nil
}

func (l *redlockLocker) close() error {
	err := l.c.Close()
	for _, r := range l.rdbs {
		r.Close()
	}
	return err
}

type redsyncQuorum struct {
	rs   *redsync.Redsync
	rdbs []*redis.Client
}

func openRedsyncQuorum(addrs string) (locker, error) {
	r := &redsyncQuorum{}
	var pools []redsyncredis.Pool
	for a := range strings.SplitSeq(addrs, ",") {
		rdb := goRedis(a)
		r.rdbs = append(r.rdbs, rdb)
		pools = append(pools, goredis.NewPool(rdb))
	}
	r.rs = redsync.New(pools...)
	return r, nil
}

func (r *redsyncQuorum) lock(ctx context.Context, name string) (func() error, error) {
	return (&redsyncLocker{rs: r.rs}).lock(ctx, name)
}

func (r *redsyncQuorum) close() error {
	for _, c := range r.rdbs {
		c.Close()
	}
	return nil
}

// TestRedlock measures leash's Redlock beside redsync's on the same three
// redis-servers, in one run: uncontended Lock+Unlock at 1 and 16
// goroutines, one hot name with 16 clients, and the cost of keeping 1,000
// locks held (one renewal round: leash's watchdog round, one Renew call per
// master; redsync: Extend on each mutex, one after another, as a ticker
// loop would). Each scenario runs $BENCH_REDLOCK times, the two libraries
// in alternating order; it prints the medians and the median of the
// per-run ratios (leash over redsync for throughput, redsync over leash for
// times: above 1, leash is ahead). It rewrites nothing.
//
//	cd bench && GOWORK=off BENCH_REDLOCK=5 go test -run TestRedlock -v -timeout 30m
func TestRedlock(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("BENCH_REDLOCK"))
	if runs <= 0 {
		t.Skip("set BENCH_REDLOCK=<runs> to run")
	}
	var addrs []string
	for range 3 {
		srv, err := testserver.StartRedis(testserver.RedisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		addrs = append(addrs, srv.Addr)
	}
	addr := strings.Join(addrs, ",")
	ls := redlockLibs()
	type fig struct {
		what         string
		unit         string
		higherBetter bool
		vals         [2][]float64
	}
	var figs []*fig
	add := func(what, unit string, higher bool) *fig {
		f := &fig{what: what, unit: unit, higherBetter: higher}
		figs = append(figs, f)
		return f
	}
	u1 := add("uncontended Lock+Unlock, 1 goroutine", "ops/s", true)
	u1p := add("uncontended Lock+Unlock, 1 goroutine: p50", "µs", false)
	u16 := add("uncontended Lock+Unlock, 16 goroutines", "ops/s", true)
	c0 := add("one hot name, 16 clients, hold 0: grants/s", "grants/s", true)
	c0w := add("one hot name, 16 clients, hold 0: p99 wait", "ms", false)
	c1 := add("one hot name, 16 clients, hold 1ms: grants/s", "grants/s", true)
	rn := add("one renewal round of 1,000 held locks", "ms", false)
	for r := range runs {
		for k := range 2 {
			i := (k + r) % 2
			l := ls[i]
			res, err := runUncontended(l, addr, 1, 2*time.Second, fmt.Sprintf("rl/%d/1", r), nil)
			if err != nil {
				t.Fatal(err)
			}
			u1.vals[i] = append(u1.vals[i], res.opsPerSec)
			u1p.vals[i] = append(u1p.vals[i], float64(res.p50)/float64(time.Microsecond))
			if res, err = runUncontended(l, addr, 16, 2*time.Second, fmt.Sprintf("rl/%d/16", r), nil); err != nil {
				t.Fatal(err)
			}
			u16.vals[i] = append(u16.vals[i], res.opsPerSec)
			cr, err := runContended(l, addr, 16, 0, 3*time.Second, fmt.Sprintf("rl/c0/%d", r))
			if err != nil {
				t.Fatal(err)
			}
			c0.vals[i] = append(c0.vals[i], cr.perSec)
			c0w.vals[i] = append(c0w.vals[i], float64(pct(cr.waits, 0.99))/float64(time.Millisecond))
			if cr, err = runContended(l, addr, 16, time.Millisecond, 3*time.Second, fmt.Sprintf("rl/c1/%d", r)); err != nil {
				t.Fatal(err)
			}
			c1.vals[i] = append(c1.vals[i], cr.perSec)
			d, err := renewalRound(i, addrs, fmt.Sprintf("rl/renew/%d", r))
			if err != nil {
				t.Fatal(err)
			}
			rn.vals[i] = append(rn.vals[i], float64(d)/float64(time.Millisecond))
		}
	}
	med := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	var md strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&md, format, a...) }
	p("%s\n## Redlock: leash beside redsync on three redis-servers\n\n", redlockMarker)
	p("Measured by `cd bench && GOWORK=off BENCH_REDLOCK=%d BENCH_REDLOCK_WRITE=1 go test -run TestRedlock -v -timeout 30m` on %s, %d runs, at another time than the sections above; both libraries on the same three redis-servers (no persistence), started for the run, in one process, in alternating order. ", runs, time.Now().UTC().Format("2006-01-02"), runs)
	p("The ratio column is the median over runs of leash's figure against redsync's in the same run, turned so that above 1× leash is ahead. ")
	p("*Uncontended* and *one hot name* are the scenarios of the sections above (2 s and 3 s runs). *One renewal round* takes 1,000 locks with a 30 s lease and times keeping them all held once: leash's watchdog round (one `Renew` of the whole batch, which the quorum sends to the three masters at once, one call each), against `Extend` on each redsync mutex in turn, as a ticker loop would (redsync cannot renew by itself).\n\n")
	for _, l := range ls {
		p("- %s: %s\n", l.name, l.settings)
	}
	p("\n| figure | leash on redlock | redsync | leash vs redsync |\n|---|---:|---:|---:|\n")
	for _, f := range figs {
		ratios := make([]float64, runs)
		for r := range runs {
			if f.higherBetter {
				ratios[r] = f.vals[0][r] / f.vals[1][r]
			} else {
				ratios[r] = f.vals[1][r] / f.vals[0][r]
			}
		}
		p("| %s | %.4g %s | %.4g %s | **%.2f×** |\n", f.what, med(f.vals[0]), f.unit, med(f.vals[1]), f.unit, med(ratios))
	}
	p("\nReading it: every Redlock operation is a round trip to each master, and on this 2-core machine the three redis-servers and the client share the cores, so the per-master cost of leash's heavier scripts (fencing token, restart grace, Redisson layout; see the notes above) counts three times, and a leash grant costs one round trip more, to one master: its fence floor (the fencing counter of a master that did not issue the token is raised to it before Lock returns, so that tokens grow whichever majority grants next; `go doc ./redlock`). Uncontended, leash is behind. On a hot name a release wakes each waiting client once (the masters' notifications merged, passed on 1–2 ms after the first) and a name refused lately is asked of one master first, so a loser costs one round trip to one master; redsync's waiters sleep 50–250 ms and the client that released takes the lock again at once, which leash's woken waiters contend for: leash is behind in grants per second there. Keeping many locks held is where the watchdog's batching pays: one call per master per round, against one round trip per lock.\n")
	fmt.Print(md.String())
	if os.Getenv("BENCH_REDLOCK_WRITE") == "" {
		return
	}
	const doc = "../BENCHMARKS.md"
	old, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := splitRedlock(old)
	if err := os.WriteFile(doc, append(before, md.String()...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// renewalRound takes 1,000 locks with library i (0 leash, 1 redsync) and
// returns how long one round of keeping them held took: leash's Renew of
// all of them (what its watchdog sends each interval), or redsync's Extend
// of each mutex in turn.
func renewalRound(i int, addrs []string, prefix string) (time.Duration, error) {
	const n = 1000
	ctx := context.Background()
	var rdbs []*redis.Client
	defer func() {
		for _, r := range rdbs {
			r.Close()
		}
	}()
	for _, a := range addrs {
		rdbs = append(rdbs, goRedis(a))
	}
	if i == 0 {
		members := make([]driver.Store, len(rdbs))
		for m, r := range rdbs {
			members[m] = redisstore.New(r, nil)
		}
		q, err := redlock.New(members, nil)
		if err != nil {
			return 0, err
		}
		defer q.Close()
		reqs := make([]driver.Request, n)
		for k := range reqs {
			reqs[k] = driver.Request{Name: fmt.Sprintf("%s/%d", prefix, k), Owner: fmt.Sprintf("00000000-0000-4000-8000-%012d:1", k), Lease: peerLease}
			if g, err := q.Acquire(ctx, reqs[k]); err != nil || !g.Acquired {
				return 0, fmt.Errorf("acquire %d: %v %v", k, g, err)
			}
		}
		t0 := time.Now()
		for _, r := range q.Renew(ctx, reqs) {
			if r.Err != nil || r.Status != driver.Renewed {
				return 0, fmt.Errorf("renew: %+v", r)
			}
		}
		d := time.Since(t0)
		for _, r := range reqs {
			_ = q.Release(ctx, r)
		}
		return d, nil
	}
	var pools []redsyncredis.Pool
	for _, r := range rdbs {
		pools = append(pools, goredis.NewPool(r))
	}
	rs := redsync.New(pools...)
	ms := make([]*redsync.Mutex, n)
	for k := range ms {
		ms[k] = rs.NewMutex(fmt.Sprintf("%s/%d", prefix, k), redsync.WithExpiry(peerLease))
		if err := ms[k].LockContext(ctx); err != nil {
			return 0, err
		}
	}
	t0 := time.Now()
	for _, m := range ms {
		if ok, err := m.ExtendContext(ctx); err != nil || !ok {
			return 0, errors.Join(errors.New("redsync: extend failed"), err)
		}
	}
	d := time.Since(t0)
	for _, m := range ms {
		_, _ = m.UnlockContext(ctx)
	}
	return d, nil
}
