package pgstore_test

import (
	_ "embed"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/pgstore"
)

// schemaV1 is schema.sql as schema version 1 had it, before the scheduled
// jobs' tables: the DDL that databases made by earlier releases ran.
//
//go:embed testdata/schema_v1.sql
var schemaV1 string

// createV1 creates version-1 tables named after the test's table, as an
// earlier release's Migrate did, and returns a Store on them (not migrated).
func createV1(t *testing.T) *pgstore.Store {
	t.Helper()
	pool := newPool(t, sharedPostgres(t).URL())
	ddl := strings.ReplaceAll(schemaV1, "public.leash_locks", "public."+tableName(t))
	if _, err := pool.Exec(bg(t), ddl, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	s := pgstore.New(pool, &pgstore.Options{Table: tableName(t)})
	t.Cleanup(func() { s.Close() })
	return s
}

// TestMigrateFromV1: tables an earlier release made (schema version 1) are
// refused by Check, which names Migrate; Migrate brings them to version 2,
// keeping the locks they hold and their fencing counters, and the store's
// scheduled jobs work on them.
func TestMigrateFromV1(t *testing.T) {
	s := createV1(t)
	ctx := bg(t)
	owner := "00000000-0000-4000-8000-000000000001:1"
	var fence int64
	// The lock is taken by the version-1 function itself, before any check.
	if err := s.Pool().QueryRow(ctx, "SELECT fence FROM "+pgx.Identifier{"public", tableName(t) + "_acquire"}.Sanitize()+
		"(1::smallint, 'held', $1, '', 60000000, 0, 0)", owner).Scan(&fence); err != nil || fence == 0 {
		t.Fatalf("acquire on version-1 tables: fence %d, %v", fence, err)
	}
	if err := s.Check(ctx); !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), "version 1") || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("Check of version-1 tables = %v, want ErrSchema naming version 1 and Migrate", err)
	}
	if _, err := s.ClaimTick(ctx, driver.TickClaim{Job: "job", Tick: time.Now(), Attempt: 1}); !errors.Is(err, pgstore.ErrSchema) {
		t.Fatalf("ClaimTick on version-1 tables = %v, want ErrSchema", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("a second Migrate: %v", err)
	}
	var version int
	if err := s.Pool().QueryRow(ctx, "SELECT version FROM "+pgx.Identifier{"public", tableName(t) + "_version"}.Sanitize()).Scan(&version); err != nil || version != 2 {
		t.Fatalf("version after Migrate = %d, %v; want 2", version, err)
	}
	info, err := s.Inspect(ctx, "held")
	if err != nil || !info.Held || len(info.Owners) != 1 || info.Owners[0].Owner != owner {
		t.Fatalf("Inspect(held) after Migrate = %+v, %v; want held by %s", info, err, owner)
	}
	if err := s.Release(ctx, driver.Request{Name: "held", Owner: owner}); err != nil {
		t.Fatal(err)
	}
	g, err := s.Acquire(ctx, driver.Request{Name: "held", Owner: owner, Lease: time.Minute})
	if err != nil || !g.Acquired || g.Fence <= fence {
		t.Fatalf("Acquire after Migrate = %+v, %v; want a token above %d", g, err, fence)
	}
	tick := time.UnixMilli(time.Now().Add(-time.Second).UnixMilli())
	r, err := s.ClaimTick(ctx, driver.TickClaim{Job: "held", Tick: tick, Attempt: 1, Run: driver.RunRecord{Client: driver.OwnerClient(owner)}})
	if err != nil || r.Status != driver.ClaimGranted {
		t.Fatalf("ClaimTick after Migrate = %+v, %v", r, err)
	}
	st, err := s.History(ctx, "held", 0)
	if err != nil || len(st.Runs) != 1 || st.Runs[0].Outcome != driver.OutcomeRunning {
		t.Fatalf("History after Migrate = %+v, %v; want one run, running (its claimer holds the lock)", st, err)
	}
}

// TestMigrateFromV1RefusesForeignJobTable: a table of the application's
// own under the name version 2 gives the jobs' table makes Migrate refuse,
// saying what it found, and leaves the tables at version 1 and the
// application's table as they were.
func TestMigrateFromV1RefusesForeignJobTable(t *testing.T) {
	s := createV1(t)
	ctx := bg(t)
	foreign := pgx.Identifier{"public", tableName(t) + "_jobs"}.Sanitize()
	if _, err := s.Pool().Exec(ctx, "CREATE TABLE "+foreign+" (id integer PRIMARY KEY, what text)"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "INSERT INTO "+foreign+" VALUES (1, 'payroll')"); err != nil {
		t.Fatal(err)
	}
	err := s.Migrate(ctx)
	if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), tableName(t)+`_jobs" exists but is not leash's`) {
		t.Fatalf("Migrate beside a foreign %s = %v, want ErrSchema saying it is not leash's", foreign, err)
	}
	var version int
	var rows string
	if err := s.Pool().QueryRow(ctx, "SELECT (SELECT version FROM "+pgx.Identifier{"public", tableName(t) + "_version"}.Sanitize()+
		"), (SELECT string_agg(x::text, ';') FROM "+foreign+" x)").Scan(&version, &rows); err != nil {
		t.Fatal(err)
	}
	if version != 1 || rows != "(1,payroll)" {
		t.Errorf("after the refused Migrate: version %d, the application's table %q; want 1 and (1,payroll)", version, rows)
	}
}
