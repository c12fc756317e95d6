package redlock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/redlock"
)

// An acquire cancelled by its caller after one member granted it, while the
// others had not answered, gives that partial grant back: the release does
// not stop with the caller's context, or the member would stay held for a
// lease.
func TestAcquireCancelledReleasesPartialGrant(t *testing.T) {
	stores := memstores(3)
	gs := gates(stores)
	q, err := redlock.New(members(gs), &redlock.Options{MemberTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	gs[1].acquire.shut.Store(true)
	gs[2].acquire.shut.Store(true)
	ctx, cancel := context.WithCancel(t.Context())
	type result struct {
		g   driver.Grant
		err error
	}
	got := make(chan result, 1)
	go func() { // Owner: this test; ends when the cancelled Acquire returns
		g, err := q.Acquire(ctx, mutexReq("x", "holder:1"))
		got <- result{g, err}
	}()
	<-gs[0].acquired // member 0 granted it
	<-gs[1].acquire.arrived
	<-gs[2].acquire.arrived
	cancel()
	if r := <-got; r.g.Acquired {
		t.Fatalf("cancelled Acquire = %+v, %v; want not granted", r.g, r.err)
	}
	if h := holders(t, stores, "x"); !slices.Equal(h, []string{"", "", ""}) {
		t.Fatalf("holders after the cancelled Acquire: %q, want none (member 0's grant given back)", h)
	}
}

// Grants that arrive after the validity budget (lease − drift allowance)
// are not a grant: the lock may already have run out on the members by the
// holder's clock; the partial grants are given back. The members' answers
// are made late by the clock the acquire reads (LateAnswers): a member
// that answers after the member timeout counts as a refusal, so only
// answers that the client counts just in time, then finds late (a process
// paused between the two), come this far. The negative control: the same
// answers within the budget are a grant. The members are not fence
// raisers, so no raise follows the grant (the check after a raise is
// TestFenceFloorPastTheBudgetIsNoGrant's).
func TestAcquirePastTheBudgetIsNoGrant(t *testing.T) {
	const lease = 2 * time.Second // a budget of 1.978s
	for _, tc := range []struct {
		name    string
		late    time.Duration
		granted bool
	}{
		{"answers after the budget", lease, false},
		{"negative control: answers within the budget", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			stores := memstores(3)
			q, err := redlock.New(members(gates(stores)), nil)
			if err != nil {
				t.Fatal(err)
			}
			redlock.LateAnswers(q, tc.late)
			req := mutexReq("x", "holder:1")
			req.Lease = lease
			g, err := q.Acquire(ctx, req)
			if err != nil || g.Acquired != tc.granted {
				t.Fatalf("Acquire = %+v, %v; want granted %v", g, err, tc.granted)
			}
			want := []string{"", "", ""}
			if tc.granted {
				want = []string{req.Owner, req.Owner, req.Owner}
			}
			if h := holders(t, stores, "x"); !slices.Equal(h, want) {
				t.Fatalf("holders after the Acquire: %q, want %q", h, want)
			}
		})
	}
}
