package pgstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/pgstore"
)

const rowsOwner = "00000000-0000-4000-8000-000000000001:"

// TestExpiredHoldsClearedOnNewRowPath: an acquire that finds no row, and
// then finds the row someone else inserted meanwhile, still deletes that
// name's expired holds before it decides, so an expired hold never blocks
// it (and Remaining, when a holder blocks, is that holder's live lease).
func TestExpiredHoldsClearedOnNewRowPath(t *testing.T) {
	s := newStore(t, nil)
	ctx := bg(t)
	tbl := pgx.Identifier{"public", tableName(t)}.Sanitize()
	holds := pgx.Identifier{"public", tableName(t) + "_holds"}.Sanitize()
	// Another transaction creates the name's row with an expired hold, and
	// commits only once the acquire waits for its row.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "INSERT INTO "+tbl+" (name) VALUES ('n')"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+holds+" (name, role, owner, expires, fence) VALUES ('n', 'x', $1, clock_timestamp() - interval '1 minute', 1)", rowsOwner+"old"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		g   driver.Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := s.Acquire(ctx, driver.Request{Name: "n", Owner: rowsOwner + "new", Lease: time.Minute})
		done <- result{g, err}
	}()
	waitForLockWait(t, s.Pool(), tableName(t)+"_acquire")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || !r.g.Acquired {
		t.Errorf("Acquire of a name whose only hold expired = %+v, %v; want granted", r.g, r.err)
	}
}

// TestAcquireManyRowVanished: when a name's row is deleted while
// AcquireMany waits to lock it (as a careless cleanup job would), the call
// fails and grants nothing, rather than granting a lock whose row, and so
// fencing counter, is gone.
func TestAcquireManyRowVanished(t *testing.T) {
	s := newStore(t, nil)
	ctx := bg(t)
	tbl := pgx.Identifier{"public", tableName(t)}.Sanitize()
	holds := pgx.Identifier{"public", tableName(t) + "_holds"}.Sanitize()
	if _, err := s.Pool().Exec(ctx, "INSERT INTO "+tbl+" (name) VALUES ('a'), ('b')"); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+tbl+" WHERE name = 'b' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		mg, err := s.AcquireMany(ctx, []driver.Request{
			{Name: "a", Owner: rowsOwner + "1", Lease: time.Minute},
			{Name: "b", Owner: rowsOwner + "1", Lease: time.Minute},
		})
		if err == nil && mg.Acquired {
			err = errors.New("granted")
		}
		done <- err
	}()
	waitForLockWait(t, s.Pool(), tableName(t)+"_acquire_many")
	if _, err := tx.Exec(ctx, "DELETE FROM "+tbl+" WHERE name = 'b'"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var pe *pgconn.PgError
	if err := <-done; !errors.As(err, &pe) || pe.Code != "LK002" {
		t.Errorf("AcquireMany whose row vanished = %v; want the functions' error LK002 (a row vanished)", err)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM "+holds).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d holds after the failed AcquireMany (%v), want none", n, err)
	}
}

// TestAcquireManyLeavesNoRows: an AcquireMany that is refused, or blocked,
// leaves no row behind for the names it did not know before.
func TestAcquireManyLeavesNoRows(t *testing.T) {
	s := newStore(t, nil)
	ctx := bg(t)
	tbl := pgx.Identifier{"public", tableName(t)}.Sanitize()
	if g, err := s.Acquire(ctx, driver.Request{Kind: driver.KindPermit, Name: "sem", Owner: rowsOwner + "1", Lease: time.Minute, Permits: 1}); err != nil || !g.Acquired {
		t.Fatalf("Acquire permit = %+v, %v", g, err)
	}
	if g, err := s.Acquire(ctx, driver.Request{Name: "held", Owner: rowsOwner + "1", Lease: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	for _, other := range []string{"sem", "held"} {
		mg, err := s.AcquireMany(ctx, []driver.Request{
			{Name: "new1", Owner: rowsOwner + "2", Lease: time.Minute},
			{Name: other, Owner: rowsOwner + "2", Lease: time.Minute},
			{Name: "new2", Owner: rowsOwner + "2", Lease: time.Minute},
		})
		if mg.Acquired {
			t.Fatalf("AcquireMany with %s = %+v, %v; want refused or blocked", other, mg, err)
		}
		var names []string
		rows, err := s.Pool().Query(ctx, "SELECT name FROM "+tbl+" ORDER BY name")
		if err != nil {
			t.Fatal(err)
		}
		names, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(names, ",") != "held,sem" {
			t.Errorf("rows after an AcquireMany with %s that granted nothing: %v; want only held, sem", other, names)
		}
	}
}

// TestIsolationRefused: a pool whose sessions default to REPEATABLE READ
// gets ErrIsolation from every call, and nothing changes.
func TestIsolationRefused(t *testing.T) {
	s := newStore(t, nil)
	ctx := bg(t)
	rr := pgstore.New(newPool(t, sharedPostgres(t).URL()+"&default_transaction_isolation=repeatable%20read"), &pgstore.Options{Table: tableName(t)})
	t.Cleanup(func() { rr.Close() })
	r := driver.Request{Name: "n", Owner: rowsOwner + "1", Lease: time.Minute}
	if g, err := rr.Acquire(ctx, r); !errors.Is(err, pgstore.ErrIsolation) {
		t.Errorf("Acquire under REPEATABLE READ = %+v, %v; want ErrIsolation", g, err)
	}
	if _, err := rr.AcquireMany(ctx, []driver.Request{r}); !errors.Is(err, pgstore.ErrIsolation) {
		t.Errorf("AcquireMany under REPEATABLE READ = %v; want ErrIsolation", err)
	}
	if res := rr.Renew(ctx, []driver.Request{r}); !errors.Is(res[0].Err, pgstore.ErrIsolation) {
		t.Errorf("Renew under REPEATABLE READ = %+v; want ErrIsolation", res[0])
	}
	if err := rr.Release(ctx, r); !errors.Is(err, pgstore.ErrIsolation) {
		t.Errorf("Release under REPEATABLE READ = %v; want ErrIsolation", err)
	}
	if err := rr.Withdraw(ctx, r); !errors.Is(err, pgstore.ErrIsolation) {
		t.Errorf("Withdraw under REPEATABLE READ = %v; want ErrIsolation", err)
	}
	if _, err := rr.ForceRelease(ctx, "n"); !errors.Is(err, pgstore.ErrIsolation) {
		t.Errorf("ForceRelease under REPEATABLE READ = %v; want ErrIsolation", err)
	}
	if err := rr.SetPermits(ctx, "s", 2); !errors.Is(err, pgstore.ErrIsolation) {
		t.Errorf("SetPermits under REPEATABLE READ = %v; want ErrIsolation", err)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{"public", tableName(t)}.Sanitize()).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows after the refused calls (%v), want none", n, err)
	}
	// The same store is fine under READ COMMITTED.
	if g, err := s.Acquire(ctx, r); err != nil || !g.Acquired {
		t.Errorf("Acquire under READ COMMITTED = %+v, %v", g, err)
	}
}
