package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

var capRevoke = capability{"revocation (driver.Revoker)", implements[driver.Revoker]}

// revokeTests are revocation ([driver.Revoker]): a revoked holder is told,
// and no one is granted the name before it acknowledged or its lease ran
// out.
var revokeTests = []test{
	{name: "revoke tells the holder and keeps the name from everyone until acknowledged", fn: testRevoke},
	{name: "a revoked lock's tombstone lapses with the holder's lease", fn: testRevokeLapses},
	{name: "revoke of a free or already revoked name changes nothing", fn: testRevokeFree},
	{name: "acknowledgement wakes every waiter", needs: []capability{capWatch}, fn: testRevokeWakes},
	{name: "revoke keeps readers and writers out, and refuses a read-held name", needs: []capability{capRW}, fn: testRevokeRW},
	{name: "force release tells the holder and frees the name at once", fn: testForceReleaseTells},
}

// revocations watches the revocations of owner's client.
func revocations(t *testing.T, s driver.Store, owner string) <-chan driver.Revocation {
	t.Helper()
	ch := make(chan driver.Revocation, 16)
	stop, err := s.(driver.Revoker).WatchRevokes(ctx(t), driver.OwnerClient(owner), func(rv driver.Revocation) {
		select {
		case ch <- rv:
		default:
		}
	})
	if err != nil {
		t.Fatalf("WatchRevokes: %v", err)
	}
	t.Cleanup(stop)
	return ch
}

func wantRevocation(t *testing.T, ch <-chan driver.Revocation, want driver.Revocation) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Errorf("revocation = %+v, want %+v", got, want)
		}
	case <-time.After(wakeWait):
		t.Fatalf("no revocation %+v within %v", want, wakeWait)
	}
}

func revoke(t *testing.T, s driver.Store, name string, want bool) {
	t.Helper()
	ok, err := s.(driver.Revoker).Revoke(ctx(t), name)
	if err != nil || ok != want {
		t.Fatalf("Revoke(%q) = %v, %v; want %v, nil", name, ok, err, want)
	}
}

func ackRevoke(t *testing.T, s driver.Store, r driver.Request) {
	t.Helper()
	if err := s.(driver.Revoker).AckRevoke(ctx(t), r); err != nil {
		t.Fatalf("AckRevoke(%q, %q): %v", r.Name, r.Owner, err)
	}
}

func testRevoke(t *testing.T, s driver.Store, n *namer) {
	a := req(n.name(), n.owner(), long)
	g := mustAcquire(t, s, a)
	ch := revocations(t, s, a.Owner)
	revoke(t, s, a.Name, true)
	wantRevocation(t, ch, driver.Revocation{Name: a.Name, Owner: a.Owner})
	wantRenew(t, s, a, driver.RenewRevoked, "of the revoked owner")
	busy(t, s, n, a, long)
	fair := kreq(driver.KindFair, a.Name, n.owner(), long)
	if driver.Supports(s, driver.KindFair) {
		mustNotAcquire(t, s, fair)
	}
	if g := mustNotAcquire(t, s, a); g.Remaining <= 0 {
		t.Errorf("the revoked owner's retried Acquire = remaining %v, want positive (refused)", g.Remaining)
	}
	if info := inspect(t, s, a.Name); info.Held || len(info.Owners) != 0 || len(info.Revoked) != 1 ||
		info.Revoked[0] != a.Owner || info.Remaining <= 0 {
		t.Errorf("Inspect of a revoked lock = %+v, want not held, revoked %q, a positive remaining lease", info, a.Owner)
	}
	ackRevoke(t, s, req(a.Name, n.owner(), long)) // not the revoked owner: changes nothing
	busy(t, s, n, a, long)
	wantReleaseNotHeld(t, s, a, "of the revoked owner")
	busy(t, s, n, a, long)
	ackRevoke(t, s, a)
	if got := wantFree(t, s, n, driver.KindMutex, a.Name); got.Fence <= g.Fence {
		t.Errorf("grant after the acknowledgement = fence %d, want above the revoked %d", got.Fence, g.Fence)
	}
	ackRevoke(t, s, a) // again: nothing left, not an error
	wantInspectFree(t, s, a.Name)
}

func testRevokeLapses(t *testing.T, s driver.Store, n *namer) {
	a := req(n.name(), n.owner(), short)
	g := mustAcquire(t, s, a)
	revoke(t, s, a.Name, true)
	start := time.Now()
	b := req(a.Name, n.owner(), long)
	got := acquireWithin(t, s, b, outlived(s, short)+wakeWait)
	if el := time.Since(start); el < short/2 {
		t.Errorf("the name was granted %v after the revoke of a %v lease: the tombstone did not hold it", el, short)
	}
	if got.Fence <= g.Fence {
		t.Errorf("grant after the tombstone lapsed = fence %d, want above %d", got.Fence, g.Fence)
	}
}

func testRevokeFree(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	revoke(t, s, name, false)
	a := req(name, n.owner(), long)
	mustAcquire(t, s, a)
	mustRelease(t, s, a)
	revoke(t, s, name, false)
	wantFree(t, s, n, driver.KindMutex, name)
	b := req(name, n.owner(), long)
	mustAcquire(t, s, b)
	revoke(t, s, name, true)
	revoke(t, s, name, false)
	busy(t, s, n, b, long)
}

func testRevokeWakes(t *testing.T, s driver.Store, n *namer) {
	a := req(n.name(), n.owner(), long)
	mustAcquire(t, s, a)
	revoke(t, s, a.Name, true)
	w := newWakeCounter()
	watch(t, s, a.Name, w)
	ackRevoke(t, s, a)
	wantWoken(t, w, "the acknowledgement of a revoked lock")
	wantFree(t, s, n, driver.KindMutex, a.Name)
}

func testRevokeRW(t *testing.T, s driver.Store, n *namer) {
	w := kreq(driver.KindWrite, n.name(), n.owner(), long)
	mustAcquire(t, s, w)
	revoke(t, s, w.Name, true)
	wantRenew(t, s, w, driver.RenewRevoked, "of the revoked writer")
	mustNotAcquire(t, s, kreq(driver.KindRead, w.Name, n.owner(), long))
	mustNotAcquire(t, s, kreq(driver.KindWrite, w.Name, n.owner(), long))
	// Not even to the revoked writer, downgrading before it hears of it.
	down := kreq(driver.KindRead, w.Name, n.owner(), long)
	down.Parent = w.Owner
	mustNotAcquire(t, s, down)
	ackRevoke(t, s, w)
	wantFree(t, s, n, driver.KindRead, w.Name)

	r := kreq(driver.KindRead, n.name(), n.owner(), long)
	mustAcquire(t, s, r)
	if _, err := s.(driver.Revoker).Revoke(ctx(t), r.Name); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("Revoke of a read-held name = %v, want ErrUnsupported", err)
	}
	wantRenew(t, s, r, driver.Renewed, "of a reader after a refused revoke")
}

func testForceReleaseTells(t *testing.T, s driver.Store, n *namer) {
	a := req(n.name(), n.owner(), long)
	mustAcquire(t, s, a)
	ch := revocations(t, s, a.Owner)
	forceRelease(t, s, a.Name, true)
	wantRevocation(t, ch, driver.Revocation{Name: a.Name, Owner: a.Owner, Freed: true})
	wantFree(t, s, n, driver.KindMutex, a.Name)

	// A tombstone goes too.
	b := req(n.name(), n.owner(), long)
	mustAcquire(t, s, b)
	revoke(t, s, b.Name, true)
	forceRelease(t, s, b.Name, true)
	wantFree(t, s, n, driver.KindMutex, b.Name)
}
