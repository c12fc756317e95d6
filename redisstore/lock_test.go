package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

func TestReentryDepthThree(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, nil)
	name := lockName(t)
	m := c.Mutex(name)
	h1, err := m.Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	h2, err := m.Lock(h1.Context())
	if err != nil {
		t.Fatal(err)
	}
	h3, err := m.Lock(h2.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h2.Fence() != h1.Fence() || h3.Fence() != h1.Fence() {
		t.Errorf("re-entry tokens %d %d, want %d", h2.Fence(), h3.Fence(), h1.Fence())
	}
	// A different context, even in this goroutine, waits like anyone else.
	if _, err := m.TryLock(bg(t)); !errors.Is(err, leash.ErrNotAcquired) {
		t.Errorf("TryLock with another context = %v, want ErrNotAcquired", err)
	}
	ctx, cancel := context.WithTimeout(bg(t), 300*time.Millisecond)
	defer cancel()
	if _, err := m.Lock(ctx); !errors.Is(err, leash.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock with another context = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
	for i, h := range []*leash.Hold{h3, h2, h1} {
		owner, err := rdb.HGetAll(bg(t), name).Result()
		if err != nil || len(owner) != 1 || owner[h1.Owner()] == "" {
			t.Fatalf("before unlock %d: hash = %v, %v; want held by %s", i+1, owner, err, h1.Owner())
		}
		if err := h.Unlock(bg(t)); err != nil {
			t.Fatalf("unlock %d: %v", i+1, err)
		}
	}
	if n, _ := rdb.Exists(bg(t), name).Result(); n != 0 {
		t.Errorf("lock key exists after the outermost Unlock")
	}
}

func TestWatchdogAndFixedLease(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	// A 2s lease, renewed every 667ms: a stall of over a second would lose
	// the watched lock, rightly, so the lease is not shorter.
	const lease = 2 * time.Second
	c := newClient(t, srv.Addr, &leash.Options{Lease: lease})
	base := lockName(t)

	watched, err := c.Mutex(base + "/watchdog").Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := c.Mutex(base+"/fixed", &leash.LockOptions{RenewInterval: leash.NoRenewal}).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	// The fixed lock's lease is the server's (PX): never extended.
	if pttl, err := rdb.PTTL(bg(t), base+"/fixed").Result(); err != nil || pttl <= 0 || pttl > lease {
		t.Fatalf("fixed lock's PTTL = %v, %v; want at most the %v lease", pttl, err, lease)
	}
	start := time.Now()
	var fixedGone time.Duration
	for time.Since(start) < 3*lease { // work for three leases
		owners, err := rdb.HGetAll(bg(t), base+"/watchdog").Result()
		if err != nil || owners[watched.Owner()] != "1" {
			t.Fatalf("at %v the watchdog lock is %v (%v), want held", time.Since(start), owners, err)
		}
		if watched.Err() != nil {
			t.Fatalf("at %v the watchdog hold reports %v", time.Since(start), watched.Err())
		}
		if n, _ := rdb.Exists(bg(t), base+"/fixed").Result(); n == 0 && fixedGone == 0 {
			fixedGone = time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if fixedGone == 0 {
		t.Errorf("the fixed %v lease was still held after %v", lease, 3*lease)
	}
	var le *leash.LostError
	if !errors.As(fixed.Err(), &le) || le.Reason != leash.ReasonExpired {
		t.Errorf("fixed hold Err = %v, want lost: expired", fixed.Err())
	}
	if err := watched.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
}

// holderKinds pairs each lock kind with a contender it excludes.
var holderKinds = []struct{ holder, contender string }{
	{"mutex", "mutex"}, {"fair", "fair"}, {"read", "write"}, {"write", "read"}, {"permit", "permit"},
}

func TestCrashedHolderFreesWithinOneLease(t *testing.T) {
	srv := sharedRedis(t)
	const lease = time.Second
	for _, k := range holderKinds {
		t.Run(k.holder, func(t *testing.T) {
			name := lockName(t)
			child := startKindHolder(t, srv.Addr, name, lease, k.holder)
			c := newClient(t, srv.Addr, nil)
			killed := time.Now()
			if err := child.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			h, err := lockKind(bg(t), c, k.contender, name)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Unlock(bg(t))
			// Within one lease plus a slow machine's slack; a lock that
			// waited for anything else (the contender's own 30s lease) would
			// take far longer.
			if d := time.Since(killed); d > lease+10*time.Second {
				t.Errorf("%s free %v after its holder was killed, want within one lease (%v) plus slack", k.holder, d, lease)
			}
			if h.Fence() <= child.fence {
				t.Errorf("next token %d, want > the crashed holder's %d", h.Fence(), child.fence)
			}
		})
	}
}

// TestPausedHolderIsToldBeforeItWrites pauses a holder process right after a
// write (it then sleeps 200ms before its next check) for 1.5 leases.
// Meanwhile another client takes the lock with a larger token and writes.
// When the paused holder resumes, its very first check reports the loss, so
// it never writes with its stale token.
func TestPausedHolderIsToldBeforeItWrites(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	const lease = time.Second
	for _, k := range holderKinds {
		t.Run(k.holder, func(t *testing.T) {
			name := lockName(t)
			child := startKindHolder(t, srv.Addr, name, lease, k.holder)
			if l := child.next(t, 5*time.Second); l != fmt.Sprintf("wrote %d accepted", child.fence) {
				t.Fatalf("holder said %q, want its first accepted write", l)
			}
			if err := child.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			paused := time.Now()
			c := newClient(t, srv.Addr, nil)
			h, err := lockKind(bg(t), c, k.contender, name) // granted once the paused lease runs out
			if err != nil {
				t.Fatal(err)
			}
			defer h.Unlock(bg(t))
			if h.Fence() <= child.fence {
				t.Fatalf("new token %d, want > %d", h.Fence(), child.fence)
			}
			if ok, err := fencedWrite(bg(t), rdb, name+"/resource", h.Fence()); !ok || err != nil {
				t.Fatalf("new holder's write = %v, %v; want accepted", ok, err)
			}
			time.Sleep(time.Until(paused.Add(3 * lease / 2)))
			child.Drain()
			if err := child.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if l := child.next(t, 5*time.Second); l != "lost expired" {
				t.Fatalf("resumed holder's first line = %q, want \"lost expired\" before any write", l)
			}
			if seen, _ := rdb.Get(bg(t), name+"/resource").Int64(); seen != h.Fence() {
				t.Errorf("resource holds token %d, want the new holder's %d", seen, h.Fence())
			}
		})
	}
}

func TestServerRestartWithoutPersistenceTellsEveryHolder(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	const lease = 2 * time.Second
	clients := []*leash.Client{newClient(t, srv.Addr, &leash.Options{Lease: lease}), newClient(t, srv.Addr, &leash.Options{Lease: lease})}
	var holds []*leash.Hold
	for i := range 6 {
		h, err := clients[i%2].Mutex(fmt.Sprintf("%s/%d", lockName(t), i)).Lock(bg(t))
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
	}
	restarted := time.Now()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for i, h := range holds {
		select {
		case <-h.Lost():
		case <-time.After(2 * lease):
			t.Fatalf("hold %d not told within %v of the restart", i, 2*lease)
		}
		var le *leash.LostError
		if !errors.As(h.Err(), &le) || le.Reason != leash.ReasonReleasedElsewhere {
			t.Errorf("hold %d: Err = %v, want lost: released elsewhere", i, h.Err())
		}
	}
	t.Logf("all holders told within %v of the restart", time.Since(restarted))
}

// TestCancelAtRandomMomentsLeavesNothingBehind races a waiter's cancellation
// against the holder's release many times. Whatever the interleaving, the
// lock must end up held exactly when Lock reported success.
func TestCancelAtRandomMomentsLeavesNothingBehind(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	holder, waiter := newClient(t, srv.Addr, nil), newClient(t, srv.Addr, nil)
	for i := range 60 {
		name := fmt.Sprintf("%s/%d", lockName(t), i)
		h, err := holder.Mutex(name).Lock(bg(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(bg(t), time.Duration(rand.IntN(3000))*time.Microsecond)
		go func() {
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			_ = h.Unlock(context.Background())
		}()
		got, err := waiter.Mutex(name).Lock(ctx)
		cancel()
		time.Sleep(20 * time.Millisecond) // let the holder's unlock land
		owners, _ := rdb.HGetAll(bg(t), name).Result()
		switch {
		case err == nil && (len(owners) != 1 || owners[got.Owner()] == ""):
			t.Fatalf("round %d: Lock succeeded but the lock is %v", i, owners)
		case err != nil && len(owners) != 0:
			t.Fatalf("round %d: Lock failed (%v) but left the lock %v behind", i, err, owners)
		case err != nil && !errors.Is(err, leash.ErrNotAcquired):
			t.Fatalf("round %d: Lock = %v, want ErrNotAcquired", i, err)
		}
		if got != nil {
			if err := got.Unlock(bg(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestHandOffIsPushed measures how long a waiter takes to get a lock after
// its release. The holder's lease is 30s, so a waiter woken by its fallback
// timer would take about 30s; one woken by the release message takes a
// couple of round trips.
func TestHandOffIsPushed(t *testing.T) {
	srv := sharedRedis(t)
	name := lockName(t)
	holder, waiter := newClient(t, srv.Addr, nil), newClient(t, srv.Addr, nil)
	var worst time.Duration
	for range 5 {
		h, err := holder.Mutex(name).Lock(bg(t))
		if err != nil {
			t.Fatal(err)
		}
		got := grantedAt(t, func() (*leash.Hold, error) { return waiter.Mutex(name).Lock(bg(t)) })
		time.Sleep(100 * time.Millisecond) // the waiter is subscribed and waiting
		released := time.Now()
		if err := h.Unlock(bg(t)); err != nil {
			t.Fatal(err)
		}
		at := <-got
		if at.IsZero() {
			t.FailNow()
		}
		worst = max(worst, at.Sub(released))
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("worst hand-off delay: %v (fallback would be ~30s)", worst)
	if worst > 2*time.Second {
		t.Errorf("hand-off took %v: the waiter was not woken by the release", worst)
	}
}

// TestRenewalBatching holds 10,000 locks and counts the scripts each renewal
// round sends once every lock is in one cohort, and the goroutines. It
// counts per round, never per span of time: on a busy machine a round may
// come late, but it must still renew every lock in ceil(n/batch) scripts.
func TestRenewalBatching(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	const (
		n     = 10000
		batch = redisstore.DefaultBatchSize
		lease = 9 * time.Second // renewed every 3s: room for a slow round
	)
	var scripts atomic.Int64
	rdb := newRDB(t, srv.Addr)
	rdb.AddHook(scriptCounter{&scripts})
	type round struct {
		locks, failed int
		scripts       int64 // scripts sent by the end of the round
	}
	rounds := make(chan round, 1024)
	observer := leash.ObserverFunc(func(e leash.Event) {
		if e.Op == leash.OpRenewed {
			rounds <- round{e.Locks, e.Failed, scripts.Load()}
		}
	})
	c, err := leash.New(redisstore.New(rdb, nil), &leash.Options{Lease: lease, Observer: observer})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	runtime.GC()
	goroutinesBefore := runtime.NumGoroutine()
	holds := make([]*leash.Hold, n)
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < n; i += 32 {
				h, err := c.Mutex(fmt.Sprintf("%s/%d", lockName(t), i)).Lock(bg(t))
				if err != nil {
					t.Error(err)
					return
				}
				holds[i] = h
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	acquired := scripts.Load()
	// Cohorts merge within two rounds once acquisitions stop; then every
	// round renews all n. The first full round whose scripts all came after
	// the acquisitions is the baseline; the next three are measured.
	limit := int64((n + batch - 1) / batch)
	var measured []int64
	last := int64(-1)
	for len(measured) < 3 {
		var r round
		select {
		case r = <-rounds:
		case <-time.After(20 * lease): // a hang, not a slow machine
			t.Fatalf("no full renewal round of %d locks within %v", n, 20*lease)
		}
		switch {
		case r.locks != n || r.failed != 0:
			last = -1 // a partial or failed round: start over
		case last >= acquired:
			measured = append(measured, r.scripts-last)
			last = r.scripts
		default:
			last = r.scripts
		}
	}
	t.Logf("%d held locks: %v scripts per full renewal round (limit %d)", n, measured, limit)
	for i, got := range measured {
		if got > limit {
			t.Errorf("renewal round %d of %d locks sent %d scripts, want at most %d (batches of %d)", i+1, n, got, limit, batch)
		}
	}
	if g := runtime.NumGoroutine() - goroutinesBefore; g > 10 {
		t.Errorf("%d more goroutines with %d held locks, want O(1)", g, n)
	}
	for _, h := range holds {
		if err := h.Err(); err != nil {
			t.Fatalf("hold lost: %v", err)
		}
	}
}

// scriptCounter is a go-redis hook that counts the EVAL and EVALSHA
// commands a client sends, alone or in pipelines.
type scriptCounter struct{ n *atomic.Int64 }

func (h scriptCounter) count(cmd redis.Cmder) {
	if name := cmd.Name(); name == "evalsha" || name == "eval" {
		h.n.Add(1)
	}
}

func (scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}

// evalCalls returns the server's count of EVALSHA and EVAL calls.
func evalCalls(t testing.TB, rdb *redis.Client) int64 {
	return int64(evalStat(t, rdb, "calls"))
}

// evalStat is a field of INFO commandstats ("calls", "usec") summed over
// EVALSHA and EVAL: what the server counts of script calls so far.
func evalStat(t testing.TB, rdb *redis.Client, field string) float64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
			_, rest, _ := strings.Cut(line, field+"=")
			v, _, _ := strings.Cut(rest, ",")
			n, _ := strconv.ParseFloat(v, 64)
			total += n
		}
	}
	return total
}

func TestNoRenewalAfterUnlock(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	const lease = 300 * time.Millisecond
	c := newClient(t, srv.Addr, &leash.Options{Lease: lease})
	var names []string
	var holds []*leash.Hold
	for i := range 200 {
		name := fmt.Sprintf("%s/%d", lockName(t), i)
		h, err := c.Mutex(name).Lock(bg(t))
		if err != nil {
			t.Fatal(err)
		}
		names, holds = append(names, name), append(holds, h)
	}
	time.Sleep(lease) // renewals are running
	for _, h := range holds {
		if err := h.Unlock(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(3 * lease)
	for time.Now().Before(deadline) {
		if n, _ := rdb.Exists(bg(t), names...).Result(); n != 0 {
			t.Fatalf("%d lock keys exist after Unlock: a renewal outlived it", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRedissonInterop plays a Java service using Redisson's RLock on the same
// name with raw commands in Redisson's layout: each side excludes the other,
// and a Redisson-style release wakes a leash waiter at once.
func TestRedissonInterop(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, nil)
	name := lockName(t)
	javaOwner := "0f8fad5b-d9cb-469f-a165-70867728950e:57" // "<uuid>:<thread id>"

	// Java holds: leash waits.
	if err := rdb.HIncrBy(bg(t), name, javaOwner, 1).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(bg(t), name, 30*time.Second)
	got := lockAsync(t, c, name)
	time.Sleep(200 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("leash took a lock Redisson holds")
	default:
	}
	// Java unlocks the Redisson way: delete and publish 0 on the channel.
	released := time.Now()
	rdb.Del(bg(t), name)
	rdb.Publish(bg(t), "redisson_lock__channel:{"+name+"}", "0")
	h := <-got
	if h == nil {
		t.FailNow()
	}
	// Without the message the waiter would sleep until its fallback timer,
	// at the Redisson lease's end (30s): half of that is a hang, not a slow
	// machine.
	if d := time.Since(released); d > 15*time.Second {
		t.Errorf("leash waiter woke %v after a Redisson release, want at once (by the message, not its fallback timer)", d)
	}
	// leash holds: Redisson's acquire condition (key absent or own field) is false.
	owners, _ := rdb.HGetAll(bg(t), name).Result()
	if _, javaHolds := owners[javaOwner]; javaHolds || len(owners) != 1 || owners[h.Owner()] != "1" {
		t.Errorf("hash while leash holds = %v, want only %s -> 1", owners, h.Owner())
	}
	if ttl, _ := rdb.PTTL(bg(t), name).Result(); ttl <= 0 || ttl > leash.DefaultLease {
		t.Errorf("PTTL while leash holds = %v, want the lease", ttl)
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
}

// TestPubSubConnectionKilled kills the store's pub/sub connection while a
// waiter waits. The waiter must still get the lock promptly on release.
func TestPubSubConnectionKilled(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	name := lockName(t)
	holder, waiter := newClient(t, srv.Addr, nil), newClient(t, srv.Addr, nil)
	h, err := holder.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	got := grantedAt(t, func() (*leash.Hold, error) { return waiter.Mutex(name).Lock(bg(t)) })
	channel := "redisson_lock__channel:{" + name + "}"
	waitFor(t, "the waiter to subscribe", func() bool { return numSub(t, rdb, channel) == 1 })
	if err := rdb.ClientKillByFilter(bg(t), "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the waiter to resubscribe", func() bool { return numSub(t, rdb, channel) == 1 })
	released := time.Now()
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	if d := (<-got).Sub(released); d > 2*time.Second {
		t.Errorf("waiter took %v after the release, want prompt", d)
	}
}

func numSub(t *testing.T, rdb *redis.Client, channel string) int64 {
	t.Helper()
	m, err := rdb.PubSubNumSub(bg(t), channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m[channel]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
