package schedule_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/leakcheck"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/leash-go/leash/schedule"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	if os.Getenv(scaleEnv) != "" {
		os.Exit(runScaleChild())
	}
	code := m.Run()
	shared.Close()
	os.Exit(leakcheck.Check(code))
}

// shared is the package's lazily started redis-server.
var shared testserver.Shared

// redisStore returns a fresh Store on the shared redis-server, closed at
// cleanup.
func redisStore(t *testing.T) *redisstore.Store {
	t.Helper()
	srv := shared.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: time.Second, ReadTimeout: time.Second,
		WriteTimeout: time.Second, MaxRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	s := redisstore.New(rdb, nil)
	t.Cleanup(func() { s.Close() })
	return s
}

// newClient returns a leash Client on store, closed at cleanup.
func newClient(t *testing.T, store driver.Store, opts *leash.Options) *leash.Client {
	t.Helper()
	c, err := leash.New(store, opts)
	return testkit.Closing(t, c, err)
}

// instance is one scheduler under test, run until the test ends (or stop).
type instance struct {
	*schedule.Scheduler
	client *leash.Client
	cancel context.CancelFunc
	done   chan error
}

// newInstance returns a scheduler on its own Client of store. It is not
// running yet: call run.
func newInstance(t *testing.T, store driver.Store, copts *leash.Options, opts *schedule.Options) *instance {
	t.Helper()
	c := newClient(t, store, copts)
	if opts == nil {
		opts = &schedule.Options{}
	}
	s, err := schedule.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &instance{Scheduler: s, client: c}
}

// run runs the scheduler until stop, or the test's end.
func (in *instance) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel, in.done = cancel, make(chan error, 1)
	go func() { in.done <- in.Run(ctx) }()
	t.Cleanup(func() { in.stop(t) })
}

// stop shuts the scheduler down and waits for Run to return.
func (in *instance) stop(t *testing.T) {
	t.Helper()
	if in.cancel == nil {
		return
	}
	in.cancel()
	if err := <-in.done; err != nil {
		t.Errorf("Run returned %v, want nil after a shutdown", err)
	}
	in.cancel = nil
}

// offset is a clock off from the real one by d.
func offset(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }

// A ran is one call of a job's function, as the function saw it.
type ran struct {
	who      string
	run      schedule.Run
	at       time.Time // real time
	err      error     // what the function returned
	canceled error     // context.Cause of its ctx when it returned, if ended
}

// runLog collects the calls of job functions, from any goroutine.
type runLog struct {
	mu   sync.Mutex
	runs []ran
	news chan struct{}
}

func newRunLog() *runLog { return &runLog{news: make(chan struct{}, 1)} }

func (l *runLog) add(r ran) {
	l.mu.Lock()
	l.runs = append(l.runs, r)
	l.mu.Unlock()
	select {
	case l.news <- struct{}{}:
	default:
	}
}

func (l *runLog) all() []ran {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ran(nil), l.runs...)
}

// await waits until cond holds of the runs so far, for at most within
// counted from the call.
func (l *runLog) await(t *testing.T, within time.Duration, what string, cond func([]ran) bool) []ran {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		if runs := l.all(); cond(runs) {
			return runs
		}
		select {
		case <-l.news:
		case <-deadline.C:
			t.Fatalf("after %v: %s did not happen; runs: %+v", within, what, l.all())
		}
	}
}

// fn returns a job function that logs each call as who, then runs body
// (nil: return nil at once).
func (l *runLog) fn(who string, body func(ctx context.Context, run schedule.Run) error) schedule.Func {
	return func(ctx context.Context, run schedule.Run) error {
		start := time.Now()
		var err error
		if body != nil {
			err = body(ctx, run)
		}
		l.add(ran{who: who, run: run, at: start, err: err, canceled: context.Cause(ctx)})
		return err
	}
}

// history returns job's records, newest first.
func history(t *testing.T, in *instance, job string) []driver.RunRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := in.History(ctx, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	return st.Runs
}

// jobName is a job name unique to this run of the test, so that a test run
// again (-count) on the shared server finds no history of its own.
func jobName(t *testing.T) string { return fmt.Sprintf("test/%s/%d", t.Name(), time.Now().UnixNano()) }
