package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash"
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
	const name, owner = "retry", "client:1"
	req := leash.Request{Name: name, Owner: owner, Lease: time.Minute}
	release := func(id, mode string) (any, error) {
		return releaseScript.Run(ctx, rdb, releaseKeys(name, latchKey(name, id)),
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
	if _, err := s.Release(ctx, req, leash.ReleaseAll); !errors.Is(err, leash.ErrNotHeld) {
		t.Fatalf("Release of a freed lock = %v, want ErrNotHeld", err)
	}
	// The latch expires on its own.
	if ttl, _ := rdb.PTTL(ctx, latchKey(name, "b")).Result(); ttl <= 0 || ttl > 10*time.Second {
		t.Errorf("latch TTL = %v, want (0, 10s]", ttl)
	}
}

// TestRenewFailureStaysInItsBatch makes one renewal batch fail (a key of the
// wrong type in it) and checks that only that batch's locks report an error.
func TestRenewFailureStaysInItsBatch(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	s := New(rdb, &Options{BatchSize: 5})
	defer s.Close()
	ctx := context.Background()
	reqs := make([]leash.Request, 15)
	for i := range reqs {
		reqs[i] = leash.Request{Name: "batch/" + string(rune('a'+i)), Owner: "client:1", Lease: time.Minute}
		if i == 7 {
			rdb.Set(ctx, reqs[i].Name, "not a lock", 0) // batch 2 (locks 5-9) will fail
			continue
		}
		if g, err := s.Acquire(ctx, reqs[i]); err != nil || !g.Acquired {
			t.Fatalf("Acquire %d = %+v, %v", i, g, err)
		}
	}
	res := s.Renew(ctx, reqs)
	for i, r := range res {
		inBad := i >= 5 && i < 10
		switch {
		case inBad && r.Err == nil:
			t.Errorf("lock %d in the failing batch: no error, want the batch's error", i)
		case !inBad && (r.Err != nil || r.Status != leash.Renewed):
			t.Errorf("lock %d in a healthy batch = %+v, want renewed", i, r)
		}
	}
}
