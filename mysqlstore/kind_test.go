package mysqlstore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/mysqlstore"
)

// migrated returns a migrated Store on a database of the test's own.
func migrated(t *testing.T) *mysqlstore.Store {
	t.Helper()
	s := mysqlstore.New(freshDB(t), nil)
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(bg(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func ownerN(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d:1", n) }

// wantNotALock checks that err is a NotALockError on name saying found.
func wantNotALock(t *testing.T, what string, err error, name, found string) {
	t.Helper()
	var nal *driver.NotALockError
	if !errors.As(err, &nal) || nal.Name != name || !strings.Contains(nal.Found, found) {
		t.Errorf("%s = %v; want a NotALockError on %q saying %q", what, err, name, found)
	}
}

// TestKindSwitch: a name that nothing holds, queues for or waits for is
// free for either kind, and switches kind at the grant, keeping its fencing
// counter; while something of one kind is live, the other kind is refused
// with a NotALockError saying what is there; a release of the kind the
// name is not is ErrNotHeld, a NotALockError only while the other kind is
// live.
func TestKindSwitch(t *testing.T) {
	s := migrated(t)
	ctx := bg(t)
	const name = "orders"
	mutex := func(n int) driver.Request {
		return driver.Request{Kind: driver.KindMutex, Name: name, Owner: ownerN(n), Lease: time.Minute}
	}
	permit := func(n int) driver.Request {
		return driver.Request{Kind: driver.KindPermit, Name: name, Owner: ownerN(n), Lease: time.Minute, Permits: 2}
	}
	acquire := func(what string, r driver.Request) int64 {
		t.Helper()
		g, err := s.Acquire(ctx, r)
		if err != nil || !g.Acquired {
			t.Fatalf("%s = %+v, %v; want granted", what, g, err)
		}
		return g.Fence
	}
	release := func(what string, r driver.Request) {
		t.Helper()
		if err := s.Release(ctx, r); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	f1 := acquire("a permit of a new name", permit(1))
	_, err := s.Acquire(ctx, mutex(2))
	wantNotALock(t, "a mutex while a permit is held", err, name, "a semaphore")
	wantNotALock(t, "a mutex's release while a permit is held", s.Release(ctx, mutex(2)), name, "a semaphore")
	release("the permit", permit(1))
	if err := s.Release(ctx, mutex(2)); !errors.Is(err, driver.ErrNotHeld) || errors.As(err, new(*driver.NotALockError)) {
		t.Errorf("a mutex's release on a free semaphore's name = %v; want ErrNotHeld, not NotALockError", err)
	}
	f2 := acquire("a mutex of a free semaphore's name", mutex(2))
	if f2 <= f1 {
		t.Errorf("the mutex's token %d is not above the permit's %d", f2, f1)
	}
	_, err = s.Acquire(ctx, permit(3))
	wantNotALock(t, "a permit while a mutex is held", err, name, "not a semaphore")
	if err := s.SetPermits(ctx, name, 5); err == nil {
		t.Errorf("SetPermits while a mutex is held succeeded")
	}
	release("the mutex", mutex(2))
	if err := s.Release(ctx, permit(3)); !errors.Is(err, driver.ErrNotHeld) || errors.As(err, new(*driver.NotALockError)) {
		t.Errorf("a permit's release on a free lock's name = %v; want ErrNotHeld, not NotALockError", err)
	}
	f3 := acquire("a permit of a free lock's name", permit(3))
	if f3 <= f2 {
		t.Errorf("the permit's token %d is not above the mutex's %d", f3, f2)
	}

	// A force release frees a semaphore's name for a lock at once.
	if ok, err := s.ForceRelease(ctx, name); err != nil || !ok {
		t.Fatalf("ForceRelease = %v, %v", ok, err)
	}
	f4 := acquire("a mutex after a force release", mutex(4))
	if f4 <= f3 {
		t.Errorf("the mutex's token %d is not above the permit's %d", f4, f3)
	}

	// A place in a fair queue keeps the name a lock's, though no one holds it.
	g, err := s.Acquire(ctx, driver.Request{Kind: driver.KindFair, Name: name, Owner: ownerN(5), Lease: time.Minute, Wait: time.Hour})
	if err != nil || g.Acquired {
		t.Fatalf("a fair waiter = %+v, %v; want queued", g, err)
	}
	release("the mutex", mutex(4))
	_, err = s.Acquire(ctx, permit(6))
	wantNotALock(t, "a permit while a fair place is queued", err, name, "not a semaphore")
	if err := s.SetPermits(ctx, name, 5); err == nil {
		t.Errorf("SetPermits while a fair place is queued succeeded")
	}
	if err := s.Withdraw(ctx, driver.Request{Kind: driver.KindFair, Name: name, Owner: ownerN(5)}); err != nil {
		t.Fatal(err)
	}
	acquire("a permit once the queue is empty", permit(6))
}

// TestAcquireManyNamesTheRefusal: AcquireMany refused because a name is a
// semaphore's with live permits says which name; a semaphore's name that
// no permit holds is taken as a lock.
func TestAcquireManyNamesTheRefusal(t *testing.T) {
	s := migrated(t)
	ctx := bg(t)
	for _, name := range []string{"b-sem", "c-free-sem"} {
		if g, err := s.Acquire(ctx, driver.Request{Kind: driver.KindPermit, Name: name, Owner: ownerN(1), Lease: time.Minute, Permits: 1}); err != nil || !g.Acquired {
			t.Fatalf("permit of %s = %+v, %v", name, g, err)
		}
	}
	if err := s.Release(ctx, driver.Request{Kind: driver.KindPermit, Name: "c-free-sem", Owner: ownerN(1)}); err != nil {
		t.Fatal(err)
	}
	reqs := func(names ...string) []driver.Request {
		var rs []driver.Request
		for _, n := range names {
			rs = append(rs, driver.Request{Kind: driver.KindMutex, Name: n, Owner: ownerN(2), Lease: time.Minute})
		}
		return rs
	}
	_, err := s.AcquireMany(ctx, reqs("d", "c-free-sem", "b-sem", "a"))
	wantNotALock(t, "AcquireMany with a held semaphore", err, "b-sem", "a semaphore")
	g, err := s.AcquireMany(ctx, reqs("d", "c-free-sem", "a"))
	if err != nil || !g.Acquired {
		t.Errorf("AcquireMany with a free semaphore's name = %+v, %v; want granted", g, err)
	}
}

// TestPruneFreeName follows the package doc's way of deleting a name's row:
// a held name is left alone, a free one is deleted, and its next token
// still grows (from the server clock).
func TestPruneFreeName(t *testing.T) {
	s := migrated(t)
	db := s.DB()
	ctx := bg(t)
	r := driver.Request{Kind: driver.KindMutex, Name: "n", Owner: ownerN(1), Lease: time.Minute}
	g, err := s.Acquire(ctx, r)
	if err != nil || !g.Acquired {
		t.Fatal(g, err)
	}
	prune := func() bool {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
		var owner []byte
		var holders int
		if err := tx.QueryRowContext(ctx, "SELECT `owner` FROM leash_locks WHERE `name` = 'n' FOR UPDATE").Scan(&owner); err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM leash_locks_holders WHERE `name` = 'n'").Scan(&holders); err != nil {
			t.Fatal(err)
		}
		if owner != nil || holders != 0 {
			return false
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM leash_locks WHERE `name` = 'n'"); err != nil {
			t.Fatal(err)
		}
		return tx.Commit() == nil
	}
	if prune() {
		t.Fatal("a held name's row was pruned")
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	if !prune() {
		t.Fatal("a free name's row was not pruned")
	}
	g2, err := s.Acquire(ctx, r)
	if err != nil || !g2.Acquired || g2.Fence <= g.Fence {
		t.Errorf("after pruning, Acquire = %+v, %v; want a token above %d", g2, err, g.Fence)
	}
}
