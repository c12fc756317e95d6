package storetest

import (
	"errors"
	"testing"

	"github.com/leash-go/leash/driver"
)

// capHandoff is the hand-off of a released lock to the first waiter: a
// driver.HandoffStore whose Handoff reports true (and a Withdrawer, which
// gives back a grant its waiter no longer wants).
var capHandoff = capability{"hand-off by release (driver.HandoffStore, driver.Withdrawer)", func(s driver.Store) bool {
	hs, ok := s.(driver.HandoffStore)
	return ok && hs.Handoff() && implements[driver.Withdrawer](s)
}}

// handoffTests are the hand-off of a released lock to the first waiter
// (driver.HandoffStore), on the fair queue's places and starving marks.
var handoffTests = []test{
	{name: "the wake-up carries the grant to the head", needs: []capability{capWatch}, fn: testHandoffWake},
	{name: "a waiter that missed the wake-up finds the grant on its next attempt", fn: testHandoffMissed},
	{name: "a waiter that gives up with a grant pending releases it", fn: testHandoffWithdraw},
	{name: "a dead waiter's grant lapses with its place", fn: testHandoffDeadWaiter},
	{name: "a starving Mutex waiter's mark is handed the lock", needs: []capability{capStarve}, fn: testHandoffStarving},
	{name: "a release without a place queued, or without Wait, hands nothing", needs: []capability{capWatch}, fn: testHandoffNone},
}

// handing is the release of r that asks the store to hand the lock to the
// first waiter, with a grant lasting at most long.
func handing(r driver.Request) driver.Request { return waiting(r, long) }

func testHandoffWake(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, c := n.owner(), n.owner()
	client, bs := n.clientOwners(1)
	b := bs[0]
	fw := newWakeCounter()
	watchHeads(t, s, driver.KindFair, name, client, fw)
	ga := mustAcquire(t, s, fair(name, a))
	mustNotAcquire(t, s, queued(name, b))
	mustNotAcquire(t, s, queued(name, c))
	mustRelease(t, s, handing(fair(name, a)))
	msg := wantWoken(t, fw, "release with b first")
	for msg.To == driver.WakeAll { // a reconnect's
		msg = wantWoken(t, fw, "release with b first")
	}
	if msg.To != driver.WakeHead || msg.Head != b || msg.Fence <= ga.Fence || msg.Lease <= 0 || msg.Lease > long {
		t.Fatalf("wake-up = %+v, want WakeHead for %q with a fence above %d and a lease in (0, %v]", msg, b, ga.Fence, long)
	}
	// Handed over: held by b for everyone else, Mutex and FairMutex alike.
	mustNotAcquire(t, s, mutex(name, n.owner()))
	mustNotAcquire(t, s, queued(name, c))
	if st := renewOne(t, s, fair(name, b)); st != driver.Renewed { // the pick-up by a renewal
		t.Fatalf("renewal of the handed-off lock = %v, want renewed", st)
	}
	mustNotAcquire(t, s, queued(name, c))
	mustRelease(t, s, fair(name, b))
	gc := mustAcquire(t, s, queued(name, c))
	if gc.Fence <= msg.Fence {
		t.Errorf("next fence %d, want above the handed-off grant's %d", gc.Fence, msg.Fence)
	}
	mustRelease(t, s, fair(name, c))
	wantFree(t, s, n, driver.KindFair, name)
}

func testHandoffMissed(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, b := n.owner(), n.owner()
	ga := mustAcquire(t, s, fair(name, a))
	mustNotAcquire(t, s, queued(name, b))
	mustRelease(t, s, handing(fair(name, a)))
	gb := mustAcquire(t, s, queued(name, b)) // the pick-up
	if gb.Fence <= ga.Fence {
		t.Fatalf("picked-up fence %d, want above the previous holder's %d", gb.Fence, ga.Fence)
	}
	if adm, ok := s.(driver.Admin); ok {
		// Picked up, not re-entered: one hold.
		info, err := adm.Inspect(ctx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Owners) != 1 || info.Owners[0].Owner != b || info.Owners[0].Holds != 1 {
			t.Errorf("Inspect owners after the pick-up = %+v, want %q with one hold", info.Owners, b)
		}
	}
	if g := mustAcquire(t, s, queued(name, b)); g.Fence != gb.Fence { // a transport retry
		t.Errorf("retried pick-up = fence %d, want the grant's %d", g.Fence, gb.Fence)
	}
	mustRelease(t, s, fair(name, b))
	wantFree(t, s, n, driver.KindMutex, name)
}

func testHandoffWithdraw(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, quitter, c := n.owner(), n.owner(), n.owner()
	mustAcquire(t, s, fair(name, a))
	mustNotAcquire(t, s, queued(name, quitter))
	mustNotAcquire(t, s, queued(name, c))
	mustRelease(t, s, handing(fair(name, a)))
	mustNotAcquire(t, s, queued(name, c)) // handed to the quitter
	mustWithdraw(t, s, queued(name, quitter))
	mustAcquire(t, s, queued(name, c)) // given back at once, not at its lease's end
	if err := s.Release(ctx(t), fair(name, quitter)); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("release by the waiter that withdrew = %v, want ErrNotHeld", err)
	}
	mustRelease(t, s, fair(name, c))
	// Withdrawing a lock that was picked up leaves it held.
	mustAcquire(t, s, fair(name, a))
	mustNotAcquire(t, s, queued(name, c))
	mustRelease(t, s, handing(fair(name, a)))
	gc := mustAcquire(t, s, queued(name, c))
	mustWithdraw(t, s, queued(name, c))
	wantHeldBy(t, s, n, fair(name, c), gc.Fence)
	mustRelease(t, s, fair(name, c))
}

func testHandoffDeadWaiter(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, dead, c := n.owner(), n.owner(), n.owner()
	mustAcquire(t, s, fair(name, a))
	mustNotAcquire(t, s, waiting(fair(name, dead), short)) // its place lasts short; it never comes back
	mustRelease(t, s, handing(fair(name, a)))              // asks for up to long
	mustNotAcquire(t, s, queued(name, c))                  // handed to the dead waiter
	// The grant lasts no longer than the place had left.
	acquireWithin(t, s, queued(name, c), short+wakeWait)
}

func testHandoffStarving(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, st := n.owner(), n.owner()
	ga := mustAcquire(t, s, mutex(name, a))
	mustNotAcquire(t, s, starving(name, st))
	mustRelease(t, s, handing(mutex(name, a)))
	mustNotAcquire(t, s, mutex(name, n.owner())) // handed to the mark
	mustNotAcquire(t, s, mutex(name, a))
	g := mustAcquire(t, s, starving(name, st))
	if g.Fence <= ga.Fence {
		t.Errorf("handed-off fence %d, want above %d", g.Fence, ga.Fence)
	}
	mustRelease(t, s, mutex(name, st))
	wantFree(t, s, n, driver.KindMutex, name)
}

func testHandoffNone(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	client, as := n.clientOwners(1)
	a, b := as[0], n.owner()
	mw, fw := newWakeCounter(), newWakeCounter()
	watchKind(t, s, driver.KindMutex, name, mw)
	watchHeads(t, s, driver.KindFair, name, client, fw)
	mustAcquire(t, s, fair(name, a))
	mustRelease(t, s, handing(fair(name, a))) // nobody queued: freed, and woken as before
	wantMessage(t, mw, "release with nobody queued", driver.Wake{To: driver.WakeOne})
	mustAcquire(t, s, mutex(name, b))
	mustNotAcquire(t, s, queued(name, a))
	mustRelease(t, s, mutex(name, b)) // without Wait: freed, the head woken, no grant
	wantMessage(t, fw, "release without Wait", driver.Wake{To: driver.WakeHead, Head: a})
	mustNotAcquire(t, s, mutex(name, n.owner())) // free, but a is first
	mustAcquire(t, s, queued(name, a))
	mustRelease(t, s, fair(name, a))
	wantFree(t, s, n, driver.KindMutex, name)
}
