package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/redlock"
)

// bare is a member without the optional capabilities: a driver.Store and
// nothing else (no fence floors), for the negative controls.
type bare struct{ driver.Store }

// counters sets name's fencing counter on each member store to the value
// given (0: left alone).
func counters(t *testing.T, stores []driver.Store, name string, values ...int64) {
	t.Helper()
	for i, v := range values {
		if v == 0 {
			continue
		}
		if err := stores[i].(driver.FenceRaiser).RaiseFence(t.Context(), name, v); err != nil {
			t.Fatal(err)
		}
	}
}

// fenceOf takes name's lock with c while the members in cut are cut off,
// and returns the token the holder was given, after releasing the lock with
// every member back.
func fenceOf(t *testing.T, c *leash.Client, name string, cut ...*view) int64 {
	t.Helper()
	for _, v := range cut {
		v.down.Store(true)
	}
	h, err := c.Mutex(name).TryLock(t.Context())
	for _, v := range cut {
		v.down.Store(false)
	}
	if err != nil {
		t.Fatalf("TryLock(%q): %v", name, err)
	}
	f := h.Fence()
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock(%q): %v", name, err)
	}
	return f
}

// The package documentation's counter-example: counters 10 and 100 on
// members A and B, nothing on C. Grant G1 is made by A and B (C cut off),
// grant G2 by A and C (B cut off). Taking the largest of the granting
// members' tokens gives G1 101 and G2 12: the token went backwards. With
// fence floors, G1 raised A's counter to 101 before it was returned, so A
// issues G2 102. The same with three redis-servers is in redisstore's
// TestRedlockFenceFloors.
func TestFenceFloorsAcrossMajorities(t *testing.T) {
	for _, tc := range []struct {
		name   string
		floors bool
	}{
		{"fence floors", true},
		{"negative control: members without fence floors", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stores := memstores(3)
			counters(t, stores, "x", 10, 100)
			vs := views(stores, 0)
			ms := members(vs)
			if !tc.floors {
				for i := range ms {
					ms[i] = bare{ms[i]}
				}
			}
			q, err := redlock.New(ms, nil)
			if err != nil {
				t.Fatal(err)
			}
			if q.Floors() != tc.floors {
				t.Fatalf("Floors() = %v, want %v", q.Floors(), tc.floors)
			}
			c := client(t, q, nil)

			g1 := fenceOf(t, c, "x", vs[2]) // on A and B
			g2 := fenceOf(t, c, "x", vs[1]) // on A and C
			t.Logf("G1's token %d, G2's %d", g1, g2)
			if g1 != 101 {
				t.Fatalf("G1's token = %d, want 101 (B's)", g1)
			}
			if tc.floors && g2 <= g1 {
				t.Fatalf("G2's token %d <= G1's %d with fence floors: want it larger", g2, g1)
			}
			if !tc.floors && g2 >= g1 {
				t.Fatalf("G2's token %d >= G1's %d without fence floors: the control should go backwards", g2, g1)
			}
		})
	}
}

// A grant whose fence floor cannot reach a majority is not returned: the
// caller is told the acquire failed, and the lock is left on no member.
func TestFenceFloorNotReachedIsNoGrant(t *testing.T) {
	stores := memstores(3)
	counters(t, stores, "x", 10, 100)
	vs := views(stores, 0)
	vs[2].down.Store(true)    // G on A and B: A issues 11, B 101
	vs[0].noRaise.Store(true) // and A's counter cannot be raised to 101
	c := client(t, quorum(t, vs, nil), nil)
	h, err := c.Mutex("x").TryLock(t.Context())
	vs[2].down.Store(false)
	if err == nil || errors.Is(err, leash.ErrNotAcquired) {
		t.Fatalf("TryLock = %v, %v; want the failed raise reported", h, err)
	}
	t.Logf("TryLock: %v", err)
	for i, s := range stores {
		info, err := s.(*memstore.Store).Inspect(t.Context(), "x")
		if err != nil {
			t.Fatal(err)
		}
		if info.Held {
			t.Errorf("member %d still holds the lock for %v", i, info.Owners)
		}
	}
	// Once the raise goes through, the lock is granted, above B's 101.
	vs[0].noRaise.Store(false)
	if f := fenceOf(t, c, "x", vs[2]); f <= 101 {
		t.Errorf("the next grant's token = %d, want > 101", f)
	}
}

// A raise that fails is made on another member instead: all three granted
// (tokens 11, 101 and 51), A's raise to 101 fails, C's is made, and a later
// grant by A and C is above 101.
func TestFenceFloorFallsBackToAnotherMember(t *testing.T) {
	stores := memstores(3)
	counters(t, stores, "x", 10, 100, 50)
	vs := views(stores, 0)
	c := client(t, quorum(t, vs, nil), nil)
	vs[0].noRaise.Store(true)
	if f := fenceOf(t, c, "x"); f != 101 {
		t.Fatalf("G1's token = %d, want 101 (B's)", f)
	}
	vs[0].noRaise.Store(false)
	if f := fenceOf(t, c, "x", vs[1]); f <= 101 {
		t.Fatalf("G2's token on A and C = %d, want > 101", f)
	}
}

// A grant whose fence floor is reached only after the validity budget is
// spent is not returned: the caller is refused, and the lock is left on no
// member.
func TestFenceFloorPastTheBudgetIsNoGrant(t *testing.T) {
	const lease = 100 * time.Millisecond // budget 97 ms: 1 % + 2 ms of drift
	stores := memstores(3)
	counters(t, stores, "x", 10, 100, 50)
	vs := views(stores, 0)
	for _, v := range vs {
		v.raiseDelay = 2 * lease
	}
	q := quorum(t, vs, &redlock.Options{MemberTimeout: 10 * lease})
	r := driver.Request{Kind: driver.KindMutex, Name: "x", Owner: "owner:1", Lease: lease}
	g, err := q.Acquire(t.Context(), r)
	if err != nil || g.Acquired {
		t.Fatalf("Acquire with a raise past the budget = %+v, %v; want refused", g, err)
	}
	for i, s := range stores {
		info, err := s.(*memstore.Store).Inspect(t.Context(), "x")
		if err != nil {
			t.Fatal(err)
		}
		if info.Held {
			t.Errorf("member %d still holds the lock for %v", i, info.Owners)
		}
	}
}
