package redlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/redlock"
)

// Release succeeds only when a majority released the lock; when every
// member answered and fewer released it, the lock was lost on the others
// and Release says it was not held (after releasing it where it was). A
// member that does not answer makes the outcome unknown, whatever the
// others say.
func TestReleaseNeedsMajority(t *testing.T) {
	const (
		mine  = "holder:1"
		other = "other:1"
	)
	for _, tc := range []struct {
		name  string
		held  []string // who holds the lock on each member ("": no one)
		cut   int      // a member cut off (-1: none)
		check func(error) bool
		want  string
	}{
		{"held on all three", []string{mine, mine, mine}, -1, isNil, "nil"},
		{"held on two, free on one", []string{mine, mine, ""}, -1, isNil, "nil"},
		{"held on two, another's on one", []string{mine, other, mine}, -1, isNil, "nil"},
		{"held on one, free on two", []string{"", mine, ""}, -1, isNotHeld, "ErrNotHeld"},
		{"held on one, another's on two", []string{other, other, mine}, -1, isNotHeld, "ErrNotHeld"},
		{"held nowhere", []string{"", other, ""}, -1, isNotHeld, "ErrNotHeld"},
		{"released on one, free on one, one cut off", []string{mine, "", mine}, 2, isUnknown, "an unknown outcome"},
		{"released on two, one cut off", []string{mine, mine, mine}, 2, isUnknown, "an unknown outcome"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			stores := memstores(3)
			vs := views(stores, 0)
			q := quorum(t, vs, &redlock.Options{MemberTimeout: time.Second})
			for i, o := range tc.held {
				if o == "" {
					continue
				}
				if g, err := stores[i].Acquire(ctx, mutexReq("x", o)); err != nil || !g.Acquired {
					t.Fatalf("Acquire on member %d = %+v, %v", i, g, err)
				}
			}
			if tc.cut >= 0 {
				vs[tc.cut].down.Store(true)
			}
			err := q.Release(ctx, mutexReq("x", mine))
			if !tc.check(err) {
				t.Fatalf("Release = %v, want %s", err, tc.want)
			}
			for i, o := range holders(t, stores, "x") {
				if o == mine && i != tc.cut {
					t.Errorf("member %d still held by the releasing owner after Release", i)
				}
			}
		})
	}
}

func isNil(err error) bool     { return err == nil }
func isNotHeld(err error) bool { return errors.Is(err, driver.ErrNotHeld) }
func isUnknown(err error) bool { return err != nil && !errors.Is(err, driver.ErrNotHeld) }

// An operator's force release reached members 0 and 1 but not member 2 (cut
// off then: ForceUnlock returns an error, "run it again"), and another
// client took the lock on members 0 and 1. The first holder's Unlock, before
// its next renewal, releases the lock on member 2 alone: it must be told
// that the lock was lost meanwhile, as it is on a single store
// (ReasonReleasedElsewhere). The negative control: a force release that
// reached member 2 alone leaves the holder a majority, and Unlock succeeds.
func TestUnlockAfterLossOnMajority(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forced []int // members the force release reached
		lost   bool
	}{
		{"released on a minority: lost, released elsewhere", []int{0, 1}, true},
		{"negative control: released on a majority: success", []int{2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			stores := memstores(3)
			va, vb := views(stores, 0), views(stores, 0)
			opts := &leash.Options{Lease: 30 * time.Second}
			a := client(t, quorum(t, va, nil), opts)
			b := client(t, quorum(t, vb, nil), opts)
			ha, err := a.Mutex("x").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range tc.forced {
				if ok, err := stores[i].(driver.Admin).ForceRelease(ctx, "x"); !ok || err != nil {
					t.Fatalf("ForceRelease on member %d = %v, %v", i, ok, err)
				}
			}
			if tc.lost {
				vb[2].down.Store(true)
				hb, err := b.Mutex("x").TryLock(ctx)
				if err != nil {
					t.Fatalf("B's TryLock on members 0 and 1: %v", err)
				}
				defer hb.Unlock(ctx)
			}
			err = ha.Unlock(ctx)
			var le *leash.LostError
			switch {
			case !tc.lost && err != nil:
				t.Fatalf("A's Unlock with a majority still held = %v, want nil", err)
			case tc.lost && (!errors.As(err, &le) || le.Reason != leash.ReasonReleasedElsewhere):
				t.Fatalf("A's Unlock while B holds members 0 and 1 = %v; want a *LostError, released elsewhere", err)
			}
			if got := holders(t, stores, "x"); slices.Contains(got, ha.Owner()) {
				t.Errorf("holders after A's Unlock: %q; A's copy must be released", got)
			}
		})
	}
}

// userData is a member that holds something other than a lock under every
// name: its ForceRelease refuses, touching nothing.
type userData struct{ *memstore.Store }

func (u userData) ForceRelease(_ context.Context, name string) (bool, error) {
	return false, &driver.NotALockError{Name: name, Found: "a string"}
}

// TestForceReleaseReportsWhatOthersDid: when one member holds the user's
// data under the name, ForceRelease says so (ErrNotALock), and still
// reports that it force-released the lock on the other members.
func TestForceReleaseReportsWhatOthersDid(t *testing.T) {
	ctx := t.Context()
	ms := []*memstore.Store{memstore.New(), memstore.New()}
	q, err := redlock.New([]driver.Store{ms[0], ms[1], userData{memstore.New()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := driver.Request{Name: "x", Owner: "holder:1", Lease: time.Minute}
	for _, m := range ms {
		if g, err := m.Acquire(ctx, req); err != nil || !g.Acquired {
			t.Fatalf("Acquire on a member = %+v, %v", g, err)
		}
	}
	found, err := q.ForceRelease(ctx, "x")
	if !errors.Is(err, driver.ErrNotALock) || !found {
		t.Errorf("ForceRelease = %v, %v; want true (two members held the lock) and ErrNotALock", found, err)
	}
	for i, m := range ms {
		if info, err := m.Inspect(ctx, "x"); err != nil || info.Held {
			t.Errorf("member %d after ForceRelease: %+v, %v; want free", i, info, err)
		}
	}
}
