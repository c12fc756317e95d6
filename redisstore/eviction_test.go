package redisstore_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
)

// TestEvictingServerIsRefused: a server that may evict lock keys is refused
// with the setting and the fix, at once and after a CONFIG SET at run time.
func TestEvictingServerIsRefused(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{Args: []string{"--maxmemory", "20mb", "--maxmemory-policy", "allkeys-lru"}})
	c := newClient(t, srv.Addr, nil)
	_, err := c.Mutex(lockName(t)).TryLock(bg(t))
	if !errors.Is(err, redisstore.ErrEvictable) || !strings.Contains(err.Error(), "maxmemory-policy noeviction") {
		t.Fatalf("TryLock on an allkeys-lru server = %v, want ErrEvictable naming the fix", err)
	}

	// A server that turns evicting while the Store uses it.
	srv2 := testserver.NewRedis(t, testserver.RedisOptions{})
	c2, err := leash.New(redisstore.New(newRDB(t, srv2.Addr), &redisstore.Options{CheckInterval: time.Millisecond}),
		&leash.Options{Lease: 3 * time.Second}) // long enough to stay held, and renewed, on a busy machine
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	h, err := c2.Mutex(lockName(t)).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(bg(t))
	admin := newRDB(t, srv2.Addr)
	if err := admin.ConfigSet(bg(t), "maxmemory", "20mb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(bg(t), "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	// The watchdog's next rounds re-read the settings; acquires fail from then.
	deadline := bg(t)
	for {
		h2, err := c2.Mutex(lockName(t) + "/next").TryLock(bg(t))
		if errors.Is(err, redisstore.ErrEvictable) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := h2.Unlock(bg(t)); err != nil {
			t.Fatal(err)
		}
		if deadline.Err() != nil {
			t.Fatal("the CONFIG SET was never noticed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAllowEvictionTellsTheHolder: with the opt-in, a lock evicted under
// memory pressure is lost, its holder is told at its next renewal at the
// latest, and the Store logs the evictions.
func TestAllowEvictionTellsTheHolder(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{Args: []string{"--maxmemory", "4mb", "--maxmemory-policy", "allkeys-random"}})
	var logged lockedBuffer
	s := redisstore.New(newRDB(t, srv.Addr), &redisstore.Options{AllowEviction: true, CheckInterval: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	c, err := leash.New(s, &leash.Options{Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := c.Mutex(lockName(t)).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	// Fill the server until the lock is evicted.
	rdb := newRDB(t, srv.Addr)
	value := strings.Repeat("x", 10_000)
	for i := 0; ; i++ {
		n, err := rdb.Exists(bg(t), lockName(t)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if err := rdb.Set(bg(t), "filler:"+string(rune('a'+i%26))+strings.Repeat("y", i%50)+time.Now().String(), value, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-h.Lost():
	case <-bg(t).Done():
		t.Fatal("the holder of an evicted lock was never told")
	}
	var lost *leash.LostError
	if err := h.Err(); !errors.As(err, &lost) || lost.Reason != leash.ReasonReleasedElsewhere {
		t.Errorf("holder's error = %v, want lost, released elsewhere", err)
	}
	deadline := bg(t)
	for !strings.Contains(logged.String(), "evicted keys") {
		if deadline.Err() != nil {
			t.Fatalf("no eviction warning logged; log: %s", logged.String())
		}
		// Renewal rounds run only while something is held.
		h2, err := c.Mutex(lockName(t) + "/keep").Lock(bg(t))
		if err == nil {
			time.Sleep(10 * time.Millisecond)
			_ = h2.Unlock(bg(t))
		}
		_ = rdb.Set(bg(t), "filler:more:"+time.Now().String(), value, 0).Err()
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger and a test together.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRefusedClientSeesTheFix: a client refused for an evicting server holds
// no lock, so no renewal round re-reads the settings; its acquires must
// still notice the operator's CONFIG SET once CheckInterval has passed.
func TestRefusedClientSeesTheFix(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{Args: []string{"--maxmemory", "20mb", "--maxmemory-policy", "allkeys-lru"}})
	c, err := leash.New(redisstore.New(newRDB(t, srv.Addr), &redisstore.Options{CheckInterval: time.Millisecond}), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	name := lockName(t)
	// Three refusals: the first INFO's own connection is a dial, which makes
	// the next acquire read INFO again; after that the facts stand.
	for range 3 {
		if _, err := c.Mutex(name).TryLock(bg(t)); !errors.Is(err, redisstore.ErrEvictable) {
			t.Fatalf("TryLock on an allkeys-lru server = %v, want ErrEvictable", err)
		}
	}
	if err := newRDB(t, srv.Addr).ConfigSet(bg(t), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	ctx := bg(t)
	for {
		h, err := c.Mutex(name).TryLock(ctx)
		if err == nil {
			_ = h.Unlock(ctx)
			return
		}
		if !errors.Is(err, redisstore.ErrEvictable) {
			t.Fatalf("TryLock after the fix = %v, want granted", err)
		}
		if ctx.Err() != nil {
			t.Fatal("the client never saw CONFIG SET maxmemory-policy noeviction")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
