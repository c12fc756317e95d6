package redisstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/redisstore"
	"github.com/leash-go/leash/storetest"
	"github.com/redis/go-redis/v9"
)

func TestConformance(t *testing.T) {
	srv := sharedRedis(t)
	s := redisstore.New(newRDB(t, srv.Addr), nil)
	t.Cleanup(func() { s.Close() })
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}

// TestConformanceSmallBatches runs the suite with batches of 7 locks, so that
// renewals span many pipelined scripts.
func TestConformanceSmallBatches(t *testing.T) {
	srv := sharedRedis(t)
	s := redisstore.New(newRDB(t, srv.Addr), &redisstore.Options{BatchSize: 7})
	t.Cleanup(func() { s.Close() })
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}

// TestConformanceKeyPrefix runs the suite with a key prefix: every key and
// channel must carry it, or a wake or a companion would be missed.
func TestConformanceKeyPrefix(t *testing.T) {
	srv := sharedRedis(t)
	s := redisstore.New(newRDB(t, srv.Addr), &redisstore.Options{KeyPrefix: "app[1]:"})
	t.Cleanup(func() { s.Close() })
	if err := s.MarkFresh(bg(t)); err != nil { // the test server marked only leash:epoch
		t.Fatal(err)
	}
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}

func TestNewRejectsNilClientAndBadOptions(t *testing.T) {
	var nilClient *redis.Client
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for name, s := range map[string]*redisstore.Store{
		"nil interface":   redisstore.New(nil, nil),
		"nil *Client":     redisstore.New(nilClient, nil),
		"batch too large": redisstore.New(rdb, &redisstore.Options{BatchSize: redisstore.MaxBatchSize + 1}),
		"negative batch":  redisstore.New(rdb, &redisstore.Options{BatchSize: -1}),
		"negative health": redisstore.New(rdb, &redisstore.Options{HealthCheck: -time.Second}),
		"brace in prefix": redisstore.New(rdb, &redisstore.Options{KeyPrefix: "{app}:"}),
	} {
		t.Run(name, func(t *testing.T) {
			c, err := leash.New(s, nil)
			if err == nil {
				c.Close()
			}
			if !errors.Is(err, leash.ErrInvalidArgument) || !strings.Contains(err.Error(), "redisstore") {
				t.Errorf("leash.New = %v, want ErrInvalidArgument naming redisstore", err)
			}
		})
	}
}

// TestNewRejectsRing checks that a Ring, which shards keys without regard to
// Cluster slots, is refused by Validate before any connection is made.
func TestNewRejectsRing(t *testing.T) {
	var dials atomic.Int32
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:              map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2"},
		HeartbeatFrequency: time.Hour,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			return nil, errors.New("this test makes no connection")
		},
	})
	defer ring.Close()
	c, err := leash.New(redisstore.New(ring, nil), nil)
	if err == nil {
		c.Close()
	}
	if !errors.Is(err, leash.ErrInvalidArgument) || !strings.Contains(err.Error(), "redis.Ring") {
		t.Errorf("leash.New on a Ring = %v, want ErrInvalidArgument naming redis.Ring", err)
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("%d connections dialled, want none", n)
	}
}

func TestNamesThatBreakHashSlotsAreRejected(t *testing.T) {
	// The client points nowhere: a round trip would fail, not ErrInvalidName.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	c, err := leash.New(redisstore.New(rdb, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, name := range []string{"a}b", "a{b", "a{}b", "}{"} {
		if _, err := c.Mutex(name).TryLock(context.Background()); !errors.Is(err, leash.ErrInvalidName) {
			t.Errorf("TryLock(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	for _, name := range []string{"{orders}:42", "x{y}z}", "plain:name", "x{y}", "{a}{b}", "{a}b}"} {
		if _, err := c.Mutex(name).TryLock(context.Background()); errors.Is(err, leash.ErrInvalidName) {
			t.Errorf("TryLock(%q) = %v, want it accepted (and a connection error)", name, err)
		}
	}
	// A hash tag alone has the companion keys of the name inside it
	// (Redisson's layout puts a name without a tag in braces): refused,
	// naming the other lock. Under a key prefix the two keys differ.
	for _, kind := range []func(string) error{
		func(n string) error { _, err := c.Mutex(n).TryLock(context.Background()); return err },
		func(n string) error { _, err := c.FairMutex(n, nil).TryLock(context.Background()); return err },
		func(n string) error { _, err := c.Semaphore(n, 3).TryAcquire(context.Background()); return err },
	} {
		if err := kind("{orders}"); !errors.Is(err, leash.ErrInvalidName) || !strings.Contains(err.Error(), `the lock "orders"`) {
			t.Errorf("TryLock(%q) = %v, want ErrInvalidName naming the lock \"orders\"", "{orders}", err)
		}
	}
	prefixed, err := leash.New(redisstore.New(rdb, &redisstore.Options{KeyPrefix: "app:"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer prefixed.Close()
	if _, err := prefixed.Mutex("{orders}").TryLock(context.Background()); errors.Is(err, leash.ErrInvalidName) {
		t.Errorf("TryLock(%q) under a key prefix = %v, want it accepted (and a connection error)", "{orders}", err)
	}
}

// TestScriptCacheFlush checks that every script is reloaded after SCRIPT
// FLUSH (as after a restart or failover), including pipelined renewals.
func TestScriptCacheFlush(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, &leash.Options{Lease: 600 * time.Millisecond})
	name := lockName(t)
	for i := range 3 {
		if err := rdb.ScriptFlush(bg(t)).Err(); err != nil {
			t.Fatal(err)
		}
		h, err := c.Mutex(name).Lock(bg(t))
		if err != nil {
			t.Fatalf("Lock after SCRIPT FLUSH: %v", err)
		}
		if err := rdb.ScriptFlush(bg(t)).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond) // renewals run on an empty cache
		if err := h.Err(); err != nil {
			t.Fatalf("round %d: hold lost after SCRIPT FLUSH: %v", i, err)
		}
		if err := rdb.ScriptFlush(bg(t)).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Inspect(bg(t), name); err != nil {
			t.Fatalf("Inspect after SCRIPT FLUSH: %v", err)
		}
		if err := rdb.ScriptFlush(bg(t)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(bg(t)); err != nil {
			t.Fatalf("Unlock after SCRIPT FLUSH: %v", err)
		}
	}
}

// TestFencingSurvivesCounterLoss deletes the fencing counter, as a restart
// without persistence would, and checks that tokens still grow.
func TestFencingSurvivesCounterLoss(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, nil)
	name := lockName(t)
	var last int64
	for i := range 5 {
		h, err := c.Mutex(name).Lock(bg(t))
		if err != nil {
			t.Fatal(err)
		}
		if h.Fence() <= last {
			t.Fatalf("grant %d token %d, want > %d", i, h.Fence(), last)
		}
		last = h.Fence()
		if err := h.Unlock(bg(t)); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Del(bg(t), "redisson_lock_token:{"+name+"}").Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTokenIsMaxOfCounterAndClock checks both branches of minting: a counter
// behind the server clock (Redisson's RFencedLock counts from 1) jumps to the
// clock in microseconds, and a counter ahead of it is incremented by one.
// Either way the counter stays a decimal integer that Redisson can INCR.
func TestTokenIsMaxOfCounterAndClock(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, nil)
	name := lockName(t)
	counter := "redisson_lock_token:{" + name + "}"
	grant := func() int64 {
		t.Helper()
		h, err := c.Mutex(name).Lock(bg(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(bg(t)); err != nil {
			t.Fatal(err)
		}
		stored, err := rdb.Get(bg(t), counter).Int64()
		if err != nil || stored != h.Fence() {
			t.Fatalf("counter = %d, %v after granting token %d; want the token, as an integer", stored, err, h.Fence())
		}
		return h.Fence()
	}
	clock := func() int64 {
		t.Helper()
		now, err := rdb.Time(bg(t)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now.UnixMicro()
	}

	if err := rdb.Set(bg(t), counter, 41, 0).Err(); err != nil {
		t.Fatal(err)
	}
	before := clock()
	if tok := grant(); tok < before || tok > clock() {
		t.Errorf("token after a Redisson-sized counter = %d, want the server clock in µs, in [%d, now]", tok, before)
	}

	// A counter that is no decimal (here negative, longer than the clock's
	// digits) is not leash's: the name is refused, the counter kept.
	if err := rdb.Set(bg(t), counter, "-99999999999999999", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mutex(name).TryLock(bg(t)); !errors.Is(err, leash.ErrNotALock) {
		t.Errorf("TryLock after a negative counter = %v, want ErrNotALock", err)
	}
	if v := rdb.Get(bg(t), counter).Val(); v != "-99999999999999999" {
		t.Errorf("counter = %q after the refusal, want it unchanged", v)
	}

	ahead := clock() + 1_000_000_000 // 1000 s ahead, as after a clock step back
	if err := rdb.Set(bg(t), counter, ahead, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if tok := grant(); tok != ahead+1 {
		t.Errorf("token after a counter ahead of the clock = %d, want %d (counter + 1)", tok, ahead+1)
	}
	if n, err := rdb.Incr(bg(t), counter).Result(); err != nil || n != ahead+2 {
		t.Errorf("Redisson's INCR of the counter = %d, %v; want %d", n, err, ahead+2)
	}

	// The last token a script counts exactly is 2^53-1: Lua's numbers are
	// doubles, and the token after it could round to the one before. A
	// counter there (no clock nor Redisson count comes near) is refused by
	// every kind that mints a token, and kept as it is.
	const last = 1<<53 - 1
	if err := rdb.Set(bg(t), counter, last-1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if tok := grant(); tok != last {
		t.Errorf("token after counter 2^53-2 = %d, want %d exactly", tok, int64(last))
	}
	for kind, try := range map[string]func(context.Context) (*leash.Hold, error){
		"Mutex": c.Mutex(name).TryLock, "FairMutex": c.FairMutex(name, nil).TryLock, "RWMutex": c.RWMutex(name, nil).TryLock,
	} {
		if _, err := try(bg(t)); !errors.Is(err, leash.ErrNotALock) || !strings.Contains(err.Error(), "2^53-1") {
			t.Errorf("%s.TryLock with counter 2^53-1 = %v, want ErrNotALock saying what the counter holds", kind, err)
		}
	}
	if v := rdb.Get(bg(t), counter).Val(); v != "9007199254740991" {
		t.Errorf("counter = %q after the refusals, want 2^53-1 unchanged", v)
	}
}
