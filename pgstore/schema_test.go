package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/pgstore"
)

// userTable creates a table of the application's own with rows in it, and
// returns a function that reports its contents.
func userTable(t *testing.T, s *pgstore.Store, ddl string, rows ...string) func() string {
	t.Helper()
	ctx := bg(t)
	if _, err := s.Pool().Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, err := s.Pool().Exec(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	return func() string {
		var out string
		if err := s.Pool().QueryRow(ctx, "SELECT string_agg(x::text, ';' ORDER BY x::text) FROM "+pgx.Identifier{"public", tableName(t)}.Sanitize()+" x").Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
}

// TestUserTableRefused gives the store an application's table as its lock
// table, with columns of its own and with leash's own columns: every call,
// Migrate included, is refused with ErrSchema saying it is not leash's,
// and the table is left as it was.
func TestUserTableRefused(t *testing.T) {
	for name, ddl := range map[string]string{
		"other columns":   "CREATE TABLE %s (id integer PRIMARY KEY, email text)",
		"leash's columns": "CREATE TABLE %s (name text PRIMARY KEY, kind text NOT NULL DEFAULT 'l', fence bigint NOT NULL DEFAULT 0, permits integer NOT NULL DEFAULT 0)",
	} {
		t.Run(name, func(t *testing.T) {
			table := tableName(t)
			s := pgstore.New(newPool(t, sharedPostgres(t).URL()), &pgstore.Options{Table: table})
			t.Cleanup(func() { s.Close() })
			var insert string
			if strings.Contains(ddl, "email") {
				insert = "INSERT INTO " + table + " VALUES (1, 'a@example.com'), (2, 'b@example.com')"
			} else {
				insert = "INSERT INTO " + table + " (name, fence) VALUES ('job', 7)"
			}
			contents := userTable(t, s, strings.Replace(ddl, "%s", table, 1), insert)
			before := contents()
			ctx := bg(t)
			r := driver.Request{Name: "job", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
			errs := map[string]error{"Check": s.Check(ctx), "Migrate": s.Migrate(ctx)}
			_, errs["Acquire"] = s.Acquire(ctx, r)
			errs["Release"] = s.Release(ctx, r)
			errs["Renew"] = s.Renew(ctx, []driver.Request{r})[0].Err
			_, errs["ForceRelease"] = s.ForceRelease(ctx, "job")
			_, errs["List"] = s.List(ctx, "")
			_, errs["Inspect"] = s.Inspect(ctx, "job")
			errs["SetPermits"] = s.SetPermits(ctx, "job", 3)
			for op, err := range errs {
				if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), "is not leash's") {
					t.Errorf("%s on an application's table = %v, want ErrSchema saying it is not leash's", op, err)
				}
			}
			if after := contents(); after != before {
				t.Errorf("the application's table changed: %q, was %q", after, before)
			}
			var version *string
			if err := s.Pool().QueryRow(ctx, "SELECT to_regclass($1)::text", table+"_version").Scan(&version); err != nil || version != nil {
				t.Errorf("Migrate created %v beside the application's table (%v)", version, err)
			}
		})
	}
}

// TestSchemaMissing: before Migrate, calls say how to create the tables;
// after it, they work.
func TestSchemaMissing(t *testing.T) {
	s := pgstore.New(newPool(t, sharedPostgres(t).URL()), &pgstore.Options{Table: tableName(t)})
	t.Cleanup(func() { s.Close() })
	ctx := bg(t)
	r := driver.Request{Name: "job", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
	if _, err := s.Acquire(ctx, r); !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("Acquire before Migrate = %v, want ErrSchema naming Migrate", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if g, err := s.Acquire(ctx, r); err != nil || !g.Acquired {
		t.Fatalf("Acquire after Migrate = %+v, %v", g, err)
	}
}

// TestMigrateConcurrentAndRepeated: many stores migrating the same tables
// at once all succeed, and a second Migrate changes nothing.
func TestMigrateConcurrentAndRepeated(t *testing.T) {
	pool := newPool(t, sharedPostgres(t).URL())
	opts := &pgstore.Options{Schema: "leash_migrate", Table: tableName(t)}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- pgstore.New(pool, opts).Migrate(context.Background()) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	s := pgstore.New(pool, opts)
	if err := s.Migrate(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(bg(t)); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaVersionChecked: tables of a schema version this package does
// not know are refused.
func TestSchemaVersionChecked(t *testing.T) {
	s := newStore(t, nil)
	ctx := bg(t)
	if _, err := s.Pool().Exec(ctx, "UPDATE "+pgx.Identifier{"public", tableName(t) + "_version"}.Sanitize()+" SET version = 3"); err != nil {
		t.Fatal(err)
	}
	s2 := pgstore.New(s.Pool(), &pgstore.Options{Table: tableName(t)})
	if err := s2.Check(ctx); !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), "version 3") {
		t.Errorf("Check of version 3 tables = %v, want ErrSchema naming version 3", err)
	}
	if err := s2.Migrate(ctx); !errors.Is(err, pgstore.ErrSchema) {
		t.Errorf("Migrate of version 3 tables = %v, want ErrSchema", err)
	}
}

// TestDDLForDBAs: the DDL a DBA runs by hand makes tables the Store
// accepts, under names of their choosing.
func TestDDLForDBAs(t *testing.T) {
	pool := newPool(t, sharedPostgres(t).URL())
	ddl := mustDDL(t, "ops", "Locks_"+tableName(t))
	if !strings.Contains(ddl, `"ops"."Locks_`+tableName(t)+`_holds"`) || strings.Contains(ddl, "public.leash_locks") {
		t.Fatalf("DDL keeps default names or lacks the chosen ones:\n%s", ddl)
	}
	if _, err := pool.Exec(bg(t), ddl, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	s := pgstore.New(pool, &pgstore.Options{Schema: "ops", Table: "Locks_" + tableName(t)})
	if err := s.Check(bg(t)); err != nil {
		t.Fatal(err)
	}
	if g, err := s.Acquire(bg(t), driver.Request{Name: "a", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	if mustDDL(t, pgstore.DefaultSchema, pgstore.DefaultTable) == "" {
		t.Fatal("empty default DDL")
	}
}

// TestNewRejectsNilPoolAndBadOptions: leash.New refuses the store before
// any round trip.
func TestNewRejectsNilPoolAndBadOptions(t *testing.T) {
	pool := newPool(t, "postgres://postgres@127.0.0.1:1/postgres")
	for name, s := range map[string]*pgstore.Store{
		"nil pool":        pgstore.New(nil, nil),
		"batch too large": pgstore.New(pool, &pgstore.Options{BatchSize: pgstore.MaxBatchSize + 1}),
		"negative batch":  pgstore.New(pool, &pgstore.Options{BatchSize: -1}),
		"long table":      pgstore.New(pool, &pgstore.Options{Table: strings.Repeat("t", pgstore.MaxTableLen+1)}),
		"negative health": pgstore.New(pool, &pgstore.Options{HealthCheck: -time.Second}),
	} {
		t.Run(name, func(t *testing.T) {
			c, err := leash.New(s, nil)
			if err == nil {
				c.Close()
			}
			if !errors.Is(err, leash.ErrInvalidArgument) || !strings.Contains(err.Error(), "pgstore") {
				t.Errorf("leash.New = %v, want ErrInvalidArgument naming pgstore", err)
			}
		})
	}
}
