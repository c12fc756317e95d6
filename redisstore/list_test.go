package redisstore_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

func TestListFindsHeldLocksOnly(t *testing.T) {
	srv := sharedRedis(t)
	ctx := bg(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, nil)
	prefix := lockName(t) + "/"

	// Held locks, one of them re-entered and one with an explicit-owner-like
	// field written by hand, as Redisson would.
	var want []string
	for _, n := range []string{"a", "b", "{tagged}c"} {
		h, err := c.Mutex(prefix + n).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Unlock(ctx)
		want = append(want, prefix+n)
	}
	// Every other kind that is held: readers, a writer, a semaphore permit.
	for n, take := range map[string]func(string) (*leash.Hold, error){
		"readers":   func(n string) (*leash.Hold, error) { return c.RWMutex(n, nil).RLock(ctx) },
		"writer":    func(n string) (*leash.Hold, error) { return c.RWMutex(n, nil).Lock(ctx) },
		"semaphore": func(n string) (*leash.Hold, error) { return c.Semaphore(n, 3).Acquire(ctx) },
	} {
		h, err := take(prefix + n)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Unlock(ctx)
		want = append(want, prefix+n)
	}
	rdb.ZAdd(ctx, prefix+"some-zset", redis.Z{Score: 1, Member: "x"}) // not a semaphore
	redisson := prefix + "redisson"
	rdb.HSet(ctx, redisson, "8743c9c0-0795-4907-87fd-6c719a6b4586:1", 2)
	rdb.PExpire(ctx, redisson, time.Minute)
	want = append(want, redisson)
	redissonWrite := prefix + "redisson-write" // Redisson's RReadWriteLock, write-held
	rdb.HSet(ctx, redissonWrite, "mode", "write", "8743c9c0-0795-4907-87fd-6c719a6b4586:7:write", 1)
	rdb.PExpire(ctx, redissonWrite, time.Minute)
	want = append(want, redissonWrite)
	slices.Sort(want)

	// Keys that are not held locks.
	rdb.HSet(ctx, prefix+"hash-without-ttl", "x:1", 1)
	rdb.HSet(ctx, prefix+"hash-with-ttl", "views", 12)
	rdb.PExpire(ctx, prefix+"hash-with-ttl", time.Minute)
	rdb.HSet(ctx, prefix+"zero-holds", "00000000-0000-4000-8000-000000000005:1", 0)
	rdb.PExpire(ctx, prefix+"zero-holds", time.Minute)
	big := make([]any, 0, 600)
	for i := range 300 { // more fields than any lock has
		big = append(big, fmt.Sprintf("id:%d", i), 1)
	}
	rdb.HSet(ctx, prefix+"big", big...)
	rdb.PExpire(ctx, prefix+"big", time.Minute)
	rdb.Set(ctx, prefix+"string", "1", time.Minute)
	h, err := c.Mutex(prefix + "released").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	s := redisstore.New(rdb, nil)
	defer s.Close()
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{prefix + "*", want},
		{prefix + "[ab]", []string{prefix + "a", prefix + "b"}},
		{prefix + "nothing*", nil},
	} {
		got, err := s.List(ctx, tc.pattern)
		if err != nil {
			t.Fatalf("List(%q): %v", tc.pattern, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
}

func TestListWalksEveryScanStep(t *testing.T) {
	srv := sharedRedis(t)
	ctx := bg(t)
	rdb := newRDB(t, srv.Addr)
	prefix := lockName(t) + "/"
	// More locks than one SCAN step returns.
	const n = 1200
	pipe := rdb.Pipeline()
	for i := range n {
		k := fmt.Sprintf("%s%04d", prefix, i)
		pipe.HSet(ctx, k, "00000000-0000-4000-8000-000000000005:1", 1)
		pipe.PExpire(ctx, k, time.Minute)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	s := redisstore.New(rdb, nil)
	defer s.Close()
	got, err := s.List(ctx, prefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || got[0] != prefix+"0000" || got[n-1] != fmt.Sprintf("%s%04d", prefix, n-1) {
		t.Errorf("List found %d locks (first %q), want %d", len(got), got[:min(1, len(got))], n)
	}
}

func TestListOnBrokenStore(t *testing.T) {
	s := redisstore.New(nil, nil)
	if _, err := s.List(bg(t), "*"); err == nil {
		t.Error("List on a store with a nil client succeeded")
	}
}
