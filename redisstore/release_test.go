package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// TestReleaseIsIdempotentAcrossRetries replays a release request, as a
// transport retry after an unanswered attempt does: the retry must report
// what the first attempt did, never ErrNotHeld or a second decrement.
func TestReleaseIsIdempotentAcrossRetries(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	s := New(rdb, nil)
	defer s.Close()
	ctx := context.Background()
	const name, owner = "retry", "00000000-0000-4000-8000-000000000001:1"
	req := driver.Request{Name: name, Owner: owner, Lease: time.Minute}
	release := func(id, mode string) (any, error) {
		return releaseScript[0].Run(ctx, rdb, releaseKeys(name, latchKey(name, id)),
			owner, 60000, mode, 10000).Result()
	}

	// Two holds; drop one, then replay that same request.
	for range 2 {
		if g, err := s.Acquire(ctx, req); err != nil || !g.Acquired {
			t.Fatalf("Acquire = %+v, %v", g, err)
		}
	}
	for i := range 2 {
		if v, err := release("a", "one"); err != nil || v != int64(0) {
			t.Fatalf("attempt %d of release 'a' (one hold) = %v, %v; want 0 (still held)", i+1, v, err)
		}
	}
	if n, _ := rdb.HGet(ctx, name, owner).Int(); n != 1 {
		t.Fatalf("holds after a replayed partial release = %d, want 1 (decremented once)", n)
	}
	// Free it, then replay: the retry reports "freed", not "not held".
	for i := range 2 {
		if v, err := release("b", "all"); err != nil || v != int64(1) {
			t.Fatalf("attempt %d of release 'b' (all) = %v, %v; want 1 (freed)", i+1, v, err)
		}
	}
	// A new request for a lock the owner no longer holds is ErrNotHeld.
	if _, err := release("c", "all"); !errors.Is(err, redis.Nil) {
		t.Fatalf("a new release of a freed lock = %v, want nil reply (ErrNotHeld)", err)
	}
	if err := s.Release(ctx, req); !errors.Is(err, leash.ErrNotHeld) {
		t.Fatalf("Release of a freed lock = %v, want ErrNotHeld", err)
	}
	// The latch expires on its own.
	if ttl, _ := rdb.PTTL(ctx, latchKey(name, "b")).Result(); ttl <= 0 || ttl > 10*time.Second {
		t.Errorf("latch TTL = %v, want (0, 10s]", ttl)
	}
}

// TestRenewOfReplacedLockIsGoneAlone puts a string where one lock of a
// renewal batch was (another application's data) and checks that only that
// lock reports gone, the string untouched, and every other lock, in its
// batch and the others, is renewed. (Before, the WRONGTYPE failed the whole
// batch.)
func TestRenewOfReplacedLockIsGoneAlone(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	s := New(rdb, &Options{BatchSize: 5})
	defer s.Close()
	ctx := context.Background()
	reqs := make([]driver.Request, 15)
	for i := range reqs {
		reqs[i] = driver.Request{Name: "batch/" + string(rune('a'+i)), Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
		if g, err := s.Acquire(ctx, reqs[i]); err != nil || !g.Acquired {
			t.Fatalf("Acquire %d = %+v, %v", i, g, err)
		}
	}
	rdb.Set(ctx, reqs[7].Name, "not a lock", 0) // in batch 2 (locks 5-9)
	res := s.Renew(ctx, reqs)
	for i, r := range res {
		want := driver.RenewResult{Status: driver.Renewed}
		if i == 7 {
			want.Status = driver.RenewGone
		}
		if r != want {
			t.Errorf("lock %d = %+v, want %+v", i, r, want)
		}
	}
	if got, err := rdb.Get(ctx, reqs[7].Name).Result(); got != "not a lock" || err != nil {
		t.Errorf("the string is now %q, %v; want it unchanged", got, err)
	}
	if ttl := rdb.PTTL(ctx, reqs[7].Name).Val(); ttl != -1 {
		t.Errorf("the string's PTTL is now %v, want none (-1)", ttl)
	}
}
