package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/mysqlstore"
)

// tableDump is a table's definition and rows, to compare before and after.
func tableDump(t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	var name, create string
	if err := db.QueryRowContext(bg(t), "SHOW CREATE TABLE `"+table+"`").Scan(&name, &create); err != nil {
		t.Fatalf("SHOW CREATE TABLE %s: %v", table, err)
	}
	rows, err := db.QueryContext(bg(t), "SELECT * FROM `"+table+"` ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	b.WriteString(create)
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			fmt.Fprintf(&b, "|%q", v)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// freshDB creates a database of the test's own on the shared server and
// returns a *sql.DB on it.
func freshDB(t *testing.T) *sql.DB {
	t.Helper()
	srv := sharedServer(t)
	name := strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name()))
	if len(name) > 60 {
		name = name[:60]
	}
	exec(t, openDB(t, srv, "", ""), "DROP DATABASE IF EXISTS `"+name+"`", "CREATE DATABASE `"+name+"`")
	return openDB(t, srv, name, "")
}

func exec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.ExecContext(bg(t), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// everyCall runs every method of the Store that touches the server and
// returns their errors, by method.
func everyCall(s *mysqlstore.Store) map[string]error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := driver.Request{Name: "orders", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
	errs := map[string]error{}
	_, errs["Acquire"] = s.Acquire(ctx, r)
	_, errs["AcquireMany"] = s.AcquireMany(ctx, []driver.Request{r})
	errs["Renew"] = s.Renew(ctx, []driver.Request{r})[0].Err
	errs["Release"] = s.Release(ctx, r)
	_, errs["Inspect"] = s.Inspect(ctx, r.Name)
	_, errs["List"] = s.List(ctx, "")
	_, errs["ForceRelease"] = s.ForceRelease(ctx, r.Name)
	errs["PutClient"] = s.PutClient(ctx, driver.ClientRecord{ID: "x"}, time.Minute)
	_, _, errs["GetClient"] = s.GetClient(ctx, "x")
	errs["DeleteClient"] = s.DeleteClient(ctx, "x")
	tick := time.UnixMilli(time.Now().UnixMilli())
	_, errs["ClaimTick"] = s.ClaimTick(ctx, driver.TickClaim{Job: r.Name, Tick: tick, Attempt: 1})
	errs["EndRun"] = s.EndRun(ctx, driver.RunEnd{Job: r.Name, Tick: tick, Attempt: 1, Outcome: driver.OutcomeOK})
	errs["AddRuns"] = s.AddRuns(ctx, r.Name, []driver.RunRecord{{Tick: tick, Outcome: driver.OutcomeMissed}}, 0)
	_, errs["Jobs"] = s.Jobs(ctx, "")
	_, errs["History"] = s.History(ctx, r.Name, 0)
	return errs
}

// TestNotLeashTable: a table of the lock table's name (or of a companion's)
// that is another application's is refused by Migrate and by every call,
// with ErrNotLeashTable, and left exactly as it was; nothing is created
// beside it.
func TestNotLeashTable(t *testing.T) {
	for _, tc := range []struct{ name, table, ddl, row string }{
		{"another application's table", "orders",
			"CREATE TABLE orders (id INT PRIMARY KEY, name VARCHAR(20), owner VARCHAR(20)) ENGINE=InnoDB",
			"1, 'orders', 'someone'"},
		{"same columns, no schema mark", "orders",
			"CREATE TABLE orders (name VARBINARY(512) PRIMARY KEY, kind TINYINT UNSIGNED NOT NULL DEFAULT 0, owner VARBINARY(255), `write` TINYINT UNSIGNED NOT NULL DEFAULT 0, expires_us BIGINT NOT NULL DEFAULT 0, owner_fence BIGINT NOT NULL DEFAULT 0, fence BIGINT NOT NULL DEFAULT 0, permits INT NOT NULL DEFAULT 0) ENGINE=InnoDB",
			"'orders', 0, 'someone', 0, 99999999999999999, 7, 7, 0"},
		{"a companion of another application", "orders_clients",
			"CREATE TABLE orders_clients (id INT PRIMARY KEY, note TEXT) ENGINE=InnoDB",
			"1, 'a note'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := freshDB(t)
			exec(t, db, tc.ddl, fmt.Sprintf("INSERT INTO %s VALUES (%s)", tc.table, tc.row))
			before := tableDump(t, db, tc.table)
			s := mysqlstore.New(db, &mysqlstore.Options{Table: "orders"})
			defer s.Close()
			if err := s.Migrate(bg(t)); !errors.Is(err, mysqlstore.ErrNotLeashTable) {
				t.Errorf("Migrate = %v, want ErrNotLeashTable", err)
			}
			for call, err := range everyCall(s) {
				if !errors.Is(err, mysqlstore.ErrNotLeashTable) {
					t.Errorf("%s = %v, want ErrNotLeashTable", call, err)
				}
			}
			if after := tableDump(t, db, tc.table); after != before {
				t.Errorf("the table changed:\n%s\nwant\n%s", after, before)
			}
			var n int
			if err := db.QueryRowContext(bg(t), "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()").Scan(&n); err != nil || n != 1 {
				t.Errorf("the database holds %d tables (%v), want only the application's", n, err)
			}
			if err := db.QueryRowContext(bg(t), "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()").Scan(&n); err != nil || n != 0 {
				t.Errorf("the database holds %d procedures (%v), want none", n, err)
			}
		})
	}
}

// TestSchemaChecks: a missing schema, another version, and a table that is
// not InnoDB are each refused with their own error by every call.
func TestSchemaChecks(t *testing.T) {
	db := freshDB(t)
	s := mysqlstore.New(db, nil)
	defer s.Close()
	for call, err := range everyCall(s) {
		if !errors.Is(err, mysqlstore.ErrNoSchema) {
			t.Errorf("%s before Migrate = %v, want ErrNoSchema", call, err)
		}
	}
	// Concurrent Migrates take turns; a second one changes nothing.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			m := mysqlstore.New(db, nil)
			defer m.Close()
			if err := m.Migrate(bg(t)); err != nil {
				t.Errorf("concurrent Migrate: %v", err)
			}
		})
	}
	wg.Wait()
	for call, err := range everyCall(s) {
		if err != nil && !errors.Is(err, driver.ErrNotHeld) {
			t.Errorf("%s after Migrate = %v", call, err)
		}
	}

	newer := mysqlstore.New(db, nil)
	defer newer.Close()
	exec(t, db, "UPDATE leash_locks_schema SET version = 99")
	if err := newer.Migrate(bg(t)); !errors.Is(err, mysqlstore.ErrSchemaVersion) {
		t.Errorf("Migrate of a newer schema = %v, want ErrSchemaVersion", err)
	}
	if _, err := newer.Acquire(bg(t), driver.Request{Name: "x", Owner: "o:1", Lease: time.Second}); !errors.Is(err, mysqlstore.ErrSchemaVersion) {
		t.Errorf("Acquire on a newer schema = %v, want ErrSchemaVersion", err)
	}
	exec(t, db, "UPDATE leash_locks_schema SET version = 1", "ALTER TABLE leash_locks ENGINE=MyISAM")
	myisam := mysqlstore.New(db, nil)
	defer myisam.Close()
	if _, err := myisam.Acquire(bg(t), driver.Request{Name: "x", Owner: "o:1", Lease: time.Second}); !errors.Is(err, mysqlstore.ErrNotInnoDB) {
		t.Errorf("Acquire on a MyISAM table = %v, want ErrNotInnoDB", err)
	}
	if err := myisam.Migrate(bg(t)); !errors.Is(err, mysqlstore.ErrNotInnoDB) {
		t.Errorf("Migrate of a MyISAM table = %v, want ErrNotInnoDB", err)
	}
}

// TestNotALockRow: a row of the lock table whose kind this version does not
// know (one a later schema may add) is refused by every lock method with a
// NotALockError, left out of List, and never changed.
func TestNotALockRow(t *testing.T) {
	db := freshDB(t)
	s := mysqlstore.New(db, nil)
	defer s.Close()
	if err := s.Migrate(bg(t)); err != nil {
		t.Fatal(err)
	}
	exec(t, db, "INSERT INTO leash_locks (name, kind, owner, expires_us, fence) VALUES ('orders', 9, 'someone', 99999999999999999, 5)")
	before := tableDump(t, db, "leash_locks")
	errs := everyCall(s)
	for _, call := range []string{"Acquire", "AcquireMany", "Release", "Inspect", "ForceRelease"} {
		var nal *driver.NotALockError
		if !errors.As(errs[call], &nal) || !strings.Contains(nal.Error(), "kind 9") {
			t.Errorf("%s = %v, want a NotALockError saying what is there", call, errs[call])
		}
	}
	r := driver.Request{Name: "orders", Owner: "someone", Lease: time.Minute}
	if res := s.Renew(bg(t), []driver.Request{r}); res[0].Err != nil || res[0].Status != driver.RenewGone {
		t.Errorf("Renew = %+v, want RenewGone", res[0])
	}
	if names, err := s.List(bg(t), "*"); err != nil || len(names) != 0 {
		t.Errorf("List = %q, %v; want nothing", names, err)
	}
	if after := tableDump(t, db, "leash_locks"); after != before {
		t.Errorf("the row changed:\n%s\nwant\n%s", after, before)
	}
}

// TestTimeZones: a lease does not depend on the session time zone nor on
// the driver's loc: a lock taken through +11:30 is seen from -07:00 (and
// from UTC) with the remaining lease it was given.
func TestTimeZones(t *testing.T) {
	east := newStore(t, "time_zone=%27%2B11%3A30%27&parseTime=true&loc=Asia%2FKolkata", nil)
	west := newStore(t, "time_zone=%27-07%3A00%27", nil)
	utc := newStore(t, "time_zone=%27%2B00%3A00%27&parseTime=true&loc=UTC", nil)
	name := "tz/" + t.Name()
	r := driver.Request{Name: name, Owner: "00000000-0000-4000-8000-000000000001:1", Lease: 10 * time.Second}
	if g, err := east.Acquire(bg(t), r); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	for i, s := range []*mysqlstore.Store{west, utc, east} {
		g, err := s.Acquire(bg(t), driver.Request{Name: name, Owner: "00000000-0000-4000-8000-000000000002:1", Lease: time.Second})
		if err != nil || g.Acquired || g.Remaining <= 5*time.Second || g.Remaining > 10*time.Second {
			t.Errorf("store %d: Acquire of the held lock = %+v, %v; want refused with about 10s left", i, g, err)
		}
		info, err := s.Inspect(bg(t), name)
		if err != nil || info.Remaining <= 5*time.Second || info.Remaining > 10*time.Second {
			t.Errorf("store %d: Inspect = %+v, %v; want about 10s left", i, info, err)
		}
	}
	r.Lease = 2 * time.Second
	if res := west.Renew(bg(t), []driver.Request{r}); res[0].Err != nil || res[0].Status != driver.Renewed {
		t.Fatalf("Renew = %+v", res[0])
	}
	if info, err := utc.Inspect(bg(t), name); err != nil || info.Remaining > 2*time.Second || info.Remaining <= 0 {
		t.Errorf("Inspect after a renewal to 2s = %+v, %v; want at most 2s left", info, err)
	}
}

// TestNoAutocommit: a DSN that turns autocommit off is refused before any
// lock is touched: the Store's single statements would stay open.
func TestNoAutocommit(t *testing.T) {
	newStore(t, "", nil) // the schema exists
	s := mysqlstore.New(openDB(t, sharedServer(t), testDB, "autocommit=0"), nil)
	defer s.Close()
	if _, err := s.Acquire(bg(t), driver.Request{Name: "x", Owner: "o:1", Lease: time.Second}); !errors.Is(err, mysqlstore.ErrNoAutocommit) {
		t.Errorf("Acquire with autocommit=0 = %v, want ErrNoAutocommit", err)
	}
	if err := s.Migrate(bg(t)); !errors.Is(err, mysqlstore.ErrNoAutocommit) {
		t.Errorf("Migrate with autocommit=0 = %v, want ErrNoAutocommit", err)
	}
}

// routineDump is a stored procedure's definition and comment, to compare
// before and after.
func routineDump(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	var def, comment string
	err := db.QueryRowContext(bg(t), "SELECT ROUTINE_DEFINITION, ROUTINE_COMMENT FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = ?", name).
		Scan(&def, &comment)
	if err != nil {
		t.Fatalf("procedure %s: %v", name, err)
	}
	return def + "|" + comment
}

// TestNotLeashProcedure: a stored procedure of one of the names leash's
// procedures take that is another application's is refused by Migrate and
// by every call, with ErrNotLeashProcedure naming it, and left exactly as
// it was; Migrate creates nothing.
func TestNotLeashProcedure(t *testing.T) {
	t.Run("before Migrate", func(t *testing.T) {
		db := freshDB(t)
		exec(t, db, "CREATE PROCEDURE `app_release`() COMMENT 'the application''s own' SELECT 42")
		before := routineDump(t, db, "app_release")
		s := mysqlstore.New(db, &mysqlstore.Options{Table: "app"})
		defer s.Close()
		if err := s.Migrate(bg(t)); !errors.Is(err, mysqlstore.ErrNotLeashProcedure) || !strings.Contains(err.Error(), "app_release") {
			t.Errorf("Migrate = %v, want ErrNotLeashProcedure naming app_release", err)
		}
		for call, err := range everyCall(s) {
			if !errors.Is(err, mysqlstore.ErrNotLeashProcedure) {
				t.Errorf("%s = %v, want ErrNotLeashProcedure", call, err)
			}
		}
		if after := routineDump(t, db, "app_release"); after != before {
			t.Errorf("the procedure changed: %q, want %q", after, before)
		}
		var n int
		if err := db.QueryRowContext(bg(t), "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()").Scan(&n); err != nil || n != 1 {
			t.Errorf("the database holds %d procedures (%v), want only the application's", n, err)
		}
		if err := db.QueryRowContext(bg(t), "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()").Scan(&n); err != nil || n != 0 {
			t.Errorf("the database holds %d tables (%v), want none", n, err)
		}
	})
	t.Run("after Migrate", func(t *testing.T) {
		db := freshDB(t)
		m := mysqlstore.New(db, &mysqlstore.Options{Table: "app"})
		defer m.Close()
		if err := m.Migrate(bg(t)); err != nil {
			t.Fatal(err)
		}
		// Another application replaces one of leash's procedures with its own.
		exec(t, db, "DROP PROCEDURE `app_withdraw`", "CREATE PROCEDURE `app_withdraw`() COMMENT 'mine' SELECT 1")
		before := routineDump(t, db, "app_withdraw")
		s := mysqlstore.New(db, &mysqlstore.Options{Table: "app"})
		defer s.Close()
		for call, err := range everyCall(s) {
			if !errors.Is(err, mysqlstore.ErrNotLeashProcedure) || !strings.Contains(err.Error(), "app_withdraw") {
				t.Errorf("%s = %v, want ErrNotLeashProcedure naming app_withdraw", call, err)
			}
		}
		if err := s.Migrate(bg(t)); !errors.Is(err, mysqlstore.ErrNotLeashProcedure) {
			t.Errorf("Migrate = %v, want ErrNotLeashProcedure", err)
		}
		if after := routineDump(t, db, "app_withdraw"); after != before {
			t.Errorf("the procedure changed: %q, want %q", after, before)
		}
	})
}

// TestMigrateRace: a procedure of one of leash's names that another
// application creates after Migrate read the schema's state and before it
// applied the DDL is not dropped: Migrate fails and leaves it as it was.
func TestMigrateRace(t *testing.T) {
	db := freshDB(t)
	s := mysqlstore.New(db, &mysqlstore.Options{Table: "app"})
	defer s.Close()
	s.OnMigrateRead(func() {
		exec(t, db, "CREATE PROCEDURE `app_release`() COMMENT 'the application''s own' SELECT 42")
	})
	err := s.Migrate(bg(t))
	if err == nil {
		t.Fatal("Migrate succeeded over another application's procedure")
	}
	if dump := routineDump(t, db, "app_release"); !strings.Contains(dump, "the application's own") {
		t.Errorf("the application's procedure was replaced: %q", dump)
	}
	// Once the application's procedure is seen, Migrate refuses it by name.
	s2 := mysqlstore.New(db, &mysqlstore.Options{Table: "app"})
	defer s2.Close()
	if err := s2.Migrate(bg(t)); !errors.Is(err, mysqlstore.ErrNotLeashProcedure) || !strings.Contains(err.Error(), "app_release") {
		t.Errorf("second Migrate = %v, want ErrNotLeashProcedure naming app_release", err)
	}
}

// TestBadTableNames: names Migrate could not apply (a line break splits
// its statements) or the server could not find again (upper case, under
// lower_case_table_names=1) are refused before any network call, with
// ErrBadIdent; odd names it can apply work.
func TestBadTableNames(t *testing.T) {
	for _, table := range []string{"a;\nb", "p//\nq", "c\rr", "Orders", "ÉTÉ", strings.Repeat("x", 51), "sp "} {
		s := mysqlstore.New(&sql.DB{}, &mysqlstore.Options{Table: table})
		for _, err := range []error{s.Validate(), s.Migrate(bg(t))} {
			if !errors.Is(err, mysqlstore.ErrBadIdent) {
				t.Errorf("table %q: %v, want ErrBadIdent", table, err)
			}
		}
		s.Close()
	}
	if err := mysqlstore.New(&sql.DB{}, &mysqlstore.Options{Table: "x", Database: "a\nb"}).Validate(); !errors.Is(err, mysqlstore.ErrBadIdent) {
		t.Errorf("database with a line break: %v, want ErrBadIdent", err)
	}
	for i, table := range []string{"x`y", "dot.ted", "été", strings.Repeat("x", 50), "semi;colon//"} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			db := freshDB(t)
			s := mysqlstore.New(db, &mysqlstore.Options{Table: table})
			defer s.Close()
			if err := s.Migrate(bg(t)); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			g, err := s.Acquire(bg(t), driver.Request{Name: "n", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute})
			if err != nil || !g.Acquired {
				t.Errorf("Acquire = %+v, %v", g, err)
			}
		})
	}
}
