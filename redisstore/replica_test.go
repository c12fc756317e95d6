package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/faultproxy"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// guardedClient returns a Client whose store waits for one replica's
// acknowledgement of every grant and renewal.
func guardedClient(t *testing.T, addr string, lease time.Duration) *leash.Client {
	t.Helper()
	s := redisstore.New(newRDB(t, addr), &redisstore.Options{Replicas: 1, ReplicaTimeout: 200 * time.Millisecond})
	c, err := leash.New(s, &leash.Options{Lease: lease})
	if err != nil {
		t.Fatalf("leash.New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestReplicationGuard walks one primary and its replica through the guard's
// cases: a grant is on the replica when Lock returns; while the replica does
// not acknowledge, renewals fail, so the holder is told while the primary
// still holds the lock, and a new grant is undone with ErrNotReplicated; once
// the replica is back, a grant survives a failover to it.
func TestReplicationGuard(t *testing.T) {
	const lease = 1500 * time.Millisecond
	primary := testserver.NewRedis(t, testserver.RedisOptions{})
	replica := testserver.NewReplica(t, primary.Addr)
	onPrimary, onReplica := newRDB(t, primary.Addr), newRDB(t, replica.Addr)
	c := guardedClient(t, primary.Addr, lease)
	name := lockName(t)

	h, err := c.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatalf("Lock with the replica in sync: %v", err)
	}
	if n, err := onReplica.HLen(bg(t), name).Result(); err != nil || n != 1 {
		t.Errorf("replica's lock hash when Lock returned: %d fields, %v; want the holder's", n, err)
	}
	if tok, _ := onReplica.Get(bg(t), "redisson_lock_token:{"+name+"}").Int64(); tok != h.Fence() {
		t.Errorf("replica's fencing counter %d, want the grant's token %d", tok, h.Fence())
	}

	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	paused := true
	defer func() {
		if paused {
			_ = replica.Resume()
		}
	}()
	select {
	case <-h.Lost():
	case <-time.After(20 * lease): // a hang, not a slow machine
		t.Fatalf("holder not told within %v after its replica stopped acknowledging", 20*lease)
	}
	// Its validity ran from the last acknowledged renewal, before the pause:
	// a failover to the replica would expire the lock by then. (The
	// deadline, not when the watchdog goroutine got to run, is the claim.)
	if vu := h.ValidUntil(); vu.After(pausedAt.Add(lease)) {
		t.Errorf("holder's validity ran to %v after the pause; want within its lease (%v) of the last acknowledged renewal", vu.Sub(pausedAt), lease)
	}
	var lost *leash.LostError
	if !errors.As(h.Err(), &lost) || lost.Reason != leash.ReasonUnreachable || !errors.Is(lost, redisstore.ErrNotReplicated) {
		t.Errorf("holder's error = %v; want lost, store unreachable, ErrNotReplicated", h.Err())
	}

	// Every kind's unacknowledged grant is undone: only the fencing counter,
	// a semaphore's size and the undoing release's latch (which expires) may
	// remain on the primary.
	kinds := map[string]func(name string) (*leash.Hold, error){
		"multi": func(name string) (*leash.Hold, error) {
			return c.MultiLock([]string{name + "/a", name + "/b"}).Lock(bg(t))
		},
	}
	for _, k := range holderKinds {
		kinds[k.holder] = func(name string) (*leash.Hold, error) { return lockKind(bg(t), c, k.holder, name) }
	}
	for kind, lock := range kinds {
		n := name + "/" + kind
		if _, err := lock(n); !errors.Is(err, redisstore.ErrNotReplicated) {
			t.Errorf("%s with the replica paused = %v; want ErrNotReplicated", kind, err)
		}
		keys, _ := onPrimary.Keys(bg(t), "*"+n+"*").Result()
		for _, k := range keys {
			if !strings.HasPrefix(k, "redisson_lock_token:") && !strings.HasPrefix(k, "leash_semaphore_size:") &&
				!strings.HasPrefix(k, "redisson_unlock_latch:") {
				t.Errorf("%s: %q is still on the primary after the unacknowledged grant; want undone", kind, k)
			}
		}
	}
	other := name + "/mutex"

	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	paused = false
	var h2 *leash.Hold
	for deadline := time.Now().Add(10 * time.Second); ; {
		if h2, err = c.Mutex(other).Lock(bg(t)); err == nil {
			break
		}
		if !errors.Is(err, redisstore.ErrNotReplicated) || time.Now().After(deadline) {
			t.Fatalf("Lock after the replica resumed = %v; want granted", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := onReplica.Do(bg(t), "replicaof", "no", "one").Err(); err != nil {
		t.Fatalf("promote the replica: %v", err)
	}
	_, err = newClient(t, replica.Addr, nil).Mutex(other).TryLock(bg(t))
	var na *leash.NotAcquiredError
	if !errors.As(err, &na) || na.Remaining <= 0 {
		t.Fatalf("TryLock on the promoted replica = %v; want refused: the guarded grant (token %d) was replicated", err, h2.Fence())
	}
}

// TestReplicationGuardOptions checks that the guard's bad settings are
// refused when the Store is made, before any round trip.
func TestReplicationGuardOptions(t *testing.T) {
	single := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // go-redis's default ReadTimeout
	quick := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 500 * time.Millisecond})
	tiny := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: time.Millisecond})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { single.Close(); quick.Close(); tiny.Close(); cluster.Close() })
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		opts redisstore.Options
		want string
	}{
		{"negative replicas", single, redisstore.Options{Replicas: -1}, "Options.Replicas = -1"},
		{"negative timeout", single, redisstore.Options{Replicas: 1, ReplicaTimeout: -time.Second}, "Options.ReplicaTimeout = -1s"},
		{"timeout past the read timeout", quick, redisstore.Options{Replicas: 1, ReplicaTimeout: time.Second}, "shorter than the redis client's ReadTimeout (500ms)"},
		{"timeout below WAIT's unit", single, redisstore.Options{Replicas: 1, ReplicaTimeout: 500 * time.Microsecond}, "must be at least 1ms"},
		{"read timeout too short for any WAIT", tiny, redisstore.Options{Replicas: 1}, "must be at least 1ms"},
		{"cluster", cluster, redisstore.Options{Replicas: 1}, "not supported on Cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := redisstore.New(tc.rdb, &tc.opts).Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v; want an error about %q", err, tc.want)
			}
		})
	}
	// The default WAIT timeout shrinks to end within a short ReadTimeout.
	if err := redisstore.New(quick, &redisstore.Options{Replicas: 1}).Validate(); err != nil {
		t.Errorf("Validate() with a 500ms ReadTimeout and the default WAIT timeout = %v; want nil", err)
	}
	if err := redisstore.New(single, &redisstore.Options{Replicas: 2}).Validate(); err != nil {
		t.Errorf("Validate() with the default timeout = %v; want nil", err)
	}
}

// TestTokensGrowAcrossFailoverToLaggingReplica fails over to a replica that
// missed the last grants (its link to the primary swallowed them), so its
// fencing counter is behind the tokens already issued: the next grant on it
// must still carry a larger token than any of them (tokens are floored by
// the server clock, not only counted).
func TestTokensGrowAcrossFailoverToLaggingReplica(t *testing.T) {
	primary := testserver.NewRedis(t, testserver.RedisOptions{})
	link, err := faultproxy.New(primary.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	replica := testserver.NewReplica(t, link.Addr)
	name := lockName(t)
	counter := "redisson_lock_token:{" + name + "}"
	lockUnlock := func(c *leash.Client) int64 {
		t.Helper()
		h, err := c.Mutex(name).Lock(bg(t))
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
		if err := h.Unlock(bg(t)); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		return h.Fence()
	}
	c := newClient(t, primary.Addr, nil)
	first := lockUnlock(c)
	onReplica := newRDB(t, replica.Addr)
	waitFor(t, "the replica to receive the first grant and release", func() bool {
		tok, _ := onReplica.Get(bg(t), counter).Int64()
		n, _ := onReplica.Exists(bg(t), name).Result()
		return tok == first && n == 0
	})
	link.Blackhole()
	var last int64
	for range 20 {
		last = lockUnlock(c)
	}
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := onReplica.Do(bg(t), "replicaof", "no", "one").Err(); err != nil {
		t.Fatalf("promote the replica: %v", err)
	}
	if stale, _ := onReplica.Get(bg(t), counter).Int64(); stale >= last {
		t.Fatalf("promoted replica's counter %d is not behind the last token %d; the replica did not lag", stale, last)
	}
	if next := lockUnlock(newClient(t, replica.Addr, nil)); next <= last {
		t.Errorf("first token after the failover %d, want > %d, the last one the old primary issued", next, last)
	}
}

// TestSentinelFailoverKeepsGuardedLock holds a lock through a Sentinel
// failover: a primary with two replicas, the replication guard on, the
// primary killed while the lock is held. Sentinel promotes a replica and
// points the other at it; the holder's client follows, its renewals land on
// the new primary, and it is never told the lock is lost. Meanwhile and after,
// another client is refused; once the holder unlocks, the next token is larger.
func TestSentinelFailoverKeepsGuardedLock(t *testing.T) {
	const master, lease = "leash-master", 6 * time.Second
	primary := testserver.NewRedis(t, testserver.RedisOptions{})
	testserver.NewReplica(t, primary.Addr)
	testserver.NewReplica(t, primary.Addr)
	sentinel := testserver.NewSentinel(t, primary, master)
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr})
	t.Cleanup(func() { sc.Close() })
	waitFor(t, "Sentinel lists both replicas", func() bool {
		rs, err := sc.Replicas(bg(t), master).Result()
		return err == nil && len(rs) == 2
	})
	newFailoverClient := func(guard bool) *leash.Client {
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: master, SentinelAddrs: []string{sentinel.Addr},
			DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
		})
		t.Cleanup(func() { rdb.Close() })
		var opts *redisstore.Options
		if guard {
			opts = &redisstore.Options{Replicas: 1, ReplicaTimeout: 200 * time.Millisecond}
		}
		c, err := leash.New(redisstore.New(rdb, opts), &leash.Options{Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	holder, other := newFailoverClient(true), newFailoverClient(false)
	name := lockName(t)
	h, err := holder.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}

	killed := time.Now()
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Sentinel promotes a replica", func() bool {
		a, err := sc.GetMasterAddrByName(bg(t), master).Result()
		return err == nil && len(a) == 2 && a[1] != strconv.Itoa(primary.Port)
	})
	waitFor(t, "a renewal on the new primary", func() bool {
		if _, err := other.Mutex(name).TryLock(bg(t)); err == nil {
			t.Fatal("another client was granted the held lock after the failover")
		}
		return h.ValidUntil().After(killed.Add(lease))
	})
	select {
	case <-h.Lost():
		t.Fatalf("holder told the lock is lost across the failover: %v", h.Err())
	default:
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatalf("Unlock after the failover: %v", err)
	}
	// The promoted replica may lack grants its primary made: fresh grants
	// wait out the restart grace, counted from the promotion.
	h2, err := other.Mutex(name).TryLock(bg(t))
	if errors.Is(err, leash.ErrRestartGrace) {
		h2, err = other.Mutex(name).Lock(bg(t))
	}
	if err != nil {
		t.Fatalf("lock after the holder unlocked: %v, want granted (once the grace has passed)", err)
	}
	if h2.Fence() <= h.Fence() {
		t.Errorf("token after the failover %d, want > %d", h2.Fence(), h.Fence())
	}
	_ = h2.Unlock(bg(t))
}

// TestReplicationGuardUndo checks the guard's undo at the store: a re-entry
// the replica does not acknowledge gives back only its own hold, and an
// acquire whose reply is lost (the caller's deadline passes while WAIT waits)
// leaves no lock behind either.
func TestReplicationGuardUndo(t *testing.T) {
	primary := testserver.NewRedis(t, testserver.RedisOptions{})
	replica := testserver.NewReplica(t, primary.Addr)
	rdb := newRDB(t, primary.Addr)
	s := redisstore.New(rdb, &redisstore.Options{Replicas: 1, ReplicaTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { s.Close() })
	name := lockName(t)
	req := driver.Request{Kind: driver.KindMutex, Name: name, Owner: "00000000-0000-4000-8000-000000000006:1", Lease: time.Minute}
	if g, err := s.Acquire(bg(t), req); err != nil || !g.Acquired {
		t.Fatalf("Acquire with the replica in sync = %+v, %v", g, err)
	}
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	defer replica.Resume()

	if _, err := s.Acquire(bg(t), req); !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("re-entry with the replica paused = %v; want ErrNotReplicated", err)
	}
	if holds, _ := rdb.HGet(bg(t), name, req.Owner).Result(); holds != "1" {
		t.Errorf("holds after the unacknowledged re-entry was undone = %q; want the first grant's 1", holds)
	}

	// A client whose reads end with the caller's context, as the CLI's do.
	withCtx := redis.NewClient(&redis.Options{Addr: primary.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { withCtx.Close() })
	s2 := redisstore.New(withCtx, &redisstore.Options{Replicas: 1, ReplicaTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { s2.Close() })
	lost := driver.Request{Kind: driver.KindMutex, Name: name + "/lost-reply", Owner: "owner:2", Lease: time.Minute}
	ctx, cancel := context.WithTimeout(bg(t), 150*time.Millisecond) // sent, then ends during the WAIT
	defer cancel()
	if g, err := s2.Acquire(ctx, lost); err == nil || errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("Acquire whose deadline passed during WAIT = %+v, %v; want the deadline's error", g, err)
	}
	if n, _ := rdb.Exists(bg(t), lost.Name).Result(); n != 0 {
		t.Errorf("the acquire whose reply was lost left the lock on the primary; want it released")
	}
}
