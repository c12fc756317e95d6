package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/pgstore"
)

// badNames are schema or table names a Store refuses: each could break the
// DDL's $$-quoted function bodies, or make two stores' notification
// channels ("leash:schema.table") coincide.
var badNames = []string{"x$$y", "$$", "a.b", "a b", "a-b", `a"b`, "a'b", "1a", "é", "a;b"}

// TestBadNamesRefused: New (through Validate), Migrate, DDL and the URL
// opener refuse a schema or table name outside [A-Za-z_][A-Za-z0-9_]*,
// with ErrBadName (ErrBadURL from the opener), before any network call:
// the pool points at a port where nothing listens.
func TestBadNamesRefused(t *testing.T) {
	pool := newPool(t, "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=1")
	for _, name := range badNames {
		for _, opts := range []pgstore.Options{{Table: name}, {Schema: name}} {
			s := pgstore.New(pool, &opts)
			if err := s.Validate(); !errors.Is(err, pgstore.ErrBadName) {
				t.Errorf("New(%+v).Validate() = %v, want ErrBadName", opts, err)
			}
			if err := s.Migrate(context.Background()); !errors.Is(err, pgstore.ErrBadName) {
				t.Errorf("New(%+v).Migrate() = %v, want ErrBadName", opts, err)
			}
			if _, err := s.Acquire(context.Background(), driver.Request{Name: "a", Owner: "o", Lease: 1}); !errors.Is(err, pgstore.ErrBadName) {
				t.Errorf("New(%+v).Acquire() = %v, want ErrBadName", opts, err)
			}
		}
		if _, err := pgstore.DDL("public", name); !errors.Is(err, pgstore.ErrBadName) {
			t.Errorf("DDL(public, %q) = %v, want ErrBadName", name, err)
		}
		if _, err := pgstore.DDL(name, "t"); !errors.Is(err, pgstore.ErrBadName) {
			t.Errorf("DDL(%q, t) = %v, want ErrBadName", name, err)
		}
		for _, param := range []string{"leash_table", "leash_schema"} {
			url := "postgres://u@127.0.0.1:1/db?" + param + "=" + strings.NewReplacer("$", "%24", " ", "%20", `"`, "%22", ";", "%3B", "'", "%27").Replace(name)
			s, err := driver.Open(context.Background(), url)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, driver.ErrBadURL) {
				t.Errorf("Open(%s) = %v, want ErrBadURL", url, err)
			}
		}
	}
	for _, good := range []pgstore.Options{{Table: "Locks_2"}, {Schema: "_x", Table: "y"}, {Table: strings.Repeat("t", pgstore.MaxTableLen)}, {Schema: strings.Repeat("s", 63)}} {
		if err := pgstore.New(pool, &good).Validate(); err != nil {
			t.Errorf("New(%+v).Validate() = %v, want nil", good, err)
		}
	}
}

// TestDollarNameMigrateRefused: a table name with "$$", which PostgreSQL
// accepts quoted, is refused before Migrate runs a byte of DDL; no object
// of that name is created.
func TestDollarNameMigrateRefused(t *testing.T) {
	pool := newPool(t, sharedPostgres(t).URL())
	table := tableName(t) + "$$x"
	err := pgstore.New(pool, &pgstore.Options{Table: table}).Migrate(bg(t))
	if !errors.Is(err, pgstore.ErrBadName) {
		t.Fatalf("Migrate with table %q = %v, want ErrBadName", table, err)
	}
	var n int
	if err := pool.QueryRow(bg(t), "SELECT count(*) FROM pg_class WHERE relname LIKE $1", tableName(t)+"%").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d relations named %s… (%v), want none", n, tableName(t), err)
	}
}
