package storetest

import (
	"testing"

	"github.com/leash-go/leash/driver"
)

// capStarve is the Mutex's starvation mode: a driver.StarvationStore whose
// Starvation reports true (and a Withdrawer, which removes a mark).
var capStarve = capability{"starving waiters' marks (driver.StarvationStore, driver.Withdrawer)", func(s driver.Store) bool {
	ss, ok := s.(driver.StarvationStore)
	return ok && ss.Starvation() && implements[driver.Withdrawer](s)
}}

// starveTests are the starvation mode of KindMutex (driver.StarvationStore).
var starveTests = []test{
	{name: "fresh acquirers queue behind a starving mark", fn: testStarveMarkRespected},
	{name: "marks are served in order, one grant at a time", fn: testStarveOrder},
	{name: "a dead starving waiter's mark lapses", fn: testStarveDeadWaiter},
	{name: "a starving mark and a fair place share one line", needs: []capability{capFair}, fn: testStarveWithFair},
	{name: "a release wakes the starving head; its withdrawal wakes the Mutex waiters", needs: []capability{capWatch}, fn: testStarveWakes},
}

// mutex is a Mutex attempt that is not starving (Wait 0): a fresh Lock's,
// or a TryLock's.
func mutex(name, owner string) driver.Request { return kreq(driver.KindMutex, name, owner, long) }

// starving is a starving Mutex waiter's attempt, whose mark lasts long.
func starving(name, owner string) driver.Request { return waiting(mutex(name, owner), long) }

func testStarveMarkRespected(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, st, fresh := n.owner(), n.owner(), n.owner()
	ga := mustAcquire(t, s, mutex(name, a))
	mustNotAcquire(t, s, starving(name, st)) // marks the name
	mustRelease(t, s, mutex(name, a))
	g := mustNotAcquire(t, s, mutex(name, fresh)) // free, but the starving waiter is first
	if g.Remaining <= 0 || g.Remaining > long {
		t.Errorf("Remaining behind a starving mark = %v, want the mark's lease, in (0, %v]", g.Remaining, long)
	}
	mustNotAcquire(t, s, mutex(name, a)) // the one that just released does not barge either
	gs := mustAcquire(t, s, starving(name, st))
	if gs.Fence <= ga.Fence {
		t.Errorf("starving waiter's fence %d, want above the previous holder's %d", gs.Fence, ga.Fence)
	}
	if g := mustAcquire(t, s, starving(name, st)); g.Fence != gs.Fence { // a transport retry
		t.Errorf("retried starving acquire = fence %d, want the tenure's %d", g.Fence, gs.Fence)
	}
	mustNotAcquire(t, s, mutex(name, fresh))
	mustRelease(t, s, mutex(name, st))
	mustAcquire(t, s, mutex(name, fresh)) // no mark left: barging resumes
	mustRelease(t, s, mutex(name, fresh))
	wantFree(t, s, n, driver.KindMutex, name)
}

func testStarveOrder(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, s1, s2 := n.owner(), n.owner(), n.owner()
	mustAcquire(t, s, mutex(name, a))
	mustNotAcquire(t, s, starving(name, s1))
	mustNotAcquire(t, s, starving(name, s2))
	mustRelease(t, s, mutex(name, a))
	mustNotAcquire(t, s, starving(name, s2)) // free, but s1 marked first
	mustAcquire(t, s, starving(name, s1))
	// One holder at a time, whatever the marks: s2, the first mark now,
	// and a fresh acquirer both wait while s1 holds.
	mustNotAcquire(t, s, starving(name, s2))
	mustNotAcquire(t, s, mutex(name, n.owner()))
	mustRelease(t, s, mutex(name, s1))
	mustAcquire(t, s, starving(name, s2))
	mustRelease(t, s, mutex(name, s2))
	wantFree(t, s, n, driver.KindMutex, name) // no mark left behind
}

// testStarveDeadWaiter: a fresh Mutex attempt is held back by a dead
// waiter's mark only while the mark lives.
func testStarveDeadWaiter(t *testing.T, s driver.Store, n *namer) {
	deadPlaceLapses(t, s, n, mutex, mutex)
}

func testStarveWithFair(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a, st, f := n.owner(), n.owner(), n.owner()
	mustAcquire(t, s, mutex(name, a))
	mustNotAcquire(t, s, queued(name, f)) // a FairMutex waiter first
	mustNotAcquire(t, s, starving(name, st))
	mustRelease(t, s, mutex(name, a))
	mustNotAcquire(t, s, starving(name, st))
	mustNotAcquire(t, s, mutex(name, n.owner())) // a fair place holds fresh Mutex acquirers back too
	mustAcquire(t, s, queued(name, f))
	mustRelease(t, s, fair(name, f))
	mustNotAcquire(t, s, queued(name, n.owner())) // a later FairMutex waiter is behind the mark
	mustAcquire(t, s, starving(name, st))
}

func testStarveWakes(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	a := n.owner()
	client, marks := n.clientOwners(2)
	s1, s2 := marks[0], marks[1]
	fw, mw := newWakeCounter(), newWakeCounter()
	watchHeads(t, s, driver.KindFair, name, client, fw)
	watchKind(t, s, driver.KindMutex, name, mw)
	mustAcquire(t, s, mutex(name, a))
	mustNotAcquire(t, s, starving(name, s1))
	mustNotAcquire(t, s, starving(name, s2))
	mustRelease(t, s, mutex(name, a))
	wantMessage(t, fw, "release with starving waiters", driver.Wake{To: driver.WakeHead, Head: s1})
	mustWithdraw(t, s, starving(name, s1))
	wantMessage(t, fw, "withdrawal of the starving head", driver.Wake{To: driver.WakeHead, Head: s2})
	mustWithdraw(t, s, starving(name, s2))
	// The last mark is gone from a free lock: the Mutex waiters it held
	// back are woken, and one of them takes it.
	wantMessage(t, mw, "withdrawal of the last mark", driver.Wake{To: driver.WakeOne})
	mustAcquire(t, s, mutex(name, n.owner()))
}
