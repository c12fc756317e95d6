package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// keptLease is the lease of the locks a session test keeps alive: long
// enough that a busy machine does not miss a keep-alive by it.
const keptLease = 2 * time.Second

// sessionTests are the tests of session renewal.
var sessionTests = []test{
	{name: "a keep-alive extends every lock of its client and no other client's", fn: testKeepAliveExtends},
	{name: "renew checks the holder and extends nothing", fn: testSessionRenewChecks},
	{name: "a lock released or forced free is gone alone; the session keeps the others", fn: testSessionLockGone},
	{name: "a keep-alive after every lock of the session expired reports the session ended", fn: testSessionEnds},
}

// tenureOf returns a fresh owner of client: another tenure of the same
// client, which the client's session keeps alive with the others.
func (n *namer) tenureOf(client string) string {
	return fmt.Sprintf("%s:%d", client, n.seq.Add(1))
}

// renewStatuses renews reqs in one call and returns their statuses; an error
// in any result fails the test.
func renewStatuses(t *testing.T, s driver.Store, reqs []driver.Request) []driver.RenewStatus {
	t.Helper()
	res := s.Renew(ctx(t), reqs)
	if len(res) != len(reqs) {
		t.Fatalf("Renew(%d requests) returned %d results", len(reqs), len(res))
	}
	out := make([]driver.RenewStatus, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("Renew(%v %q, %q) error: %v", reqs[i].Kind, reqs[i].Name, reqs[i].Owner, r.Err)
		}
		out[i] = r.Status
	}
	return out
}

func keepAlive(t *testing.T, s driver.Store, client, what string) {
	t.Helper()
	if err := s.(driver.SessionStore).KeepAlive(ctx(t), client); err != nil {
		t.Fatalf("KeepAlive(%q) %s = %v, want nil", client, what, err)
	}
}

// grantedAfter calls each, then tries r, until r is granted, for at most d.
// It is for a lease that must run out: the sleeps between tries are what the
// test waits for.
func grantedAfter(t *testing.T, s driver.Store, r driver.Request, d time.Duration, each func()) driver.Grant {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		each()
		g, err := s.Acquire(ctx(t), r)
		if err != nil {
			t.Fatalf("Acquire(%v %q, %q) error: %v", r.Kind, r.Name, r.Owner, err)
		}
		if g.Acquired {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("Acquire(%v %q, %q) still refused after %v (remaining %v)", r.Kind, r.Name, r.Owner, d, g.Remaining)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testKeepAliveExtends keeps a client's locks (of every kind the store
// grants) alive past their lease by keep-alives alone, while another
// client's lock, taken after them with the same lease, expires.
func testKeepAliveExtends(t *testing.T, s driver.Store, n *namer) {
	first := n.owner()
	client := driver.OwnerClient(first)
	kept := []driver.Request{req(n.name(), first, keptLease), req(n.name(), n.tenureOf(client), keptLease)}
	if driver.Supports(s, driver.KindRead) {
		kept = append(kept, kreq(driver.KindRead, n.name(), n.tenureOf(client), keptLease))
	}
	if driver.Supports(s, driver.KindPermit) {
		r := kreq(driver.KindPermit, n.name(), n.tenureOf(client), keptLease)
		r.Permits = 1
		kept = append(kept, r)
	}
	for _, r := range kept {
		mustAcquire(t, s, r)
	}
	if ms, ok := s.(driver.MultiStore); ok {
		o := n.tenureOf(client)
		many := []driver.Request{req(n.name(), o, keptLease), req(n.name(), o, keptLease)}
		if g, err := ms.AcquireMany(ctx(t), many); err != nil || !g.Acquired {
			t.Fatalf("AcquireMany(2 free names) = %+v, %v; want acquired", g, err)
		}
		kept = append(kept, many...)
	}
	other := req(n.name(), n.owner(), keptLease) // another client's, taken last
	mustAcquire(t, s, other)

	// Once other's lease has run out, so has every kept lock's first lease.
	grantedAfter(t, s, req(other.Name, n.owner(), long), keptLease+wakeWait, func() {
		keepAlive(t, s, client, "of a client holding locks")
	})
	for i, st := range renewStatuses(t, s, kept) {
		if st != driver.Renewed {
			t.Errorf("Renew(%v %q) after keep-alives past its lease = status %d, want Renewed (%d)", kept[i].Kind, kept[i].Name, st, driver.Renewed)
		}
	}
	for _, r := range kept {
		if r.Kind == driver.KindMutex {
			mustNotAcquire(t, s, req(r.Name, n.owner(), long))
		}
	}
}

// testSessionRenewChecks renews a lock with Renew alone, with a far longer
// lease: Renew reports it held while it is, and it expires by its own lease.
func testSessionRenewChecks(t *testing.T, s driver.Store, n *namer) {
	r := req(n.name(), n.owner(), short)
	mustAcquire(t, s, r)
	renewal := r
	renewal.Lease = long
	grantedAfter(t, s, req(r.Name, n.owner(), long), short+wakeWait, func() {
		// Renewed while held; RenewGone once the lease has run out.
		if st := renewOne(t, s, renewal); st != driver.Renewed && st != driver.RenewGone {
			t.Fatalf("Renew by the holder = status %d, want Renewed (%d), or RenewGone (%d) once its lease ran out", st, driver.Renewed, driver.RenewGone)
		}
	})
	if st := renewOne(t, s, renewal); st != driver.RenewTaken {
		t.Errorf("Renew by the expired holder = status %d, want RenewTaken (%d)", st, driver.RenewTaken)
	}
}

// testSessionLockGone releases one lock of a session and forces another free
// (releases it, for a store without driver.Admin): Renew reports each gone,
// a keep-alive brings neither back, and the session keeps its third lock.
func testSessionLockGone(t *testing.T, s driver.Store, n *namer) {
	first := n.owner()
	client := driver.OwnerClient(first)
	released, forced, stays := req(n.name(), first, long), req(n.name(), n.tenureOf(client), long), req(n.name(), n.tenureOf(client), long)
	for _, r := range []driver.Request{released, forced, stays} {
		mustAcquire(t, s, r)
	}
	mustRelease(t, s, released)
	if a, ok := s.(driver.Admin); ok {
		if freed, err := a.ForceRelease(ctx(t), forced.Name); err != nil || !freed {
			t.Fatalf("ForceRelease(%q) = %v, %v; want true, nil", forced.Name, freed, err)
		}
	} else {
		mustRelease(t, s, forced)
	}
	keepAlive(t, s, client, "of a client still holding a lock")
	got := renewStatuses(t, s, []driver.Request{released, forced, stays})
	if want := []driver.RenewStatus{driver.RenewGone, driver.RenewGone, driver.Renewed}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Renew(released, forced free, still held) = statuses %v, want %v", got, want)
	}
	mustAcquire(t, s, req(released.Name, n.owner(), long))
	mustAcquire(t, s, req(forced.Name, n.owner(), long))
	mustNotAcquire(t, s, req(stays.Name, n.owner(), long))
}

// testSessionEnds lets every lock of a session expire: the next keep-alive
// reports ErrNotHeld, and a new lock of the same client starts a new session.
func testSessionEnds(t *testing.T, s driver.Store, n *namer) {
	first := n.owner()
	client := driver.OwnerClient(first)
	locks := []driver.Request{req(n.name(), first, short), req(n.name(), n.tenureOf(client), short)}
	for _, r := range locks {
		mustAcquire(t, s, r)
	}
	keepAlive(t, s, client, "of a client holding locks")
	for _, r := range locks {
		grantedAfter(t, s, req(r.Name, n.owner(), long), short+wakeWait, func() {})
	}
	if err := s.(driver.SessionStore).KeepAlive(ctx(t), client); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("KeepAlive(%q) after every lock of its session expired = %v, want ErrNotHeld", client, err)
	}
	for i, st := range renewStatuses(t, s, locks) {
		if st != driver.RenewTaken {
			t.Errorf("Renew(%q) of an expired session's lock, since taken = status %d, want RenewTaken (%d)", locks[i].Name, st, driver.RenewTaken)
		}
	}
	again := req(n.name(), n.tenureOf(client), long)
	mustAcquire(t, s, again)
	keepAlive(t, s, client, "of a client holding a lock taken after its session ended")
	if st := renewOne(t, s, again); st != driver.Renewed {
		t.Errorf("Renew of a lock of the new session = status %d, want Renewed (%d)", st, driver.Renewed)
	}
}
