package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/pgstore"
)

// wakes collects a watcher's wake-ups.
type wakes chan driver.Wake

func (w wakes) wake(m driver.Wake) {
	select {
	case w <- m:
	default:
	}
}

// want waits for the wake-up want, skipping others when skip says so.
func (w wakes) want(t *testing.T, what string, want driver.Wake, skip func(driver.Wake) bool) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-w:
			if m == want {
				return
			}
			if skip == nil || !skip(m) {
				t.Fatalf("%s: woken with %+v, want %+v", what, m, want)
			}
		case <-timeout:
			t.Fatalf("%s: not woken with %+v within 30s", what, want)
		}
	}
}

func wakeAllOnly(m driver.Wake) bool { return m.To == driver.WakeAll }

// listenerPIDs returns the backends of the listening connections of the
// store on table.
func listenerPIDs(t *testing.T, s *pgstore.Store, schema, table string) []int32 {
	t.Helper()
	rows, err := s.Pool().Query(bg(t), "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
		pgstore.ListenerAppName(schema, table))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int32
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return pids
}

// TestListenerReconnects kills the store's listening connection on the
// server: every watcher is woken (a release may have been missed), and
// releases are heard again on the new connection.
func TestListenerReconnects(t *testing.T) {
	s := newStore(t, nil)
	w := make(wakes, 16)
	stop, err := s.Watch(bg(t), driver.KindMutex, "job", w.wake)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	pids := listenerPIDs(t, s, "public", tableName(t))
	if len(pids) != 1 {
		t.Fatalf("%d listening connections, want 1", len(pids))
	}
	if _, err := s.Pool().Exec(bg(t), "SELECT pg_terminate_backend($1)", pids[0]); err != nil {
		t.Fatal(err)
	}
	w.want(t, "listener killed", driver.Wake{To: driver.WakeAll}, nil)
	r := driver.Request{Name: "job", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
	if g, err := s.Acquire(bg(t), r); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	if err := s.Release(bg(t), r); err != nil {
		t.Fatal(err)
	}
	w.want(t, "release after the reconnect", driver.Wake{To: driver.WakeOne}, wakeAllOnly)
}

// newClient returns a leash Client on s, closed at cleanup.
func newClient(t *testing.T, s *pgstore.Store, opts *leash.Options) *leash.Client {
	t.Helper()
	c, err := leash.New(s, opts)
	return testkit.Closing(t, c, err)
}

// TestWaiterWokenByRelease: a Lock waiting for a lock held with a lease of
// ten minutes gets it when the holder unlocks: the release's notification
// woke it, since the waiter's context ends long before the lease would.
func TestWaiterWokenByRelease(t *testing.T) {
	s1 := newStore(t, nil)
	s2 := pgstore.New(newPool(t, sharedPostgres(t).URL()), &pgstore.Options{Table: tableName(t)})
	c1 := newClient(t, s1, &leash.Options{Lease: 10 * time.Minute})
	c2 := newClient(t, s2, &leash.Options{Lease: 10 * time.Minute})
	h1, err := c1.Mutex("job").Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		h2, err := c2.Mutex("job").Lock(ctx)
		if err == nil {
			if h2.Fence() <= h1.Fence() {
				err = errors.New("the waiter's token is not above the holder's")
			}
			_ = h2.Unlock(context.Background())
		}
		got <- err
	}()
	// The waiter watches once its store's listener is up.
	for len(listenerPIDs(t, s1, "public", tableName(t))) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if err := h1.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting Lock: %v", err)
	}
}

// TestListenerUsesPoolHooks: the listening connection is made as the
// pool's are, with its BeforeConnect hook (here the one that names the
// user; the URL's user does not exist).
func TestListenerUsesPoolHooks(t *testing.T) {
	newStore(t, nil) // the tables
	cfg, err := pgxpool.ParseConfig(strings.Replace(sharedPostgres(t).URL(), "postgres://postgres@", "postgres://nobody@", 1))
	if err != nil {
		t.Fatal(err)
	}
	var hooked atomic.Int64
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		hooked.Add(1)
		cc.User = "postgres"
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := pgstore.New(pool, &pgstore.Options{Table: tableName(t)})
	t.Cleanup(func() { s.Close() })
	w := make(wakes, 16)
	stop, err := s.Watch(bg(t), driver.KindMutex, "job", w.wake)
	if err != nil {
		t.Fatalf("Watch through a pool whose hook names the user: %v", err)
	}
	defer stop()
	r := driver.Request{Name: "job", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
	if g, err := s.Acquire(bg(t), r); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	if err := s.Release(bg(t), r); err != nil {
		t.Fatal(err)
	}
	w.want(t, "release", driver.Wake{To: driver.WakeOne}, wakeAllOnly)
	if hooked.Load() < 2 {
		t.Errorf("BeforeConnect called %d times, want for the pool's connection and the listener's", hooked.Load())
	}
}

// TestLongestPayload: the longest name leash accepts and the longest owner
// (a client id, a counter and the longest explicit owner) fit a
// notification's payload (8000 bytes): the fair queue's head is woken by
// name.
func TestLongestPayload(t *testing.T) {
	s := newStore(t, nil)
	name := strings.Repeat("n", leash.MaxNameLen)
	head := "00000000-0000-4000-8000-000000000002:18446744073709551615@" + strings.Repeat("o", leash.MaxOwnerLen)
	if n := len(payload('f', 'h', head, name)); n >= 8000 {
		t.Fatalf("payload of %d bytes, PostgreSQL's limit is 8000", n)
	}
	w := make(wakes, 16)
	stop, err := s.Watch(bg(t), driver.KindFair, name, w.wake)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	holder := driver.Request{Kind: driver.KindFair, Name: name, Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
	if g, err := s.Acquire(bg(t), holder); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	waiter := driver.Request{Kind: driver.KindFair, Name: name, Owner: head, Lease: time.Minute, Wait: time.Minute}
	if g, err := s.Acquire(bg(t), waiter); err != nil || g.Acquired {
		t.Fatalf("Acquire by the waiter = %+v, %v; want a place in the queue", g, err)
	}
	if err := s.Release(bg(t), holder); err != nil {
		t.Fatal(err)
	}
	w.want(t, "release", driver.Wake{To: driver.WakeHead, Head: head}, wakeAllOnly)
}

// TestListenerNeverCancels: the listening connection does not take the
// pool's context-watcher handler (which may send cancel requests): it
// interrupts a wait by a deadline only. The pool's handler builder records
// the application_name of every connection it is used for; the listener's
// is never among them.
func TestListenerNeverCancels(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(sharedPostgres(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	var used atomic.Value // the application_names, joined by "|"
	used.Store("")
	build := cfg.ConnConfig.BuildContextWatcherHandler
	cfg.ConnConfig.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		for {
			old := used.Load().(string)
			if used.CompareAndSwap(old, old+"|"+pc.ParameterStatus("application_name")) {
				break
			}
		}
		return build(pc)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := pgstore.New(pool, &pgstore.Options{Table: tableName(t)})
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(bg(t)); err != nil {
		t.Fatal(err)
	}
	stop, err := s.Watch(bg(t), driver.KindMutex, "job", func(driver.Wake) {})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	listener := pgstore.ListenerAppName(pgstore.DefaultSchema, tableName(t))
	if names := used.Load().(string); strings.Contains(names, listener) || names == "" {
		t.Errorf("the pool's context-watcher handler was built for %q; want the pool's connections only, not %q", names, listener)
	}
}
