package mysqlstore_test

import (
	"context"
	"database/sql"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/leash-go/leash/internal/leakcheck"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/mysqlstore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close()
	os.Exit(leakcheck.Check(code))
}

// shared is the package's lazily started MariaDB for tests that do not
// inject faults into the server itself.
var shared testserver.SharedMariaDB

// testDB is the database the shared server's tests use, created once.
const testDB = "leash_test"

var createDB sync.Once

// sharedServer returns the shared server, with testDB created.
func sharedServer(t testing.TB) *testserver.MariaDB {
	t.Helper()
	srv := shared.MariaDB(t)
	var err error
	createDB.Do(func() { err = createDatabase(srv, testDB) })
	if err != nil {
		t.Fatalf("create database: %v", err)
	}
	return srv
}

func createDatabase(srv *testserver.MariaDB, name string) error {
	db, err := sql.Open("mysql", srv.DSN("", ""))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"`")
	return err
}

// oddZone are DSN parameters that set the session time zone far from UTC
// and make the driver parse times in yet another zone: no lease may depend
// on either.
const oddZone = "time_zone=%27%2B11%3A30%27&parseTime=true&loc=America%2FNew_York"

// openDB opens a *sql.DB on srv's database db with params, closed at cleanup.
func openDB(t testing.TB, srv *testserver.MariaDB, db, params string) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(srv.DSN(db, params))
	if err != nil {
		t.Fatalf("ParseDSN: %v", err)
	}
	cfg.Timeout = 5 * time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("NewConnector: %v", err)
	}
	sdb := sql.OpenDB(conn)
	sdb.SetMaxIdleConns(32)
	t.Cleanup(func() { sdb.Close() })
	return sdb
}

// newStore returns a migrated Store on the shared server's test database,
// with the DSN parameters params, closed at cleanup.
func newStore(t testing.TB, params string, opts *mysqlstore.Options) *mysqlstore.Store {
	t.Helper()
	srv := sharedServer(t)
	s := mysqlstore.New(openDB(t, srv, testDB, params), opts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func bg(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
