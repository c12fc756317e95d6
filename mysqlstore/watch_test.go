package mysqlstore_test

import (
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/mysqlstore"
)

// grant acquires r through s and fails the test unless it is granted.
func grant(t *testing.T, s *mysqlstore.Store, r driver.Request) {
	t.Helper()
	if g, err := s.Acquire(bg(t), r); err != nil || !g.Acquired {
		t.Fatalf("Acquire(%s of %q by %s) = %+v, %v; want granted", r.Kind, r.Name, r.Owner, g, err)
	}
}

// TestLocalReleaseWakesEveryKind: a release through the Store wakes its
// waiters of every kind on the name, at once (before Release returns), not
// only those of the kind released: a Mutex waiter blocked by a reader is
// woken by the reader's release. The Store polls once an hour, so no poll
// can be what wakes it.
func TestLocalReleaseWakesEveryKind(t *testing.T) {
	s := mysqlstore.New(freshDB(t), &mysqlstore.Options{PollMin: time.Hour, PollMax: time.Hour})
	defer s.Close()
	if err := s.Migrate(bg(t)); err != nil {
		t.Fatal(err)
	}
	const name = "orders"
	reader := driver.Request{Kind: driver.KindRead, Name: name, Owner: ownerN(1), Lease: time.Hour}
	mutex := driver.Request{Kind: driver.KindMutex, Name: name, Owner: ownerN(2), Lease: time.Hour}
	grant(t, s, reader)
	woken := make(chan driver.Wake, 8)
	stop, err := s.Watch(bg(t), driver.KindMutex, name, func(w driver.Wake) { woken <- w })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if g, err := s.Acquire(bg(t), mutex); err != nil || g.Acquired {
		t.Fatalf("a mutex while a reader holds the name = %+v, %v; want refused", g, err)
	}
	if err := s.Release(bg(t), reader); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-woken:
		if w.To != driver.WakeOne {
			t.Errorf("the mutex waiter was woken with %+v, want WakeOne", w)
		}
	default:
		t.Fatal("the reader's release did not wake the mutex waiter")
	}
	grant(t, s, mutex)
}

// TestPollSeesAShortHandoff: a waiter refused only because another owner's
// fair queue place comes first (no holder, so no lease to wait for) is
// woken by the poll that sees the name taken and given back in between,
// by another Store (another process).
func TestPollSeesAShortHandoff(t *testing.T) {
	db := freshDB(t)
	a, b := mysqlstore.New(db, nil), mysqlstore.New(db, nil)
	defer a.Close()
	defer b.Close()
	if err := a.Migrate(bg(t)); err != nil {
		t.Fatal(err)
	}
	const name = "orders"
	fair := func(n int, wait time.Duration) driver.Request {
		return driver.Request{Kind: driver.KindFair, Name: name, Owner: ownerN(n), Lease: time.Hour, Wait: wait}
	}
	grant(t, b, fair(1, 0))
	if g, err := b.Acquire(bg(t), fair(2, time.Hour)); err != nil || g.Acquired {
		t.Fatalf("the second fair waiter = %+v, %v; want queued", g, err)
	}
	if err := b.Release(bg(t), fair(1, 0)); err != nil {
		t.Fatal(err)
	}
	// The name is free, but owner 2's place comes first.
	woken := make(chan driver.Wake, 8)
	stop, err := a.Watch(bg(t), driver.KindFair, name, func(w driver.Wake) { woken <- w })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if g, err := a.Acquire(bg(t), fair(3, 0)); err != nil || g.Acquired {
		t.Fatalf("a fair acquire behind a place = %+v, %v; want refused", g, err)
	}
	grant(t, b, fair(2, 0))
	if err := b.Release(bg(t), fair(2, 0)); err != nil {
		t.Fatal(err)
	}
	ctx := bg(t)
	select {
	case <-woken:
	case <-ctx.Done():
		t.Fatal("the poller never woke the waiter after the name was taken and given back")
	}
	grant(t, a, fair(3, 0))
}
