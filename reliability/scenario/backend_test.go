package scenario_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/leash-go/leash/reliability/history"
	"github.com/redis/go-redis/v9"
)

// A backend is a kind of lock server the scenarios run against: how a test
// starts one, and how a worker — a goroutine, or a child process that gets
// only its workerConfig — builds a driver.Store on one. The scenarios that
// apply to every lock server run once per entry of [backends], as subtests
// named after the backend; the Redis-specific ones (script flush and BUSY,
// the watchdog under latency, which watches the key) use [redisBackend].
//
// # Adding a backend
//
// Add one entry to [backends], built with [urlBackend] for a store that
// registers a URL scheme with driver.Register, and import the store module
// for its registration (a blank import here, a require in go.mod):
//
//	urlBackend("postgres",
//		func(t *testing.T) server {
//			s := testserver.NewPostgres(t, testserver.PostgresOptions{})
//			return server{Addr: s.Addr, ctl: s}
//		},
//		func(addr string, timeout time.Duration) string {
//			return "postgres://…@" + addr + "/…?connect_timeout=…"
//		}),
//
// start starts a fresh server for one scenario and stops it at the test's
// cleanup. Its Pause must freeze the whole server (every process of it:
// clients can connect, nothing is answered) and Resume continue it; Kill is
// kill -9; Restart is kill -9 and a start on the same port and data
// directory, returning once the server answers again. Its data must survive
// Restart (a durable database: the restart scenario expects no double
// grant).
//
// url returns the URL of the server at addr (127.0.0.1:<port>, the server's
// or a fault proxy's): the user, password and database the test server
// created, and timeouts that make a fault surface as an error well within
// a lease: connecting gives up after timeout (a black-holed dial must not
// hang a worker), and so does a statement where the store allows. The store
// must also give up on a round trip when its ctx is done, also on a
// connection that answers nothing: the core bounds each renewal by the
// renewal interval and the hold's validity, and a worker each Lock by its
// wait. timeout is a quarter lease, at least 100ms; round it up
// where the URL takes whole seconds.
//
// What each scenario expects of every backend (rows in RELIABILITY.md are
// named "<backend>: <scenario>", Redis's without the prefix):
//
//   - baseline contention: no double grant, no stale write, no holder told late;
//   - random partitions and re-entrant holders under partitions (each client
//     behind a fault proxy that cuts, black-holes, delays and resets): the same;
//   - holder paused past its lease: no double grant; the fenced resource
//     rejects the paused holder's writes; the unfenced control's stale write
//     is caught;
//   - server paused for 0.5 and 2 leases: no double grant, no holder told late;
//   - server kill and restart ([durableRestarts]): no double grant across
//     kill -9 and restart; the control, a server clock ten times fast that
//     the checker does not know of, must show double grants (so the store
//     must keep a lease of 100ms as such, not round it up to a second);
//   - holder killed: no double grant; how long after the kill the next
//     client held is reported;
//   - a client that believes a 3x longer lease (control): the checker must
//     report a holder told late.
//
// Every scenario also needs redis-server: the fenced resource the holders
// write to is one. The history counts every store error as an operation
// whose outcome is unknown (checked as possibly done), except the Redis
// replies that say a command did not run and a failure to connect (a
// failed dial, a PostgreSQL startup refused), which history.Store records
// as definite no-ops.
//
// Readiness: a worker's window starts once its store answers. For Redis
// that is a PING on the go-redis client; for a URL backend, the store's own
// Ping(context.Context) error method if it has one, or else an Acquire and
// Release of a throwaway lock (see [storeReady]), on the unrecorded store.
type backend struct {
	// name names the backend in test names, in workerConfig.Backend and in
	// report rows.
	name string
	// start starts a lock server for one scenario, stopped at cleanup.
	start func(t *testing.T) server
	// open builds a worker's store on the server at cfg.Addr; round trips
	// give up after timeout.
	open func(cfg workerConfig, timeout time.Duration) (lockClient, error)
	// restarts are the cases of TestServerRestart.
	restarts []restartCase
	// windows scales the contention windows of the scenarios that run for
	// a time (baseline, partitions): 1 is the Redis sizes. The SQL
	// backends run shorter windows, to keep within the CI budget, long
	// enough to inject each fault several times.
	windows float64
	// parallel runs the backend's subtest of each scenario beside the other
	// parallel backends' (after the serial ones'): the SQL backends run
	// together, to keep within the CI budget; Redis runs alone.
	parallel bool
	// raceSkip, when not empty, is why the backend's scenarios skip under
	// the race detector (scripts/test.sh runs them without it).
	raceSkip string
}

// window is d, a scenario's contention window on Redis, on b.
func (b backend) window(d time.Duration) time.Duration {
	if b.windows <= 0 {
		return d
	}
	return time.Duration(float64(d) * b.windows)
}

// backends are the lock servers every applicable scenario runs against.
var backends = []backend{redisBackend, postgresBackend, mariadbBackend}

// backendNamed returns the backend called name.
func backendNamed(name string) (backend, error) {
	for _, b := range backends {
		if b.name == name {
			return b, nil
		}
	}
	return backend{}, fmt.Errorf("no backend %q", name)
}

// scenario returns the report name of scenario s on b: prefixed with the
// backend's name, except on Redis, whose rows predate backends and keep
// their names.
func (b backend) scenario(s string) string {
	if b.name == redisBackend.name {
		return s
	}
	return b.name + ": " + s
}

// forEachBackend runs f as a subtest per backend, named after it.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			skipUnderRace(t, b.raceSkip)
			if b.parallel {
				t.Parallel()
			}
			f(t, b)
		})
	}
}

// server is a lock server a scenario runs and faults.
type server struct {
	// Addr is "127.0.0.1:<port>".
	Addr string
	ctl  serverControl
}

// serverControl is what a scenario does to a lock server process; the
// servers of internal/testserver have these methods.
type serverControl interface {
	Kill() error    // SIGKILL, waiting for the process to end
	Pause() error   // SIGSTOP
	Resume() error  // SIGCONT
	Restart() error // Kill, then start on the same port and data directory
	Close()
}

// lockClient is a worker's connection to its lock server.
type lockClient struct {
	// store is the store, not yet recorded.
	store driver.Store
	// ping makes one round trip that succeeds once the server answers.
	ping func(ctx context.Context) error
	// close releases the connections.
	close func()
}

// urlBackend returns a backend whose workers open their store with
// driver.Open(url(addr, timeout)), for a store module that registers its
// URL scheme with driver.Register (and is imported for it). Its restart
// cases are [durableRestarts].
func urlBackend(name string, start func(t *testing.T) server, url func(addr string, timeout time.Duration) string) backend {
	b := backend{name: name, start: start, restarts: durableRestarts(start)}
	b.open = func(cfg workerConfig, timeout time.Duration) (lockClient, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st, err := driver.Open(ctx, url(cfg.Addr, timeout))
		if err != nil {
			return lockClient{}, err
		}
		ping := func(ctx context.Context) error { return storeReady(ctx, st, cfg.Lease) }
		return lockClient{store: st, ping: ping, close: func() { _ = st.Close() }}, nil
	}
	return b
}

// storeReady makes one round trip through st: its Ping method when it has
// one, or else an Acquire and Release of a lock no one else uses (it
// expires within lease if the Release is lost). It is the readiness probe
// of a store that does not expose its client; it runs on the store before
// it is recorded, so it never shows in a history.
func storeReady(ctx context.Context, st driver.Store, lease time.Duration) error {
	if p, ok := st.(interface{ Ping(context.Context) error }); ok {
		return p.Ping(ctx)
	}
	id := newUUID()
	req := driver.Request{Kind: driver.KindMutex, Name: "leash-reliability-ready/" + id, Owner: id + ":1", Lease: lease}
	g, err := st.Acquire(ctx, req)
	if err != nil || !g.Acquired {
		return err
	}
	return st.Release(ctx, req)
}

// newUUID returns a random UUID in its 36-character text form, the shape
// of a leash client id.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// redisBackend is redis-server with redisstore on go-redis.
var redisBackend = backend{
	name: "redis",
	start: func(t *testing.T) server {
		return redisServer(testserver.NewRedis(t, testserver.RedisOptions{}))
	},
	open: func(cfg workerConfig, timeout time.Duration) (lockClient, error) {
		opts := rdbOptions(cfg.Addr, timeout)
		if cfg.NoInfo {
			opts.Username, opts.Password = noInfoUser, noInfoPassword
		}
		rdb := redis.NewClient(opts)
		st := redisstore.New(rdb, &redisstore.Options{RestartGrace: cfg.Grace, AllowEviction: cfg.NoInfo,
			HealthCheck: 200 * time.Millisecond})
		ping := func(ctx context.Context) error { return rdb.Ping(ctx).Err() }
		return lockClient{store: st, ping: ping, close: func() { _ = rdb.Close() }}, nil
	},
	restarts: redisRestarts(),
}

// redisServer is r as a scenario's server.
func redisServer(r *testserver.Redis) server { return server{Addr: r.Addr, ctl: r} }

// TestURLBackend checks the parts of a URL backend that the registered
// backends may not use, on Redis opened by URL: the worker's store comes
// from driver.Open, both readiness probes answer (the store's Ping, and the
// throwaway Acquire and Release, which leaves no lock), the recorded store
// keeps exactly the wrapped store's Watch, and report names carry the
// backend.
func TestURLBackend(t *testing.T) {
	b := urlBackend("redis-url", redisBackend.start, func(addr string, timeout time.Duration) string {
		return fmt.Sprintf("redis://%s/?dial_timeout=%s&read_timeout=%s&write_timeout=%s", addr, timeout, timeout, timeout)
	})
	srv := b.start(t)
	const lease = time.Second
	lc, err := b.open(workerConfig{Backend: b.name, Addr: srv.Addr, Lease: lease}, lease/4)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.close()
	if err := lc.ping(t.Context()); err != nil {
		t.Errorf("ping: %v", err)
	}
	noPing := struct{ driver.Store }{lc.store} // a store without Ping: the probe acquires and releases
	if err := storeReady(t.Context(), noPing, lease); err != nil {
		t.Errorf("storeReady without Ping: %v", err)
	}
	if names, err := lc.store.(driver.Admin).List(t.Context(), ""); err != nil || len(names) != 0 {
		t.Errorf("locks after the readiness probes: %q, %v; want none", names, err)
	}
	rec := history.NewRecorder("probe", nil)
	if _, ok := history.Wrap(lc.store, rec).(driver.Watcher); !ok {
		t.Errorf("the recorded %s is not a driver.Watcher", driver.Describe(lc.store))
	}
	if _, ok := history.Wrap(noPing, rec).(driver.Watcher); ok {
		t.Errorf("the recorded store without Watch is a driver.Watcher")
	}
	if _, ok := skewed(noPing, 3).(driver.Watcher); ok {
		t.Errorf("the skewed store without Watch is a driver.Watcher")
	}
	if _, ok := skewed(lc.store, 3).(driver.Watcher); !ok {
		t.Errorf("the skewed %s is not a driver.Watcher", driver.Describe(lc.store))
	}
	if got, want := b.scenario("holder killed (SIGKILL)"), "redis-url: holder killed (SIGKILL)"; got != want {
		t.Errorf("scenario name %q, want %q", got, want)
	}
	if got := redisBackend.scenario("holder killed (SIGKILL)"); got != "holder killed (SIGKILL)" {
		t.Errorf("Redis scenario name %q, want it unprefixed", got)
	}
	if len(b.restarts) != 2 || !b.restarts[1].want.DoubleGrant {
		t.Errorf("a URL backend's restart cases: %+v, want the durable case and its control", b.restarts)
	}
}
