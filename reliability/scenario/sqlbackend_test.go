package scenario_test

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	_ "github.com/leash-go/leash/mysqlstore" // registers mysql://
	_ "github.com/leash-go/leash/pgstore"    // registers postgres://
)

// postgresBackend is PostgreSQL with pgstore, opened by URL as the
// superuser on the server's postgres database. Durability: the server runs
// with PostgreSQL's durable defaults (PostgresOptions.Durable: fsync,
// synchronous_commit and full_page_writes on), so every commit it
// acknowledged is on disk before the kill -9 of Restart. Pause and Kill
// signal the postmaster and every backend process.
var postgresBackend = sqlBackend(urlBackend("postgres",
	func(t *testing.T) server {
		s := testserver.NewPostgres(t, testserver.PostgresOptions{Durable: true})
		migrate(t, pgURL(s.Addr, 5*time.Second))
		return server{Addr: s.Addr, ctl: s}
	},
	pgURL))

// pgURL is the URL of the PostgreSQL server at addr. pgx's connect_timeout
// takes whole seconds; a statement gives up when its ctx is done (pgx
// cancels it and closes the connection).
func pgURL(addr string, timeout time.Duration) string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable&connect_timeout=%d", addr, seconds(timeout))
}

// seconds is d rounded up to whole seconds, at least 1.
func seconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }

// mariadbBackend is MariaDB with mysqlstore, opened by URL as root on a
// database of its own. mariadbd is one process (its connections are
// threads), so the testserver's SIGSTOP freezes all of it. Durability: the
// testserver starts mariadbd with innodb_flush_log_at_trx_commit=2 (the log
// is written to the OS at each commit, flushed once a second: a kill of the
// server loses nothing, a crash of the machine may), so the backend sets it
// to 1, InnoDB's durable default (each commit flushed to disk before it is
// acknowledged), as soon as the server answers, at the start and after
// every restart; the doublewrite buffer is on (the default), the binary log
// off.
var mariadbBackend = sqlBackend(urlBackend("mysql",
	func(t *testing.T) server {
		m := testserver.NewMariaDB(t)
		d := durableMariaDB{m}
		if err := d.durable(); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("mysql", m.DSN("", "timeout=5s"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(t.Context(), "CREATE DATABASE leash"); err != nil {
			t.Fatal(err)
		}
		migrate(t, mysqlURL(m.Addr, 5*time.Second))
		return server{Addr: m.Addr, ctl: d}
	},
	mysqlURL))

// mysqlURL is the URL of the MariaDB server at addr: connecting, and each
// read and write of a statement, give up after timeout.
func mysqlURL(addr string, timeout time.Duration) string {
	return fmt.Sprintf("mysql://root@%s/leash?timeout=%s&readTimeout=%s&writeTimeout=%s", addr, timeout, timeout, timeout)
}

// durableMariaDB is a MariaDB whose commits are flushed to disk before they
// are acknowledged, also after a restart.
type durableMariaDB struct{ *testserver.MariaDB }

// Restart kills the server and starts it again, durable.
func (m durableMariaDB) Restart() error {
	if err := m.MariaDB.Restart(); err != nil {
		return err
	}
	return m.durable()
}

// durable sets innodb_flush_log_at_trx_commit=1 on the running server (it
// lasts until the server process ends).
func (m durableMariaDB) durable() error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.Timeout = "root", "tcp", m.Addr, 5*time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.ExecContext(ctx, "SET GLOBAL innodb_flush_log_at_trx_commit = 1"); err != nil {
		return fmt.Errorf("mariadb on %s: make commits durable: %w", m.Addr, err)
	}
	return nil
}

// migrate creates the lock store's schema on the server of url once, before
// any worker opens it (a store opened by URL refuses a missing schema).
func migrate(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st, err := driver.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, ok := st.(interface{ Migrate(context.Context) error })
	if !ok {
		t.Fatalf("%s has no Migrate", driver.Describe(st))
	}
	if err := m.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}

// sqlBackend is b with the SQL stores' sizes: half the contention windows
// of Redis (see backend.windows), and each scenario's subtest run in
// parallel with the other SQL backend's.
func sqlBackend(b backend) backend {
	b.windows, b.parallel = 0.5, true
	return b
}
