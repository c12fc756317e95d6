package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/leash-go/leash/driver"
)

// TestForeignRowLock: a transaction of someone else's that locks a name's
// row, and then stalls (a client stopped mid-transaction), makes the
// store's calls on that name fail after lock_timeout instead of hanging,
// leaves every other name free to use, and once it ends the name works
// again.
func TestForeignRowLock(t *testing.T) {
	s := newStore(t, nil)
	ctx := bg(t)
	a := driver.Request{Name: "stalled", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
	if g, err := s.Acquire(ctx, a); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{"public", tableName(t)}.Sanitize()+" WHERE name = 'stalled' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	other := driver.Request{Name: "other", Owner: a.Owner, Lease: time.Minute}
	if g, err := s.Acquire(ctx, other); err != nil || !g.Acquired {
		t.Fatalf("Acquire of another name while a row is locked = %+v, %v", g, err)
	}
	res := s.Renew(ctx, []driver.Request{a, other})
	var pe *pgconn.PgError
	if !errors.As(res[0].Err, &pe) || pe.Code != "55P03" {
		t.Errorf("Renew of a name whose row someone else locks = %+v, want lock_timeout (55P03)", res[0])
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for i, r := range s.Renew(ctx, []driver.Request{a, other}) {
		if r.Err != nil || r.Status != driver.Renewed {
			t.Errorf("Renew %d after the transaction ended = %+v, want renewed", i, r)
		}
	}
}
