package pgstore_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leash-go/leash/internal/leakcheck"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/pgstore"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(churnEnv); url != "" {
		os.Exit(runChurn(url))
	}
	flag.Parse()
	if _, err := testserver.PostgresBinDir(); err != nil && !testserver.RequireServers() {
		// The tests skip themselves without PostgreSQL; an Example cannot,
		// and needs a server to print its output.
		_ = flag.Set("test.skip", "^Example")
	}
	code := m.Run()
	shared.Close()
	os.Exit(leakcheck.Check(code))
}

// shared is the package's lazily started PostgreSQL for the tests that do
// not inject faults into the server itself.
var shared testserver.SharedPostgres

func sharedPostgres(t testing.TB) *testserver.Postgres {
	t.Helper()
	return shared.Postgres(t)
}

// newPool returns a pool on url, closed at cleanup.
func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 32
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// tableNames are the tests' table names, one per test, unique to this run
// (a test may run again in the process, with -count, on the same server).
var tableNames sync.Map // testing.TB -> string

// tableName returns the table name of the test's own: tests never share
// tables.
func tableName(t testing.TB) string {
	if name, ok := tableNames.Load(t); ok {
		return name.(string)
	}
	name := strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
			return r
		}
		if 'A' <= r && r <= 'Z' {
			return r - 'A' + 'a'
		}
		return '_'
	}, t.Name())
	if len(name) > 36 {
		name = name[len(name)-36:]
	}
	name = fmt.Sprintf("t_%s_%04x", name, rand.N(1<<16))
	actual, _ := tableNames.LoadOrStore(t, name)
	return actual.(string)
}

// newStore returns a migrated Store on its own table of the shared server,
// closed at cleanup.
func newStore(t testing.TB, opts *pgstore.Options) *pgstore.Store {
	t.Helper()
	pool := newPool(t, sharedPostgres(t).URL())
	o := pgstore.Options{Table: tableName(t)}
	if opts != nil {
		o = *opts
		if o.Table == "" {
			o.Table = tableName(t)
		}
	}
	s := pgstore.New(pool, &o)
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(bg(t)); err != nil {
		t.Fatal(err)
	}
	return s
}

func bg(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustDDL returns pgstore.DDL(schema, table), failing the test on an error.
func mustDDL(t testing.TB, schema, table string) string {
	t.Helper()
	ddl, err := pgstore.DDL(schema, table)
	if err != nil {
		t.Fatal(err)
	}
	return ddl
}

// waitForLockWait returns once a backend other than the test's own is
// waiting for a lock in a statement containing fn (a function's name):
// the call under test has reached its row lock.
func waitForLockWait(t testing.TB, pool *pgxpool.Pool, fn string) {
	t.Helper()
	ctx := bg(t)
	for {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND strpos(query, $1) > 0`, fn).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no call of %s waited for a lock: %v", fn, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
