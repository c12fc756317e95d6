package storetest

import (
	"errors"
	"testing"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// fenceTests are fence floors (driver.FenceRaiser).
var fenceTests = []test{
	{name: "a raise lifts the next token above the floor", fn: testRaiseLifts},
	{name: "a raise on a name never locked", fn: testRaiseFresh},
	{name: "a raise never lowers the counter", fn: testRaiseNeverLowers},
	{name: "a raise leaves the holder alone", fn: testRaiseWhileHeld},
	{name: "a floor that is not positive is refused", fn: testRaiseBadFloor},
}

// jump is how far above a store's last token a test sets the floor: more
// than a day in microseconds, so that a store whose tokens are clock
// readings (redisstore's) must take it from the floor, not from its clock.
const jump = int64(1) << 37

func mustRaise(t *testing.T, s driver.Store, name string, floor int64) {
	t.Helper()
	if err := s.(driver.FenceRaiser).RaiseFence(ctx(t), name, floor); err != nil {
		t.Fatalf("RaiseFence(%q, %d): %v", name, floor, err)
	}
}

// grantAbove acquires and releases name's lock and checks its token is
// greater than floor.
func grantAbove(t *testing.T, s driver.Store, n *namer, name string, floor int64, what string) int64 {
	t.Helper()
	r := req(name, n.owner(), long)
	g := mustAcquire(t, s, r)
	mustRelease(t, s, r)
	if g.Fence <= floor {
		t.Fatalf("the grant %s has token %d, want > %d", what, g.Fence, floor)
	}
	return g.Fence
}

func testRaiseLifts(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	first := grantAbove(t, s, n, name, 0, "before any raise")
	floor := first + jump
	mustRaise(t, s, name, floor)
	next := grantAbove(t, s, n, name, floor, "after the raise")
	grantAbove(t, s, n, name, next, "after that")
}

func testRaiseFresh(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	other := grantAbove(t, s, n, n.name(), 0, "of another name")
	floor := other + jump
	mustRaise(t, s, name, floor)
	grantAbove(t, s, n, name, floor, "after a raise of a name never locked")
}

func testRaiseNeverLowers(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	high := grantAbove(t, s, n, name, 0, "before any raise") + jump
	mustRaise(t, s, name, high)
	mustRaise(t, s, name, 1)
	mustRaise(t, s, name, high/2)
	grantAbove(t, s, n, name, high, "after raises to lower floors")
}

func testRaiseWhileHeld(t *testing.T, s driver.Store, n *namer) {
	name := n.name()
	r := req(name, n.owner(), long)
	g := mustAcquire(t, s, r)
	floor := g.Fence + jump
	mustRaise(t, s, name, floor)
	busy(t, s, n, r, long)
	if again := mustAcquire(t, s, r); again.Fence != g.Fence && again.Fence != floor {
		t.Errorf("the holder's retried acquire after the raise = token %d, want its grant's %d or the floor %d", again.Fence, g.Fence, floor)
	}
	if st := renewOne(t, s, r); st != driver.Renewed {
		t.Fatalf("renewal after the raise = %v, want Renewed", st)
	}
	mustRelease(t, s, r)
	grantAbove(t, s, n, name, floor, "after the holder released")
}

func testRaiseBadFloor(t *testing.T, s driver.Store, n *namer) {
	for _, floor := range []int64{0, -1} {
		if err := s.(driver.FenceRaiser).RaiseFence(ctx(t), n.name(), floor); !errors.Is(err, leash.ErrInvalidArgument) {
			t.Errorf("RaiseFence(floor %d) = %v, want an error matching leash.ErrInvalidArgument", floor, err)
		}
	}
}
