package redisstore_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash"
)

// markQueued waits until name has n places queued (starving waiters' marks
// are places in the fair queue).
func markQueued(t *testing.T, c *leash.Client, name string, n int) {
	t.Helper()
	waitFor(t, "the starving waiter's mark", func() bool {
		info, err := c.Inspect(bg(t), name)
		return err == nil && info.Queued == n
	})
}

// lockAsync runs c's Mutex Lock on name in a goroutine and sends its hold
// (nil on an error, reported with t.Error) on the returned channel.
func lockAsync(t *testing.T, c *leash.Client, name string) <-chan *leash.Hold {
	got := make(chan *leash.Hold, 1)
	go func() {
		h, err := c.Mutex(name).Lock(bg(t))
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	return got
}

// TestStarvingMutexWaiterKilled kills a process whose Lock waits long enough
// to starve and mark the name. The mark holds newcomers back only while it
// lives: a fresh Lock after the release gets the lock once the dead
// waiter's mark has lapsed, and no mark is left behind.
func TestStarvingMutexWaiterKilled(t *testing.T) {
	srv := sharedRedis(t)
	name := lockName(t)
	holder := newClient(t, srv.Addr, nil)
	h, err := holder.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	dead := startWaiter(t, srv.Addr, name, "mutex")
	markQueued(t, holder, name, 1)
	if err := dead.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	// A hang here is the failure: a mark that never lapses. A minute is
	// twenty mark leases.
	ctx, cancel := context.WithTimeout(bg(t), time.Minute)
	defer cancel()
	c := newClient(t, srv.Addr, nil)
	h2, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock behind a dead starving waiter: %v, want the lock once its mark lapsed", err)
	}
	if info, err := c.Inspect(bg(t), name); err != nil || info.Queued != 0 || len(info.Owners) != 1 || info.Owners[0].Owner != h2.Owner() {
		t.Errorf("after the grant: %+v, %v; want only the new holder, nothing queued", info, err)
	}
	if err := h2.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
}

// TestRedissonIgnoresStarvingMark plays a Java service using Redisson's RLock
// beside a starving leash waiter: Redisson knows nothing of the mark, so it
// may take the free lock past it (it is not made fair), but it is still
// excluded while leash holds, and leash is excluded while it holds.
func TestRedissonIgnoresStarvingMark(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, nil)
	name := lockName(t)
	javaOwner := "0f8fad5b-d9cb-469f-a165-70867728950e:58"
	channel := "redisson_lock__channel:{" + name + "}"
	// Redisson's RLock acquire: take the key when absent or held by its own
	// field, else report the PTTL.
	javaLock := func() int64 {
		v, err := rdb.Eval(bg(t), `if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return -1 end
return redis.call('pttl', KEYS[1])`, []string{name}, 30000, javaOwner).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if javaLock() != -1 {
		t.Fatal("Java could not take a free lock")
	}
	got := lockAsync(t, c, name)
	markQueued(t, c, name, 1) // leash's waiter starved and marked the name
	// Java releases without a message and takes the lock again at once,
	// past the mark.
	rdb.Del(bg(t), name)
	if javaLock() != -1 {
		t.Fatal("Redisson's acquire was refused on a free lock: the mark must not bind it")
	}
	select {
	case <-got:
		t.Fatal("leash took a lock Redisson holds")
	default:
	}
	if owners, _ := rdb.HGetAll(bg(t), name).Result(); len(owners) != 1 || owners[javaOwner] != "1" {
		t.Fatalf("hash while Java holds = %v, want only %s", owners, javaOwner)
	}
	// Java unlocks the Redisson way; the starving waiter takes the lock.
	rdb.Del(bg(t), name)
	rdb.Publish(bg(t), channel, "0")
	h := <-got
	if h == nil {
		t.FailNow()
	}
	if javaLock() == -1 {
		t.Error("Redisson took a lock leash holds")
	}
	if owners, _ := rdb.HGetAll(bg(t), name).Result(); len(owners) != 1 || owners[h.Owner()] != "1" {
		t.Errorf("hash while leash holds = %v, want only %s -> 1", owners, h.Owner())
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
}
