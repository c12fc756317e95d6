package pgstore_test

import (
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/pgstore"
)

// retry runs op until it returns no error, for up to 30s: the first
// statements after a server restart may find the pool's connections dead.
func retry(t *testing.T, what string, op func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := op()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServerRestart crashes a durable server (SIGKILL) while a lock is held
// and a waiter watches: after the restart the lock is still held by its
// owner (the grant was committed), its renewal works, the watcher is woken
// (a release may have been missed), and the next grant's token is greater.
func TestServerRestart(t *testing.T) {
	srv := testserver.NewPostgres(t, testserver.PostgresOptions{Durable: true})
	s := pgstore.New(newPool(t, srv.URL()), &pgstore.Options{HealthCheck: 100 * time.Millisecond})
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(bg(t)); err != nil {
		t.Fatal(err)
	}
	a := driver.Request{Name: "job", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: 10 * time.Minute}
	b := driver.Request{Name: "job", Owner: "00000000-0000-4000-8000-000000000002:1", Lease: 10 * time.Minute}
	ga, err := s.Acquire(bg(t), a)
	if err != nil || !ga.Acquired {
		t.Fatalf("Acquire = %+v, %v", ga, err)
	}
	w := make(wakes, 16)
	stop, err := s.Watch(bg(t), driver.KindMutex, "job", w.wake)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	w.want(t, "server restarted", driver.Wake{To: driver.WakeAll}, nil)
	var gb driver.Grant
	retry(t, "acquire by another owner", func() (err error) { gb, err = s.Acquire(bg(t), b); return err })
	if gb.Acquired || gb.Remaining <= 0 {
		t.Fatalf("Acquire by another owner after the restart = %+v, want refused with the holder's lease", gb)
	}
	if res := s.Renew(bg(t), []driver.Request{a}); res[0].Err != nil || res[0].Status != driver.Renewed {
		t.Fatalf("Renew after the restart = %+v, want renewed", res[0])
	}
	if err := s.Release(bg(t), a); err != nil {
		t.Fatal(err)
	}
	w.want(t, "release after the restart", driver.Wake{To: driver.WakeOne}, wakeAllOnly)
	if gb, err = s.Acquire(bg(t), b); err != nil || !gb.Acquired || gb.Fence <= ga.Fence {
		t.Fatalf("Acquire after the release = %+v, %v; want granted with a token above %d", gb, err, ga.Fence)
	}
}
