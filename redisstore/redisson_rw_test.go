package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// redissonRead writes what Redisson's RReadWriteLock writes for a read
// lock held by thread 1 of the Java client whose id is uuid: the owner's
// field in the lock hash, beside mode "read", its lease's timeout key, and
// the hash's TTL at that lease. Both are deleted at cleanup.
func redissonRead(t *testing.T, rdb *redis.Client, name, uuid string, lease time.Duration) {
	t.Helper()
	ctx := bg(t)
	owner := uuid + ":1"
	timeout := "{" + name + "}:" + owner + ":rwlock_timeout:1"
	t.Cleanup(func() { rdb.Del(context.Background(), name, timeout) })
	if err := rdb.HSet(ctx, name, "mode", "read", owner, 1).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Set(ctx, timeout, 1, lease)
	rdb.PExpire(ctx, name, lease)
}

// TestRedissonReaderExcludesWriters: a Java service's Redisson read lock
// keeps leash's writers out, and a leash reader that shares the lock with
// it leaves its hold whole when it goes: the writer is not granted beside
// the Java reader, its field is never deleted, and its hash's TTL is never
// cut below its lease.
func TestRedissonReaderExcludesWriters(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, nil)
	ctx := bg(t)
	n := lockName(t)
	const java = "8f0c4b9e-1d2a-4c3b-9e8f-0a1b2c3d4e5f"
	redissonRead(t, rdb, n, java, time.Hour)
	javaHeld := func(when string) {
		t.Helper()
		if v, err := rdb.HGet(ctx, n, java+":1").Result(); err != nil || v != "1" {
			t.Errorf("%s: the Java reader's field = %q, %v; want 1", when, v, err)
		}
		if ttl := rdb.PTTL(ctx, n).Val(); ttl < 50*time.Minute {
			t.Errorf("%s: the hash's TTL = %v, want the Java reader's lease (about 1h)", when, ttl)
		}
	}
	writerRefused := func(when string) {
		t.Helper()
		if h, err := c.RWMutex(n, nil).TryLock(ctx); !errors.Is(err, leash.ErrNotAcquired) {
			t.Errorf("%s: a leash writer's TryLock = %v, %v; want ErrNotAcquired beside the Java reader", when, h, err)
			if h != nil {
				h.Unlock(ctx)
			}
		}
	}

	writerRefused("Java reader alone")
	javaHeld("after the writer's try")

	// A leash reader shares the lock, with a shorter lease, and leaves.
	short := newClient(t, srv.Addr, &leash.Options{Lease: 2 * time.Second})
	r, err := short.RWMutex(n, nil).RLock(ctx)
	if err != nil {
		t.Fatalf("a leash reader beside the Java reader: %v", err)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	javaHeld("after the leash reader left")
	writerRefused("after the leash reader left")

	// Two leash readers: the first to leave sets the TTL from the other's
	// lease, which must not cut the Java reader's.
	r1, err := short.RWMutex(n, nil).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := newClient(t, srv.Addr, &leash.Options{Lease: 2 * time.Second}).RWMutex(n, nil).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	javaHeld("after one of two leash readers left")
	if err := r2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	javaHeld("after both leash readers left")
	writerRefused("after both leash readers left")
}

// redissonReadUnlock does what Redisson's RReadWriteLock does when thread 1
// of the Java client uuid ends its (one) read hold: it drops its field and
// timeout key; then, while other fields remain, it keeps the hash for the
// longest lease it finds among their timeout keys, and deletes the hash when
// it finds none. It reports whether the hash was deleted.
var redissonReadUnlock = redis.NewScript(`
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('del', KEYS[2] .. ':' .. ARGV[1] .. ':rwlock_timeout:1')
if redis.call('hlen', KEYS[1]) > 1 then
    local longest = -3
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
        local n = tonumber(redis.call('hget', KEYS[1], field))
        if type(n) == 'number' then
            for i = n, 1, -1 do
                longest = math.max(longest, redis.call('pttl', KEYS[2] .. ':' .. field .. ':rwlock_timeout:' .. i))
            end
        end
    end
    if longest > 0 then
        redis.call('pexpire', KEYS[1], longest)
        return 0
    end
end
redis.call('del', KEYS[1])
return 1`)

// redissonTryWrite does what Redisson's RReadWriteLock does when thread 1 of
// the Java client uuid tries the write lock: it is granted only when the
// hash has no mode. It reports whether it was granted.
var redissonTryWrite = redis.NewScript(`
if redis.call('hget', KEYS[1], 'mode') == false then
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[1], 1)
    redis.call('pexpire', KEYS[1], 30000)
    return 1
end
return 0`)

// TestLeashReaderExcludesRedissonWriters: a leash reader's hold is one that
// Redisson's RReadWriteLock counts. When the last Java reader leaves while a
// leash reader still holds, Redisson keeps the lock hash, so a Java writer
// is not granted beside the leash reader (it was, when leash kept its
// readers only in a zset of its own); once the leash reader leaves too, the
// Java writer is granted. Inspect lists the leash reader once.
func TestLeashReaderExcludesRedissonWriters(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, nil)
	ctx := bg(t)
	n := lockName(t)
	const java = "5d6e7f80-9a1b-4c2d-8e3f-405162738495"
	redissonRead(t, rdb, n, java, time.Hour)

	r, err := c.RWMutex(n, nil).RLock(ctx)
	if err != nil {
		t.Fatalf("a leash reader beside the Java reader: %v", err)
	}
	info, err := c.Inspect(ctx, n)
	if err != nil || info.Kind != driver.KindRead || len(info.Owners) != 2 {
		t.Errorf("Inspect with a Java and a leash reader = %+v, %v; want two read owners", info, err)
	}
	for _, o := range info.Owners {
		if o.Owner == r.Owner() && (o.Remaining <= 0 || o.Kind != driver.KindRead) {
			t.Errorf("Inspect lists the leash reader as %+v; want a read hold with its lease", o)
		}
	}

	deleted, err := redissonReadUnlock.Run(ctx, rdb, []string{n, "{" + n + "}"}, java+":1").Int()
	if err != nil || deleted != 0 {
		t.Fatalf("the Java reader's unlock = %v, %v; want the hash kept for the leash reader", deleted, err)
	}
	if ttl := rdb.PTTL(ctx, n).Val(); ttl <= 0 {
		t.Errorf("the hash's TTL after the Java reader left = %v, want the leash reader's lease", ttl)
	}
	if granted, err := redissonTryWrite.Run(ctx, rdb, []string{n}, java+":2").Int(); err != nil || granted != 0 {
		t.Fatalf("a Java writer beside the leash reader: granted = %v, %v; want refused", granted, err)
	}
	if err := r.Renew(ctx); err != nil {
		t.Fatalf("the leash reader's renewal after the Java reader left: %v", err)
	}
	if ttl := rdb.PTTL(ctx, "{"+n+"}:"+r.Owner()+":rwlock_timeout:1").Val(); ttl <= 0 {
		t.Errorf("the leash reader's timeout key after its renewal: PTTL %v, want its lease", ttl)
	}

	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if left, err := rdb.Exists(ctx, n, "{"+n+"}:"+r.Owner()+":rwlock_timeout:1").Result(); err != nil || left != 0 {
		t.Errorf("after the last reader left, %d of the hash and the reader's timeout key remain (%v)", left, err)
	}
	if granted, err := redissonTryWrite.Run(ctx, rdb, []string{n}, java+":2").Int(); err != nil || granted != 1 {
		t.Errorf("a Java writer once every reader left: granted = %v, %v; want granted", granted, err)
	}
	rdb.Del(ctx, n)
}

// TestLeashReaderLeavingNeverCutsJavaTTL: a leash reader that leaves while
// other leash readers remain never shortens the lock hash's TTL, whose
// fields cannot all be told apart: here a reader of an earlier leash
// version (its lease only in leash_rw_readers, no field) shares the lock
// with a Java reader whose hold lasts an hour. Cutting the TTL to the other
// leash reader's lease (as when fields were counted, the Java reader's field
// taken for the field-less reader's) would free the hash, and so the name
// for writers, under the Java reader.
func TestLeashReaderLeavingNeverCutsJavaTTL(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	ctx := bg(t)
	n := lockName(t)
	const java = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	redissonRead(t, rdb, n, java, time.Hour)
	readers := "leash_rw_readers:{" + n + "}"
	t.Cleanup(func() { rdb.Del(context.Background(), readers) })
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The earlier version's reader: 20 s left, no field in the hash.
	if err := rdb.ZAdd(ctx, readers, redis.Z{Score: float64(now.UnixMilli() + 20_000), Member: "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9:1"}).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := newClient(t, srv.Addr, nil).RWMutex(n, nil).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, n).Val(); ttl < 50*time.Minute {
		t.Errorf("the hash's TTL after a leash reader left = %v, want the Java reader's hour", ttl)
	}
}

// TestLeashReaderFieldPutBack: when the lock hash is deleted under a leash
// reader and a Java reader makes it again, the leash reader's next renewal
// puts its hold back in it, so that the Java reader, leaving, keeps the
// hash (and Java writers out) for the leash reader.
func TestLeashReaderFieldPutBack(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	ctx := bg(t)
	n := lockName(t)
	r, err := newClient(t, srv.Addr, nil).RWMutex(n, nil).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unlock(ctx)
	if err := rdb.Del(ctx, n).Err(); err != nil { // as Redisson's forceUnlock does
		t.Fatal(err)
	}
	const java = "6c5b4a39-2817-4f6e-9d5c-4b3a29180716"
	redissonRead(t, rdb, n, java, time.Hour)
	if err := r.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	deleted, err := redissonReadUnlock.Run(ctx, rdb, []string{n, "{" + n + "}"}, java+":1").Int()
	if err != nil || deleted != 0 {
		t.Errorf("the Java reader's unlock after the leash reader's renewal = %v, %v; want the hash kept for the leash reader", deleted, err)
	}
}

// TestRWReleasesWakeRedissonWaiters: a Java service's Redisson waiters for
// a readers-writer lock listen on redisson_rwlock:{name} and otherwise sleep
// for the holder's remaining lease. A leash RWMutex's releases are published
// there as Redisson's own are, written so that leash's waiters can tell
// them from a Java client's (Redisson parses them as numbers): "00" (its
// "0") when the last reader leaves (none when a Java reader still holds the
// hash: the Java writer is still kept out), "01" (its "1") when the writer
// leaves, and when the lock is force-released.
func TestRWReleasesWakeRedissonWaiters(t *testing.T) {
	rdb, store, c := storeAndClient(t)
	ctx, n := bg(t), lockName(t)
	channel := "redisson_rwlock:{" + n + "}"
	ps := rdb.Subscribe(ctx, channel)
	t.Cleanup(func() { ps.Close() })
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	next := func(what string) string {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		m, err := ps.ReceiveMessage(rctx)
		if err != nil {
			t.Fatalf("%s: no message on %s: %v", what, channel, err)
		}
		return m.Payload
	}
	rw := c.RWMutex(n, nil)

	holdAndLeave(t, rw.RLock)
	if got := next("the last leash reader left"); got != "00" {
		t.Errorf("the last leash reader left: %q on %s, want \"00\" (Redisson's wake-one)", got, channel)
	}

	const java = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	redissonRead(t, rdb, n, java, time.Hour)
	holdAndLeave(t, rw.RLock)
	rdb.Publish(ctx, channel, "after") // what comes next, unless the unlock published
	if got := next("a leash reader left beside a Java reader"); got != "after" {
		t.Errorf("a leash reader left beside a Java reader: %q on %s, want nothing (the Java reader still holds)", got, channel)
	}
	rdb.Del(ctx, n, "{"+n+"}:"+java+":1:rwlock_timeout:1")

	holdAndLeave(t, rw.Lock)
	if got := next("the leash writer left"); got != "01" {
		t.Errorf("the leash writer left: %q on %s, want \"01\" (Redisson's wake-all)", got, channel)
	}

	w, err := rw.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if freed, err := store.ForceRelease(ctx, n); err != nil || !freed {
		t.Fatalf("ForceRelease = %v, %v", freed, err)
	}
	if got := next("the lock was force-released"); got != "01" {
		t.Errorf("the lock was force-released: %q on %s, want \"01\"", got, channel)
	}
	select {
	case <-w.Lost():
	case <-time.After(time.Minute):
		t.Error("the force-released writer was not told")
	}
}

// TestRedissonReleaseWakesLeashWaiters: a leash writer waiting behind a Java
// reader is woken by the Java reader's release on Redisson's channel, not
// left to its fallback timer (the hash's remaining lease, an hour here).
// And a leash release, which publishes on both channels, wakes a leash
// watch once, by leash's own message: what it publishes on Redisson's
// channel is not taken for a Java release that would wake every waiter.
func TestRedissonReleaseWakesLeashWaiters(t *testing.T) {
	rdb, store, c := storeAndClient(t)
	ctx, n := bg(t), lockName(t)
	javaChannel, leashChannel := "redisson_rwlock:{"+n+"}", "leash_rw__channel:{"+n+"}"
	const java = "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9"
	redissonRead(t, rdb, n, java, time.Hour)

	got := make(chan *leash.Hold, 1)
	go func() {
		h, err := c.RWMutex(n, nil).Lock(ctx)
		if err != nil {
			h = nil
		}
		got <- h
	}()
	waitFor(t, "the leash writer to listen on Redisson's channel", func() bool { return numSub(t, rdb, javaChannel) == 1 })
	// Redisson's read unlock: the last reader deletes the hash and
	// publishes "0", in one script.
	if deleted, err := redissonReadUnlock.Run(ctx, rdb, []string{n, "{" + n + "}"}, java+":1").Int(); err != nil || deleted != 1 {
		t.Fatalf("the Java reader's unlock = %v, %v; want the hash deleted", deleted, err)
	}
	rdb.Publish(ctx, javaChannel, "0")
	var w *leash.Hold
	select {
	case w = <-got:
		if w == nil {
			t.Fatal("the leash writer's Lock failed")
		}
	case <-time.After(time.Minute):
		t.Fatal("the leash writer was not woken by the Java reader's release")
	}

	wakes := make(chan driver.Wake, 16)
	stop, err := store.Watch(ctx, driver.KindWrite, n, func(w driver.Wake) { wakes <- w })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.Publish(ctx, leashChannel, "w") // what comes next, unless the release woke the watch twice
	next := func() driver.Wake {
		select {
		case w := <-wakes:
			return w
		case <-time.After(time.Minute):
			t.Fatal("no wake-up")
		}
		return driver.Wake{}
	}
	if w := next(); w.To != driver.WakeReaders {
		t.Errorf("the leash writer's release woke %+v, want the readers (no writer waits)", w)
	}
	if w := next(); w.To != driver.WakeWriter {
		t.Errorf("after the leash writer's release: %+v, want only the marker (one writer); what it published on Redisson's channel woke the watch", w)
	}

	// The last reader leaves while a leash writer waits: "w" on leash's
	// channel, then "00" on Redisson's.
	r, err := c.RWMutex(n, nil).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		h, err := c.RWMutex(n, nil).Lock(ctx)
		if err == nil {
			err = h.Unlock(ctx)
		}
		waiting <- err
	}()
	waitFor(t, "the writer to wait", func() bool { return rdb.ZCard(ctx, "leash_rw_writers:{"+n+"}").Val() == 1 })
	for len(wakes) > 0 { // the writer's own attempts
		<-wakes
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if w := next(); w.To != driver.WakeWriter {
		t.Errorf("the last reader's release woke %+v, want one writer", w)
	}
	rdb.Publish(ctx, leashChannel, "r")
	for w := next(); w.To != driver.WakeReaders; w = next() {
		if w.To == driver.WakeAll {
			t.Fatalf("after the last reader's release: a wake-all; what it published on Redisson's channel woke the watch")
		}
	}
	select {
	case err := <-waiting:
		if err != nil {
			t.Errorf("the waiting writer: %v", err)
		}
	case <-time.After(time.Minute):
		t.Error("the waiting writer was not granted")
	}
}

// storeAndClient returns a go-redis client on the shared Redis, a Store on
// it and a leash Client on the Store, closed at cleanup.
func storeAndClient(t *testing.T) (*redis.Client, *redisstore.Store, *leash.Client) {
	t.Helper()
	rdb := newRDB(t, sharedRedis(t).Addr)
	store := redisstore.New(rdb, nil)
	c, err := leash.New(store, nil)
	return rdb, store, testkit.Closing(t, c, err)
}

// holdAndLeave takes a lock with lock and unlocks it at once.
func holdAndLeave(t *testing.T, lock func(context.Context) (*leash.Hold, error)) {
	t.Helper()
	h, err := lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
}
