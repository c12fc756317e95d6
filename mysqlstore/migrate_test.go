package mysqlstore_test

import (
	"database/sql"
	_ "embed"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/mysqlstore"
)

// schemaV1 is schema.sql as schema version 1 had it, before the scheduled
// jobs' tables and procedures: what databases made by earlier releases
// hold.
//
//go:embed testdata/schema_v1.sql
var schemaV1 string

// createV1 applies the version-1 schema, for table app, to db, as an
// earlier release's Migrate did.
func createV1(t *testing.T, db *sql.DB) {
	t.Helper()
	text := strings.ReplaceAll(schemaV1, "`leash_locks", "`app")
	exec(t, db, mysqlstore.SplitStatements(text)...)
}

func schemaVersion(t *testing.T, db *sql.DB) int {
	t.Helper()
	var v int
	if err := db.QueryRowContext(bg(t), "SELECT `version` FROM `app_schema` WHERE `app` = 'leash'").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMigrateFromV1: a version-1 schema is refused by every call with
// ErrSchemaVersion naming Migrate; Migrate brings it to version 2, keeping
// the locks it holds and their fencing counters, and the scheduled jobs
// work on it.
func TestMigrateFromV1(t *testing.T) {
	db := freshDB(t)
	createV1(t, db)
	owner := "00000000-0000-4000-8000-000000000001:1"
	var granted, fence, remaining, refusal, held, kind int64
	// The lock is taken by the version-1 procedure itself.
	if err := db.QueryRowContext(bg(t), "CALL `app_acquire`(0, 'held', ?, '', 60000000, 0, 0)", owner).
		Scan(&granted, &fence, &remaining, &refusal, &held, &kind); err != nil || granted != 1 {
		t.Fatalf("acquire on the version-1 schema: granted %d, %v", granted, err)
	}
	s := mysqlstore.New(db, &mysqlstore.Options{Table: "app"})
	defer s.Close()
	for call, err := range everyCall(s) {
		if !errors.Is(err, mysqlstore.ErrSchemaVersion) || !strings.Contains(err.Error(), "version 1") || !strings.Contains(err.Error(), "Migrate") {
			t.Errorf("%s on a version-1 schema = %v, want ErrSchemaVersion naming version 1 and Migrate", call, err)
		}
	}
	if err := s.Migrate(bg(t)); err != nil {
		t.Fatal(err)
	}
	if v := schemaVersion(t, db); v != mysqlstore.SchemaVersion {
		t.Fatalf("version after Migrate = %d, want %d", v, mysqlstore.SchemaVersion)
	}
	ctx := bg(t)
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

// TestMigrateFromV1RefusesForeign: another application's table or
// procedure under a name version 2 adds makes Migrate refuse, saying what
// it found; it is left as it was, and the schema stays at version 1.
func TestMigrateFromV1RefusesForeign(t *testing.T) {
	for _, tc := range []struct {
		name, create, dump string
		want               error
	}{
		{"table", "CREATE TABLE `app_jobs` (id INT PRIMARY KEY, what VARCHAR(20)) ENGINE=InnoDB", "app_jobs", mysqlstore.ErrNotLeashTable},
		{"procedure", "CREATE PROCEDURE `app_claim_tick`() COMMENT 'the application''s own' SELECT 42", "app_claim_tick", mysqlstore.ErrNotLeashProcedure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := freshDB(t)
			createV1(t, db)
			exec(t, db, tc.create)
			dump := func() string { return routineDump(t, db, tc.dump) }
			if tc.want == mysqlstore.ErrNotLeashTable {
				exec(t, db, "INSERT INTO `app_jobs` VALUES (1, 'payroll')")
				dump = func() string { return tableDump(t, db, tc.dump) }
			}
			before := dump()
			s := mysqlstore.New(db, &mysqlstore.Options{Table: "app"})
			defer s.Close()
			if err := s.Migrate(bg(t)); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.dump) {
				t.Errorf("Migrate beside the application's %s = %v, want %v naming %s", tc.dump, err, tc.want, tc.dump)
			}
			if after := dump(); after != before {
				t.Errorf("the application's %s changed: %q, was %q", tc.dump, after, before)
			}
			if v := schemaVersion(t, db); v != 1 {
				t.Errorf("version after the refused Migrate = %d, want 1", v)
			}
			var n int
			if err := db.QueryRowContext(bg(t), "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME IN ('app_end_run', 'app_job_history')").Scan(&n); err != nil || n != 0 {
				t.Errorf("Migrate created %d of version 2's procedures (%v), want none", n, err)
			}
		})
	}
}
