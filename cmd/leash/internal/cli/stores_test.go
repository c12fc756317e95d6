package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/memstore"
)

// A testStore is a store the commands are tested on through the same code:
// its URL, and a way to put a leash Client on it beside the command.
type testStore struct {
	name string
	url  string
	// client returns a leash Client on the store, closed at cleanup.
	client func(t *testing.T, opts *leash.Options) *leash.Client
	// redis is the server of a Redis store; nil for the others.
	redis *testserver.Redis
}

// testStores returns the stores that every store-neutral test runs on: the
// package's redis-server, an in-memory store of the test's own, which the
// in-process commands (run) share with the test, and the package's MariaDB.
func testStores(t *testing.T) []testStore {
	t.Helper()
	srv := sharedRedis(t)
	mem := "mem://" + strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	return []testStore{
		{name: "redis", url: "redis://" + srv.Addr, redis: srv,
			client: func(t *testing.T, opts *leash.Options) *leash.Client { return newClient(t, srv.Addr, opts) }},
		{name: "mem", url: mem, client: func(t *testing.T, opts *leash.Options) *leash.Client { return openClient(t, mem, opts) }},
		mysqlStore(t),
	}
}

// openClient returns a leash Client on the store url opens, closed at cleanup.
func openClient(t *testing.T, url string, opts *leash.Options) *leash.Client {
	t.Helper()
	s, err := driver.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := leash.New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRunShowLsUnlockOnEveryStore runs run, show, ls and unlock, in
// process, on every test store: an --at-least hold outlives the command and
// keeps a second run out; show and ls name its holder and its tail; unlock
// --force frees it for the next run.
func TestRunShowLsUnlockOnEveryStore(t *testing.T) {
	// PostgreSQL cannot tell how many clients wait (Info.Waiters is -1), on
	// which the other store-neutral tests rely: it joins this one.
	for _, st := range append(testStores(t), postgresStore(t)) {
		t.Run(st.name, func(t *testing.T) { testRunShowLsUnlock(t, st) })
	}
}

func testRunShowLsUnlock(t *testing.T, st testStore) {
	t.Setenv(storeEnv, st.url)
	name := lockName(t)
	if status, _, stderr := run(t, "run", "--no-wait", "--at-least", "1m", name, "--", "true"); status != 0 {
		t.Fatalf("run --at-least 1m = %d, %q", status, stderr)
	}
	if status, _, stderr := run(t, "run", "--no-wait", name, "--", "true"); status != exitNotAcquired || !strings.Contains(stderr, "held by another owner") {
		t.Errorf("a second run during the first one's --at-least = %d, %q; want %d", status, stderr, exitNotAcquired)
	}
	status, out, stderr := run(t, "show", "--json", name)
	var j lockJSON
	if err := json.Unmarshal([]byte(out), &j); status != 0 || err != nil {
		t.Fatalf("show --json = %d, %q, %q (%v)", status, out, stderr, err)
	}
	host, _ := os.Hostname()
	if !j.Held || j.Kind != "mutex" || len(j.Owners) != 1 || j.Owners[0].Command != "true" ||
		j.Owners[0].Host != host || j.Owners[0].State != "tail" || j.Fence <= 0 {
		t.Errorf("show --json of the --at-least hold = %s", out)
	}
	status, out, _ = run(t, "show", name)
	if status != 0 || !regexp.MustCompile(`(?m)^command +true$`).MatchString(out) {
		t.Errorf("show = %d:\n%s", status, out)
	}
	status, out, _ = run(t, "ls", lockName(t)+"*")
	if status != 0 || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+` +mutex +\S+ \(true\) tail `).MatchString(out) {
		t.Errorf("ls = %d:\n%s", status, out)
	}
	status, out, stderr = run(t, "unlock", "--force", name)
	if status != 0 || !strings.Contains(out, "unlocked") || !strings.Contains(out, j.Owners[0].Owner) {
		t.Errorf("unlock --force = %d, %q, %q", status, out, stderr)
	}
	if status, _, stderr := run(t, "run", "--no-wait", name, "--", "true"); status != 0 {
		t.Errorf("run after unlock --force = %d, %q; want 0", status, stderr)
	}
	if status, out, _ := run(t, "show", name); status != 0 || !regexp.MustCompile(`(?m)^state +free$`).MatchString(out) {
		t.Errorf("show after the last run = %d:\n%s", status, out)
	}
}

// TestUnknownScheme: a store URL whose scheme no store registered is a
// usage error that lists the registered schemes, before any network call,
// without the URL's password.
func TestUnknownScheme(t *testing.T) {
	const secret = "Pa55w0rd-never-printed"
	for _, args := range [][]string{{"run", "job", "--", "true"}, {"ls"}, {"show", "job"}, {"unlock", "--force", "job"}} {
		status, _, stderr := run(t, append([]string{args[0], "--store", "consul://u:" + secret + "@h:8500"}, args[1:]...)...)
		if status != exitUsage || !strings.Contains(stderr, `no store for "consul" URLs`) || strings.Contains(stderr, secret) {
			t.Errorf("leash %s on consul:// = %d, %q; want %d, the scheme, and no password", args[0], status, stderr, exitUsage)
		}
		for _, s := range append(driver.Schemes(), "mem", "redis", "rediss", "redis+sentinel", "redis+cluster") {
			if !strings.Contains(stderr, s) {
				t.Errorf("leash %s on consul:// = %q: does not list the registered scheme %q", args[0], stderr, s)
			}
		}
	}
}

// coreOnly is a store with nothing but the core of the contract: a
// memstore seen through driver.Store alone, counting its round trips.
type coreOnly struct {
	driver.Store
	calls *atomic.Int64
}

func (s coreOnly) String() string { return "core-only test store" }
func (s coreOnly) Close() error   { return nil }

func (s coreOnly) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	s.calls.Add(1)
	return s.Store.Acquire(ctx, req)
}

func (s coreOnly) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	s.calls.Add(1)
	return s.Store.Renew(ctx, reqs)
}

func (s coreOnly) Release(ctx context.Context, req driver.Request) error {
	s.calls.Add(1)
	return s.Store.Release(ctx, req)
}

// coreOnlyStore is the store that "coreonly://" URLs open, registered once.
var coreOnlyStore = sync.OnceValue(func() coreOnly {
	s := coreOnly{Store: memstore.New(), calls: new(atomic.Int64)}
	driver.Register("coreonly", func(context.Context, string) (driver.StoreCloser, error) { return s, nil })
	return s
})

// TestStoreWithoutAdmin: a store with only the core of the contract runs
// commands, and ls, show and unlock refuse it before any round trip, naming
// the store and the capability it lacks; the Redis-only mark-fresh says it
// is for Redis.
func TestStoreWithoutAdmin(t *testing.T) {
	s := coreOnlyStore()
	t.Setenv(storeEnv, "coreonly://")
	name := lockName(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls"}, "leash: ls: not supported by this store: core-only test store has no administration (inspect, list and force release: driver.Admin); leash ls needs it"},
		{[]string{"show", name}, "core-only test store has no administration"},
		{[]string{"show", "--json", name}, "leash show needs it"},
		{[]string{"unlock", "--force", name}, "leash unlock needs it"},
		{[]string{"mark-fresh", "--force"}, "core-only test store has no Redis server"},
	} {
		before := s.calls.Load()
		status, out, stderr := run(t, tc.args...)
		if status != exitUsage || out != "" || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("leash %q on a core-only store = %d, %q, %q; want %d and one line with %q", tc.args, status, out, stderr, exitUsage, tc.want)
		}
		if n := s.calls.Load() - before; n != 0 {
			t.Errorf("leash %q on a core-only store made %d round trips, want none", tc.args, n)
		}
	}
	before := s.calls.Load()
	if status, _, stderr := run(t, "run", "--no-wait", name, "--", "true"); status != 0 {
		t.Errorf("run on a core-only store = %d, %q; want 0: it needs only the core", status, stderr)
	}
	if n := s.calls.Load() - before; n < 2 {
		t.Errorf("run on a core-only store made %d round trips, want an acquire and a release", n)
	}
	if !slices.Contains(driver.Schemes(), "coreonly") {
		t.Errorf("driver.Schemes() = %q, want coreonly among them", driver.Schemes())
	}
}

// dialFirst is the scheme of a store whose opener connects, as a store
// without lazy connections does: "dialfirst://[user:password@]host:port"
// dials host:port and fails as the dial does; any other URL is a bad one.
const dialFirst = "dialfirst"

var registerDialFirst = sync.OnceFunc(func() {
	driver.Register(dialFirst, func(ctx context.Context, rawURL string) (driver.StoreCloser, error) {
		u, err := url.Parse(rawURL)
		if err != nil || u.Port() == "" {
			return nil, fmt.Errorf("dialfirst: URL %q: want dialfirst://host:port: %w", driver.Redact(rawURL), driver.ErrBadURL)
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return nil, err
		}
		c.Close()
		return nil, errors.New("dialfirst: a test store that never opens")
	})
})

// TestOpenErrorStatus: an opener's ErrBadURL is a usage error (64), before
// any connection; an opener that cannot reach its server exits 69 saying
// so; neither shows the password.
func TestOpenErrorStatus(t *testing.T) {
	registerDialFirst()
	const secret = "Pa55w0rd-never-printed"
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url    string
		status int
		want   string
	}{
		{"dialfirst://u:" + secret + "@127.0.0.1", exitUsage, `dialfirst: URL "dialfirst://u:xxxxx@127.0.0.1": want dialfirst://host:port`},
		{"dialfirst://u:" + secret + "@127.0.0.1:" + strconv.Itoa(port), exitStore,
			"cannot reach the store at dialfirst://u:xxxxx@127.0.0.1:" + strconv.Itoa(port) + ": dial tcp"},
	} {
		for _, args := range [][]string{{"run", "job", "--", "true"}, {"ls"}, {"show", "job"}, {"unlock", "--force", "job"}} {
			status, _, stderr := run(t, append([]string{args[0], "--store", tc.url}, args[1:]...)...)
			if status != tc.status || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, secret) {
				t.Errorf("leash %s on %s = %d, %q; want %d and one line with %q, without the password", args[0], driver.Redact(tc.url), status, stderr, tc.status, tc.want)
			}
		}
	}
}

// sessionStore is a memstore session store, as "memsession://" URLs open it:
// a driver.SessionStore, as etcd's and ZooKeeper's will be.
type sessionStore struct{ *memstore.Sessions }

func (sessionStore) Close() error { return nil }

var registerSessions = sync.OnceFunc(func() {
	s := sessionStore{memstore.NewSessions()}
	driver.Register("memsession", func(context.Context, string) (driver.StoreCloser, error) { return s, nil })
})

// TestRunAtLeastOnSessionStore: on a store whose locks live exactly as long
// as their session, run --at-least is refused before the command runs (its
// lock could not be left to expire after the command), and run without it
// works.
func TestRunAtLeastOnSessionStore(t *testing.T) {
	registerSessions()
	t.Setenv(storeEnv, "memsession://")
	marker := filepath.Join(t.TempDir(), "ran")
	status, out, stderr := run(t, "run", "--at-least", "1m", lockName(t), "--", "touch", marker)
	if status != exitUsage || out != "" || !strings.Contains(stderr, "leases that outlive their holder's session") {
		t.Errorf("run --at-least on a session store = %d, %q, %q; want %d and a message naming what it lacks", status, out, stderr, exitUsage)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran although run refused --at-least")
	}
	if status, _, stderr := run(t, "run", lockName(t), "--", "touch", marker); status != 0 {
		t.Errorf("run on a session store = %d, %q; want 0", status, stderr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the command did not run: %v", err)
	}
}
