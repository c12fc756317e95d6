package redlock_test

import (
	"slices"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/redlock"
)

// A renewal round in flight when the holder unlocks (the core does not wait
// for it): it renews members 0 and 1 before the release, and member 2,
// which lost the lock, answers that it is gone. A majority renewed, so the
// round asks member 2 to take the lock again; it must not once the lock's
// release has begun, whether the release frees member 2 before the round's
// renewal gets there or begins while the round's acquire is on its way.
// The negative control, without an unlock, shows the same round taking the
// lock again on member 2 (the rejoin the fix must keep).
func TestRenewalInFlightDuringUnlock(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lost makes member 2 lose the lock before the round, else the
		// release frees it before the round's renewal gets there.
		lost bool
		// unlock: the holder unlocks during the round.
		unlock bool
		want   []bool // held on each member when the round is over
		// rejoins is how many times the round asks member 2 for the lock.
		rejoins int64
	}{
		{"member 2 renewed after the release: not taken again", false, true, []bool{false, false, false}, 0},
		{"release begins while member 2 takes the lock again: given back", true, true, []bool{false, false, false}, 1},
		{"negative control: no unlock: member 2 takes the lock again", true, false, []bool{true, true, true}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			stores := memstores(3)
			gs := gates(stores)
			q, err := redlock.New(members(gs), &redlock.Options{MemberTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			c := client(t, q, &leash.Options{Lease: 30 * time.Second, RenewInterval: leash.NoRenewal})
			h, err := c.Mutex("x").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Member 2 is reached late: by the round's renewal, or, when
			// it lost the lock, by the acquire that takes it again.
			d := gs[2].renew
			if tc.lost {
				if ok, err := stores[2].(driver.Admin).ForceRelease(ctx, "x"); !ok || err != nil {
					t.Fatalf("ForceRelease on member 2 = %v, %v", ok, err)
				}
				d = gs[2].acquire
			}
			d.shut.Store(true)
			acquires := gs[2].acquires.Load()
			renewed := make(chan driver.RenewResult, 1)
			go func() { // Owner: this test; ends when the round does (the member timeout bounds it)
				renewed <- q.Renew(ctx, []driver.Request{{Kind: driver.KindMutex, Name: "x", Owner: h.Owner(), Lease: 30 * time.Second}})[0]
			}()
			<-d.arrived
			<-gs[0].renewed
			<-gs[1].renewed
			if tc.unlock {
				if err := h.Unlock(ctx); err != nil {
					t.Fatalf("Unlock during the round: %v", err)
				}
			}
			d.open()
			if r := <-renewed; r.Err != nil || r.Status != driver.Renewed {
				t.Fatalf("the round's result = %+v, want Renewed (a majority renewed before the release)", r)
			}
			if n := gs[2].acquires.Load() - acquires; n != tc.rejoins {
				t.Errorf("the round asked member 2 for the lock %d times, want %d", n, tc.rejoins)
			}
			owners := holders(t, stores, "x")
			got := make([]bool, len(owners))
			for i, o := range owners {
				got[i] = o != ""
				if got[i] && o != h.Owner() {
					t.Errorf("member %d held by %q, want the holder %q or no one", i, o, h.Owner())
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("held on the members after the round: %v, want %v", got, tc.want)
			}
			if n := redlock.Marked(q); n != 0 {
				t.Errorf("%d locks still marked as being released after the round, want none", n)
			}
			if !tc.unlock {
				if err := h.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A renewal that finds the lock gone on a majority (two members force-
// released it) reports it gone, and gives it back on the member that still
// renewed it, so that no stray copy holds that member for a lease.
func TestRenewalLostOnMajorityGivesBackTheRest(t *testing.T) {
	ctx := t.Context()
	q, stores := newQuorum(t, 3, nil)
	req := mutexReq("x", "holder:1")
	if g, err := q.Acquire(ctx, req); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	for _, m := range stores[:2] {
		if ok, err := m.(driver.Admin).ForceRelease(ctx, "x"); !ok || err != nil {
			t.Fatalf("ForceRelease = %v, %v", ok, err)
		}
	}
	if r := q.Renew(ctx, []driver.Request{req})[0]; r.Err != nil || r.Status != driver.RenewGone {
		t.Fatalf("Renew = %+v, want RenewGone", r)
	}
	if got := holders(t, stores, "x"); !slices.Equal(got, []string{"", "", ""}) {
		t.Fatalf("holders after the lost renewal: %q, want none (member 2's copy given back)", got)
	}
}
