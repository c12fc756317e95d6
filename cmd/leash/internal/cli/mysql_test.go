package cli

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	_ "github.com/leash-go/leash/mysqlstore" // registers mysql:// (the binary has it from store_mysql.go)
)

// sharedMariaDB is the package's MariaDB for the mysql:// tests, started on
// first use and stopped in TestMain.
var sharedMariaDB testserver.SharedMariaDB

// mysqlDB is the database the mysql:// tests use, created once.
var mysqlDB struct {
	once sync.Once
	err  error
}

// mysqlStore returns the test store of a mysql:// URL on the package's
// MariaDB, whose opener migrates the schema (leash_migrate=true).
func mysqlStore(t *testing.T) testStore {
	t.Helper()
	srv := sharedMariaDB.MariaDB(t)
	mysqlDB.once.Do(func() {
		db, err := sql.Open("mysql", srv.DSN("", ""))
		if err != nil {
			mysqlDB.err = err
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, mysqlDB.err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS leash_cli")
	})
	if mysqlDB.err != nil {
		t.Fatalf("create database: %v", mysqlDB.err)
	}
	url := "mysql://root@" + srv.Addr + "/leash_cli?leash_migrate=true"
	return testStore{name: "mysql", url: url,
		client: func(t *testing.T, opts *leash.Options) *leash.Client { return openClient(t, url, opts) }}
}

// TestMySQLBinary runs the leash binary, whose main package registers
// mysql:// (store_mysql.go), on a mysql:// URL: run takes and frees a lock,
// show reads it back.
func TestMySQLBinary(t *testing.T) {
	st := mysqlStore(t)
	name := lockName(t)
	if p := startLeash(t, st.url, "run", "--no-wait", name, "--", "true"); p.wait(t, time.Minute) != 0 {
		t.Fatalf("leash run on %s = %d: %s", st.url, p.status, p.stderr.String())
	}
	p := startLeash(t, st.url, "show", name)
	if p.wait(t, time.Minute) != 0 || !strings.Contains(p.stdout.String(), "free") {
		t.Errorf("leash show = %d:\n%s%s", p.status, p.stdout.String(), p.stderr.String())
	}
}
