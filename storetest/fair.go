package storetest

import (
	"testing"

	"github.com/leash-go/leash/driver"
)

// fairTests are the fair queue (KindFair, with driver.Withdrawer).
var fairTests = []test{
	{name: "grants in queue order", fn: testFairOrder},
	{name: "a dead waiter leaves the queue within its place lease", fn: testFairDeadWaiter},
	{name: "a waiter that withdraws leaves at once", fn: testFairWithdraw},
	{name: "an attempt without a wait takes no place", fn: testFairNoPlace},
	{name: "fair and mutex are one lock", fn: testFairIsMutex},
	{name: "a release, and the head's withdrawal, wake only the new head", needs: []capability{capWatch}, fn: testFairWakesHead},
}

func fair(name, owner string) driver.Request { return kreq(driver.KindFair, name, owner, long) }

// queued is a fair attempt that keeps its place for long.
func queued(name, owner string) driver.Request { return waiting(fair(name, owner), long) }

func testFairOrder(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, b, c := n.owner(), n.owner(), n.owner()
	ga := mustAcquire(t, s, fair(name, a))
	if g := mustAcquire(t, s, fair(name, a)); g.Fence != ga.Fence {
		t.Errorf("retried fair acquire = fence %d, want the tenure's %d", g.Fence, ga.Fence)
	}
	mustNotAcquire(t, s, queued(name, b)) // b queues first
	mustNotAcquire(t, s, queued(name, c)) // then c
	mustRelease(t, s, fair(name, a))
	g := mustNotAcquire(t, s, queued(name, c)) // free, but b is first
	if g.Remaining <= 0 || g.Remaining > long {
		t.Errorf("Remaining behind the head = %v, want the head's place lease, in (0, %v]", g.Remaining, long)
	}
	mustAcquire(t, s, queued(name, b))
	mustRelease(t, s, fair(name, b))
	mustAcquire(t, s, queued(name, c))
	mustRelease(t, s, fair(name, c))
	wantFree(t, s, n, driver.KindFair, name) // no place left behind
}

func testFairDeadWaiter(t *testing.T, s driver.Store, n *namer) {
	deadPlaceLapses(t, s, n, fair, queued)
}

// deadPlaceLapses: a waiter whose place (a fair queue place, a starving
// Mutex's mark: the attempt made) lasts short never comes back; next(name,
// owner) is another waiter's attempt, held back by the place only while it
// lives.
func deadPlaceLapses(t *testing.T, s driver.Store, n *namer, attempt, next func(name, owner string) driver.Request) {
	name := n.name()
	a, dead, c := n.owner(), n.owner(), n.owner()
	mustAcquire(t, s, attempt(name, a))
	mustNotAcquire(t, s, waiting(attempt(name, dead), short)) // never comes back
	mustNotAcquire(t, s, next(name, c))
	mustRelease(t, s, attempt(name, a))
	mustNotAcquire(t, s, next(name, c))
	acquireWithin(t, s, next(name, c), short+wakeWait)
}

func testFairWithdraw(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, quitter, c := n.owner(), n.owner(), n.owner()
	mustAcquire(t, s, fair(name, a))
	mustNotAcquire(t, s, queued(name, quitter))
	mustNotAcquire(t, s, queued(name, c))
	mustRelease(t, s, fair(name, a))
	mustNotAcquire(t, s, queued(name, c)) // the quitter is the head
	mustWithdraw(t, s, queued(name, quitter))
	mustAcquire(t, s, queued(name, c))
	// Withdrawing a place one does not have is not an error.
	mustWithdraw(t, s, queued(name, n.owner()))
}

func testFairNoPlace(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, b := n.owner(), n.owner()
	mustAcquire(t, s, fair(name, a))
	mustNotAcquire(t, s, fair(name, b)) // Wait 0
	mustRelease(t, s, fair(name, a))
	wantFree(t, s, n, driver.KindFair, name) // b is not ahead of anyone
}

func testFairIsMutex(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a := n.owner()
	mustAcquire(t, s, fair(name, a))
	mustNotAcquire(t, s, kreq(driver.KindMutex, name, n.owner(), long))
	wantRenew(t, s, kreq(driver.KindMutex, name, a, long), driver.Renewed, "of a fair hold as a mutex")
	mustRelease(t, s, kreq(driver.KindMutex, name, a, long))
	b := n.owner()
	mustAcquire(t, s, kreq(driver.KindMutex, name, b, long))
	mustNotAcquire(t, s, fair(name, n.owner()))
}

func testFairWakesHead(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a := n.owner()
	client, bc := n.clientOwners(2)
	b, c := bc[0], bc[1]
	w := newWakeCounter()
	watchHeads(t, s, driver.KindFair, name, client, w)
	mustAcquire(t, s, fair(name, a))
	mustNotAcquire(t, s, queued(name, b))
	mustNotAcquire(t, s, queued(name, c))
	mustRelease(t, s, fair(name, a))
	wantMessage(t, w, "fair release", driver.Wake{To: driver.WakeHead, Head: b})
	mustWithdraw(t, s, queued(name, b))
	wantMessage(t, w, "withdrawal of the head", driver.Wake{To: driver.WakeHead, Head: c})
	mustAcquire(t, s, queued(name, c))
}
