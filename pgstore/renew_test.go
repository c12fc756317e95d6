package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leash-go/leash/driver"
)

// TestRenewCommitFails: a renewal whose statement fails after its rows were
// sent (here at commit, by a deferred trigger, as a crash or a full WAL disk
// would) reports the error for every lock of the batch, never Renewed: the
// server renewed nothing.
func TestRenewCommitFails(t *testing.T) {
	s := newStore(t, nil)
	ctx := bg(t)
	owner := "00000000-0000-4000-8000-000000000001:"
	reqs := []driver.Request{
		{Name: "a", Owner: owner + "1", Lease: time.Minute},
		{Name: "b", Owner: owner + "1", Lease: time.Minute},
	}
	for _, r := range reqs {
		if g, err := s.Acquire(ctx, r); err != nil || !g.Acquired {
			t.Fatalf("Acquire %s = %+v, %v", r.Name, g, err)
		}
	}
	holds := pgx.Identifier{"public", tableName(t) + "_holds"}.Sanitize()
	fn := pgx.Identifier{"public", tableName(t) + "_fail"}.Sanitize()
	for _, q := range []string{
		`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'commit fails'; END $$`,
		`CREATE CONSTRAINT TRIGGER fail AFTER UPDATE ON ` + holds + ` DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ` + fn + `()`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = s.Pool().Exec(context.Background(), `DROP TRIGGER fail ON `+holds) })
	for i := range reqs {
		reqs[i].Lease = time.Hour
	}
	res := s.Renew(ctx, reqs)
	for i, r := range res {
		if r.Err == nil || r.Status != 0 {
			t.Errorf("result %d of a renewal that failed at commit = %+v, want an error and no status", i, r)
		}
	}
	var longest time.Duration
	var us int64
	if err := s.Pool().QueryRow(ctx, "SELECT (extract(epoch FROM max(expires) - clock_timestamp()) * 1e6)::bigint FROM "+holds).Scan(&us); err != nil {
		t.Fatal(err)
	}
	if longest = time.Duration(us) * time.Microsecond; longest > time.Minute {
		t.Errorf("a lease was extended to %v by the failed renewal", longest)
	}
}
