package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// rwTests are read-write locks (KindRead and KindWrite, with
// driver.Withdrawer).
var rwTests = []test{
	{name: "readers share; a waiting writer keeps new readers out", fn: testRWWriterPreference},
	{name: "each reader's lease expires alone", fn: testRWReaderLease},
	{name: "a writer downgrades to a reader", fn: testRWDowngrade},
	{name: "a writer's short lease does not free its downgraded reader's lock", fn: testRWDowngradeOutlivesWriter},
	{name: "an upgrade is refused", fn: testRWUpgrade},
	{name: "a waiting writer's mark expires", fn: testRWWriterMark},
	{name: "a withdrawn writer's mark lets readers in", fn: testRWWithdraw},
	{name: "writer and mutex exclude each other", fn: testRWExcludesMutex},
	{name: "the last reader wakes a writer, the writer wakes readers", needs: []capability{capWatch}, fn: testRWWakes},
}

func read(name, owner string) driver.Request  { return kreq(driver.KindRead, name, owner, long) }
func write(name, owner string) driver.Request { return kreq(driver.KindWrite, name, owner, long) }

func testRWWriterPreference(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	r1, r2, r3, wr := n.owner(), n.owner(), n.owner(), n.owner()
	g1 := mustAcquire(t, s, read(name, r1))
	g2 := mustAcquire(t, s, read(name, r2))
	if g2.Fence <= g1.Fence {
		t.Errorf("second reader's token %d, want > %d", g2.Fence, g1.Fence)
	}
	mustNotAcquire(t, s, waiting(write(name, wr), long))
	mustNotAcquire(t, s, read(name, r3)) // a writer waits
	mustRelease(t, s, read(name, r1))
	mustNotAcquire(t, s, waiting(write(name, wr), long)) // r2 still reads
	mustRelease(t, s, read(name, r2))
	gw := mustAcquire(t, s, waiting(write(name, wr), long))
	if gw.Fence <= g2.Fence {
		t.Errorf("writer's token %d, want > %d", gw.Fence, g2.Fence)
	}
	mustNotAcquire(t, s, read(name, r3))
	mustRelease(t, s, write(name, wr))
	mustAcquire(t, s, read(name, r3))
}

func testRWReaderLease(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	crashed, alive := n.owner(), n.owner()
	mustAcquire(t, s, kreq(driver.KindRead, name, crashed, short))
	mustAcquire(t, s, read(name, alive))
	time.Sleep(outlived(s, short)) // the crashed reader's lease runs out
	res := s.Renew(ctx(t), []driver.Request{read(name, crashed), read(name, alive)})
	if len(res) != 2 || res[0].Err != nil || res[0].Status != driver.RenewGone || res[1].Err != nil || res[1].Status != driver.Renewed {
		t.Fatalf("Renew(expired reader, live reader) = %+v, want [gone, renewed]", res)
	}
	mustNotAcquire(t, s, write(name, n.owner()))
	mustRelease(t, s, read(name, alive))
	mustAcquire(t, s, write(name, n.owner()))
}

func testRWDowngrade(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	wr := n.owner()
	gw := mustAcquire(t, s, write(name, wr))
	mustNotAcquire(t, s, read(name, n.owner()))
	mustNotAcquire(t, s, read(name, wr)) // the writer's owner, but no parent
	impostor := read(name, n.owner())
	impostor.Parent = n.owner() // a parent that does not hold the write lock
	mustNotAcquire(t, s, impostor)
	waiter := waiting(write(name, n.owner()), long)
	mustNotAcquire(t, s, waiter) // a waiting writer keeps new readers out, but not the downgrade
	down := read(name, n.owner())
	down.Parent = wr
	gr := mustAcquire(t, s, down) // the writer takes a read lease of its own
	if gr.Fence <= gw.Fence {
		t.Errorf("downgrade read token %d, want > %d", gr.Fence, gw.Fence)
	}
	mustRelease(t, s, write(name, wr))
	mustNotAcquire(t, s, waiter) // still a reader
	mustWithdraw(t, s, waiter)
	// The reader's requests still name its parent after the writer left.
	wantRenew(t, s, down, driver.Renewed, "of the downgraded reader, writer gone")
	other := read(name, n.owner())
	mustAcquire(t, s, other) // readers may join
	mustRelease(t, s, down)
	mustNotAcquire(t, s, write(name, n.owner())) // the other reader holds on
	mustRelease(t, s, other)
	mustAcquire(t, s, write(name, n.owner())) // free once both left
}

// downgraded takes a write lock on a new name and the writer's own read lease
// (the downgrade), and returns their requests.
func downgraded(t *testing.T, s driver.Store, n *namer) (w, down driver.Request) {
	t.Helper()
	name := n.name()
	w = write(name, n.owner())
	mustAcquire(t, s, w)
	down = read(name, n.owner())
	down.Parent = w.Owner
	mustAcquire(t, s, down)
	return w, down
}

// testRWDowngradeOutlivesWriter renews a writer with a lease far shorter than
// the read lease it downgraded to (as UnlockAfter does), and lets it lapse: the
// reader still holds the lock, so neither a writer nor a Mutex may be granted.
func testRWDowngradeOutlivesWriter(t *testing.T, s driver.Store, n *namer) {
	w, down := downgraded(t, s, n)
	name := w.Name
	w.Lease = 50 * time.Millisecond
	wantRenew(t, s, w, driver.Renewed, "of the writer with 50ms")
	time.Sleep(outlived(s, w.Lease) + 100*time.Millisecond) // the writer's lease runs out
	mustNotAcquire(t, s, write(name, n.owner()))
	mustNotAcquire(t, s, kreq(driver.KindMutex, name, n.owner(), long))
	wantRenew(t, s, down, driver.Renewed, "of the downgraded reader")
	mustNotAcquire(t, s, kreq(driver.KindMutex, name, n.owner(), long))
}

func testRWUpgrade(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	r := n.owner()
	mustAcquire(t, s, read(name, r))
	if _, err := s.Acquire(ctx(t), write(name, r)); !errors.Is(err, driver.ErrUpgrade) {
		t.Errorf("write acquire by a reader = %v, want ErrUpgrade", err)
	}
	mustRelease(t, s, read(name, r)) // the refusal left the reader as it was
	wantFree(t, s, n, driver.KindWrite, name)
}

func testRWWriterMark(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	mustAcquire(t, s, read(name, n.owner()))
	mustNotAcquire(t, s, waiting(write(name, n.owner()), short)) // and dies
	g := mustNotAcquire(t, s, read(name, n.owner()))
	if g.Remaining <= 0 || g.Remaining > short {
		t.Errorf("reader blocked by a writer mark: Remaining %v, want the mark's (0, %v]", g.Remaining, short)
	}
	acquireWithin(t, s, read(name, n.owner()), short+wakeWait)
}

func testRWWithdraw(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	mustAcquire(t, s, read(name, n.owner()))
	wr := waiting(write(name, n.owner()), long)
	mustNotAcquire(t, s, wr)
	mustNotAcquire(t, s, read(name, n.owner()))
	mustWithdraw(t, s, wr)
	mustAcquire(t, s, read(name, n.owner()))
	mustWithdraw(t, s, wr) // a second time: nothing to remove, not an error
}

func testRWExcludesMutex(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	wr := n.owner()
	mustAcquire(t, s, write(name, wr))
	mustNotAcquire(t, s, kreq(driver.KindMutex, name, n.owner(), long))
	mustRelease(t, s, write(name, wr))
	r := n.owner()
	mustAcquire(t, s, read(name, r))
	mustNotAcquire(t, s, kreq(driver.KindMutex, name, n.owner(), long))
	mustRelease(t, s, read(name, r))
	m := n.owner()
	mustAcquire(t, s, kreq(driver.KindMutex, name, m, long))
	mustNotAcquire(t, s, read(name, n.owner()))
	mustNotAcquire(t, s, write(name, n.owner()))
}

func testRWWakes(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	r1, r2, wr := n.owner(), n.owner(), n.owner()
	w := newWakeCounter()
	watchKind(t, s, driver.KindWrite, name, w)
	mustAcquire(t, s, read(name, r1))
	mustAcquire(t, s, read(name, r2))
	mustNotAcquire(t, s, waiting(write(name, wr), long))
	mustRelease(t, s, read(name, r1))
	mustRelease(t, s, read(name, r2))
	wantMessage(t, w, "the last reader left", driver.Wake{To: driver.WakeWriter})
	mustAcquire(t, s, waiting(write(name, wr), long))
	mustRelease(t, s, write(name, wr))
	wantMessage(t, w, "the writer left", driver.Wake{To: driver.WakeReaders})
}
