package mysqlstore_test

import (
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/mysqlstore"
)

// TestServerRestart: a lock outlives a crash of the server (SIGKILL, then a
// restart on the same port and directory): another owner is refused, and
// the holder renews and releases it through the same *sql.DB.
func TestServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	srv := testserver.NewMariaDB(t)
	if err := createDatabase(srv, "restart"); err != nil {
		t.Fatal(err)
	}
	s := mysqlstore.New(openDB(t, srv, "restart", ""), nil)
	defer s.Close()
	if err := s.Migrate(bg(t)); err != nil {
		t.Fatal(err)
	}
	r := driver.Request{Name: "restart/" + t.Name(), Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
	g, err := s.Acquire(bg(t), r)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	other := r
	other.Owner = "00000000-0000-4000-8000-000000000002:1"
	// The pool's connections died with the server: the first call on each
	// may fail; database/sql dials anew for the next.
	var refused driver.Grant
	for range 3 {
		if refused, err = s.Acquire(bg(t), other); err == nil {
			break
		}
	}
	if err != nil || refused.Acquired || refused.Remaining <= 0 {
		t.Errorf("another owner's Acquire after the restart = %+v, %v; want refused", refused, err)
	}
	if res := s.Renew(bg(t), []driver.Request{r}); res[0].Err != nil || res[0].Status != driver.Renewed {
		t.Errorf("the holder's Renew after the restart = %+v; want renewed", res[0])
	}
	if err := s.Release(bg(t), r); err != nil {
		t.Errorf("the holder's Release after the restart: %v", err)
	}
	if g2, err := s.Acquire(bg(t), other); err != nil || !g2.Acquired || g2.Fence <= g.Fence {
		t.Errorf("Acquire after the release = %+v, %v; want granted with a token above %d", g2, err, g.Fence)
	}
}

// TestFenceSurvivesALostRow: when the name's row, and with it the fencing
// counter, is lost (deleted here, as a failover to a lagging replica would
// lose it), the next token is still above every earlier one: it is the
// server time in µs.
func TestFenceSurvivesALostRow(t *testing.T) {
	db := freshDB(t)
	s := mysqlstore.New(db, nil)
	defer s.Close()
	if err := s.Migrate(bg(t)); err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range 3 {
		r := driver.Request{Name: "fence", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
		g, err := s.Acquire(bg(t), r)
		if err != nil || !g.Acquired || g.Fence <= last {
			t.Fatalf("grant %d = %+v, %v; want a token above %d", i, g, err, last)
		}
		last = g.Fence
		if err := s.Release(bg(t), r); err != nil {
			t.Fatal(err)
		}
		exec(t, db, "DELETE FROM leash_locks WHERE name = 'fence'")
	}
}
