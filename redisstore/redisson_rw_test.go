package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/redis/go-redis/v9"
)

// redissonRead writes what Redisson's RReadWriteLock writes for a read
// lock held by thread 1 of the Java client whose id is uuid: the owner's
// field in the lock hash, beside mode "read", its lease's timeout key, and
// the hash's TTL at that lease.
func redissonRead(t *testing.T, rdb *redis.Client, name, uuid string, lease time.Duration) {
	t.Helper()
	ctx := bg(t)
	owner := uuid + ":1"
	if err := rdb.HSet(ctx, name, "mode", "read", owner, 1).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Set(ctx, "{"+name+"}:"+owner+":rwlock_timeout:1", 1, lease)
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
	t.Cleanup(func() { rdb.Del(ctx, n, "{"+n+"}:"+java+":1:rwlock_timeout:1") })
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
