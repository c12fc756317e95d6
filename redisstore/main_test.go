package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/leakcheck"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// helperEnv, when set, makes the test binary run as a lock holder process
// (see runHolder) instead of running tests.
const helperEnv = "LEASH_TEST_HOLDER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHolder())
	}
	code := m.Run()
	shared.Close()
	os.Exit(leakcheck.Check(code))
}

// shared is the package's lazily started redis-server for tests that do not
// inject faults into the server itself.
var shared testserver.Shared

func sharedRedis(t *testing.T) *testserver.Redis {
	t.Helper()
	return shared.Redis(t)
}

// newRDB returns a go-redis client for addr with timeouts short enough for
// fault tests, closed at cleanup.
func newRDB(t *testing.T, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr:         addr,
		DialTimeout:  time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		MaxRetries:   1,
	})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// newClient returns a leash Client on a fresh store for addr, closed at cleanup.
func newClient(t *testing.T, addr string, opts *leash.Options) *leash.Client {
	t.Helper()
	c, err := leash.New(redisstore.New(newRDB(t, addr), nil), opts)
	return testkit.Closing(t, c, err)
}

func lockName(t *testing.T) string { return "test/" + t.Name() }

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fencedWrite writes token to the tests' fenced resource (testkit.FenceLua)
// and reports whether it was accepted.
func fencedWrite(ctx context.Context, rdb redis.UniversalClient, resource string, token int64) (bool, error) {
	f, err := testkit.ParseFence(rdb.Eval(ctx, testkit.FenceLua, []string{resource}, token).Result())
	return f.Accepted, err
}

// runHolder is the body of a holder child process. It takes the lock named
// by LEASH_TEST_NAME on LEASH_TEST_ADDR with lease LEASH_TEST_LEASE, then
// every 200ms checks its hold and makes a fenced write, printing one line per
// event: "acquired F", "wrote F accepted|rejected", "lost REASON". The long
// sleep after each write lets a test pause the process right after a write,
// so that its next action on resuming is the check.
func runHolder() int {
	addr, name := os.Getenv("LEASH_TEST_ADDR"), os.Getenv("LEASH_TEST_NAME")
	lease, err := time.ParseDuration(os.Getenv("LEASH_TEST_LEASE"))
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := leash.New(redisstore.New(rdb, nil), &leash.Options{Lease: lease})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	ctx := context.Background()
	if os.Getenv("LEASH_TEST_WAITER") == "1" {
		fmt.Println("waiting") // the lock is held: this process queues for it
	}
	h, err := lockKind(ctx, c, os.Getenv("LEASH_TEST_KIND"), name)
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	fmt.Println("acquired", h.Fence())
	if os.Getenv("LEASH_TEST_TOLD") == "1" {
		// When the hold was lost, by this process's clock, for a test that
		// checks it against the next grant.
		go func() {
			<-h.Lost()
			var le *leash.LostError
			errors.As(h.Err(), &le)
			fmt.Println("told", time.Now().UnixNano(), strings.ReplaceAll(le.Reason.String(), " ", "_"))
		}()
	}
	for {
		if err := h.Err(); err != nil {
			var le *leash.LostError
			errors.As(err, &le)
			fmt.Println("lost", strings.ReplaceAll(le.Reason.String(), " ", "_"))
			return 3
		}
		ok, err := fencedWrite(ctx, rdb, name+"/resource", h.Fence())
		switch {
		case err != nil:
			fmt.Println("error", err)
		case ok:
			fmt.Println("wrote", h.Fence(), "accepted")
		default:
			fmt.Println("wrote", h.Fence(), "rejected")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lockKind takes the lock called name of the given kind: "mutex" (the
// default), "fair", "read", "write" or "permit" (a semaphore of one permit).
func lockKind(ctx context.Context, c *leash.Client, kind, name string) (*leash.Hold, error) {
	switch kind {
	case "fair":
		return c.FairMutex(name, nil).Lock(ctx)
	case "read":
		return c.RWMutex(name, nil).RLock(ctx)
	case "write":
		return c.RWMutex(name, nil).Lock(ctx)
	case "permit":
		return c.Semaphore(name, 1).Acquire(ctx)
	}
	return c.Mutex(name).Lock(ctx)
}

// grantedAt runs lock in a goroutine, sends on the returned channel the time
// the lock was granted (the zero time on an error, reported with t.Error),
// and unlocks it.
func grantedAt(t *testing.T, lock func() (*leash.Hold, error)) <-chan time.Time {
	at := make(chan time.Time, 1)
	go func() {
		h, err := lock()
		if err != nil {
			t.Error(err)
			at <- time.Time{}
			return
		}
		at <- time.Now()
		_ = h.Unlock(context.Background())
	}()
	return at
}

// holder is a running holder child process.
type holder struct {
	*testkit.Child
	fence int64
}

// startKindHolder runs a holder child that takes a lock of kind (see
// lockKind) and waits until it holds it.
func startKindHolder(t *testing.T, addr, name string, lease time.Duration, kind string) *holder {
	t.Helper()
	return startChild(t, addr, name, lease, kind, false)
}

// startWaiter runs a child that waits for a lock of kind that is held; it
// returns once the child is about to wait.
func startWaiter(t *testing.T, addr, name string, kind string) *holder {
	t.Helper()
	return startChild(t, addr, name, time.Second, kind, true)
}

func startChild(t *testing.T, addr, name string, lease time.Duration, kind string, waiter bool, env ...string) *holder {
	t.Helper()
	w := "0"
	if waiter {
		w = "1"
	}
	env = append(env, helperEnv+"=1", "LEASH_TEST_ADDR="+addr, "LEASH_TEST_WAITER="+w,
		"LEASH_TEST_NAME="+name, "LEASH_TEST_LEASE="+lease.String(), "LEASH_TEST_KIND="+kind)
	h := &holder{Child: testkit.StartSelf(t, "holder", env...)}
	if waiter {
		if l := h.next(t, 30*time.Second); l != "waiting" {
			t.Fatalf("waiter said %q, want waiting", l)
		}
		return h
	}
	var err error
	if h.fence, err = h.Acquired(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return h
}

// next returns the holder's next line.
func (h *holder) next(t *testing.T, within time.Duration) string {
	t.Helper()
	l, err := h.Next(within)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
