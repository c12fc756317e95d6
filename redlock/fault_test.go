package redlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/redlock"
)

// view is one client's way to a member store: it can be cut off (every call
// fails at once), hang (every call waits for its context), or see a member
// whose clock runs fast (leases end early by the client's clock, emulated by
// sending a shorter lease: Redis's clock cannot be sped up in a test).
type view struct {
	s    driver.Store
	down atomic.Bool
	hang atomic.Bool
	// noRaise makes RaiseFence fail while the other calls go through.
	noRaise atomic.Bool
	fast    float64
	// raiseDelay delays each RaiseFence: a member slow to raise.
	raiseDelay time.Duration
	// acquires counts the Acquire calls made through the view.
	acquires atomic.Int64 // fraction by which the member's clock runs ahead
}

var errCut = errors.New("test: member cut off")

func (v *view) fault(ctx context.Context) error {
	switch {
	case v.down.Load():
		return errCut
	case v.hang.Load():
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (v *view) lease(r driver.Request) driver.Request {
	r.Lease = time.Duration(float64(r.Lease) * (1 - v.fast))
	return r
}

func (v *view) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	v.acquires.Add(1)
	if err := v.fault(ctx); err != nil {
		return driver.Grant{}, err
	}
	return v.s.Acquire(ctx, v.lease(r))
}

func (v *view) Renew(ctx context.Context, rs []driver.Request) []driver.RenewResult {
	if err := v.fault(ctx); err != nil {
		out := make([]driver.RenewResult, len(rs))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	short := make([]driver.Request, len(rs))
	for i, r := range rs {
		short[i] = v.lease(r)
	}
	return v.s.Renew(ctx, short)
}

func (v *view) Release(ctx context.Context, r driver.Request) error {
	if err := v.fault(ctx); err != nil {
		return err
	}
	return v.s.Release(ctx, r)
}

// RaiseFence raises the member's fencing counter (a view is a
// driver.FenceRaiser, as every member store here is), unless the view is
// cut off, or noRaise cuts off the raises alone.
func (v *view) RaiseFence(ctx context.Context, name string, floor int64) error {
	if err := v.fault(ctx); err != nil {
		return err
	}
	if v.noRaise.Load() {
		return errCut
	}
	if v.raiseDelay > 0 {
		t := time.NewTimer(v.raiseDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return v.s.(driver.FenceRaiser).RaiseFence(ctx, name, floor)
}

// A door holds calls on their way to a member while it is shut (a request
// delayed in the network): arrived is closed when the first call reaches
// the shut door, and every call waits there until open, or until its
// context is done.
type door struct {
	shut    atomic.Bool
	arrived chan struct{}
	opened  chan struct{}
	once    sync.Once
}

func newDoor() *door { return &door{arrived: make(chan struct{}), opened: make(chan struct{})} }

func (d *door) pass(ctx context.Context) error {
	if !d.shut.Load() {
		return nil
	}
	d.once.Do(func() { close(d.arrived) })
	select {
	case <-d.opened:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *door) open() { close(d.opened) }

// gate is a member whose Renew and Acquire calls can be held at a door,
// and which tells when each has been answered (on renewed and acquired,
// when there is room) and counts its Acquire calls. It is not a driver.FenceRaiser, so a quorum over
// gates grants without raising fence floors.
type gate struct {
	driver.Store
	renew, acquire    *door
	renewed, acquired chan struct{}
	acquires          atomic.Int64 // Acquire calls made
}

func gates(stores []driver.Store) []*gate {
	gs := make([]*gate, len(stores))
	for i, s := range stores {
		gs[i] = &gate{Store: s, renew: newDoor(), acquire: newDoor(), renewed: make(chan struct{}, 16), acquired: make(chan struct{}, 16)}
	}
	return gs
}

func (g *gate) Renew(ctx context.Context, rs []driver.Request) []driver.RenewResult {
	var out []driver.RenewResult
	if err := g.renew.pass(ctx); err != nil {
		out = make([]driver.RenewResult, len(rs))
		for i := range out {
			out[i].Err = err
		}
	} else {
		out = g.Store.Renew(ctx, rs)
	}
	select {
	case g.renewed <- struct{}{}:
	default:
	}
	return out
}

func (g *gate) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	g.acquires.Add(1)
	var (
		gr  driver.Grant
		err = g.acquire.pass(ctx)
	)
	if err == nil {
		gr, err = g.Store.Acquire(ctx, r)
	}
	select {
	case g.acquired <- struct{}{}:
	default:
	}
	return gr, err
}

// holders returns who holds name on each member store ("" where no one
// does).
func holders(t *testing.T, stores []driver.Store, name string) []string {
	t.Helper()
	out := make([]string, len(stores))
	for i, s := range stores {
		info, err := s.(driver.Admin).Inspect(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Held && len(info.Owners) > 0 {
			out[i] = info.Owners[0].Owner
		}
	}
	return out
}

// views returns one view per store, for one client.
func views(stores []driver.Store, fast float64) []*view {
	vs := make([]*view, len(stores))
	for i, s := range stores {
		vs[i] = &view{s: s, fast: fast}
	}
	return vs
}

// members returns the stores of vs (views or gates) as Redlock members.
func members[S driver.Store](vs []S) []driver.Store {
	out := make([]driver.Store, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

func memstores(n int) []driver.Store {
	out := make([]driver.Store, n)
	for i := range out {
		out[i] = memstore.New()
	}
	return out
}

func client(t *testing.T, s driver.Store, opts *leash.Options) *leash.Client {
	t.Helper()
	c, err := leash.New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func quorum(t *testing.T, vs []*view, opts *redlock.Options) *redlock.Store {
	t.Helper()
	q, err := redlock.New(members(vs), opts)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Two clients, each cut off from a different member. A majority of three
// lets only one of them hold the lock; a "majority" of one of two members
// (what New refuses) lets both.
func TestPartitionedClients(t *testing.T) {
	ctx := t.Context()
	t.Run("3 members: one holder", func(t *testing.T) {
		stores := memstores(3)
		va, vb := views(stores, 0), views(stores, 0)
		va[2].down.Store(true)
		vb[0].down.Store(true)
		a := client(t, quorum(t, va, nil), nil)
		b := client(t, quorum(t, vb, nil), nil)
		if _, err := a.Mutex("x").TryLock(ctx); err != nil {
			t.Fatalf("A's TryLock on members 0 and 1: %v", err)
		}
		if h, err := b.Mutex("x").TryLock(ctx); !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("B's TryLock on members 1 and 2 = %v, %v; want ErrNotAcquired while A holds", h, err)
		}
	})
	t.Run("negative control: 1 of 2 members, two holders", func(t *testing.T) {
		stores := memstores(2)
		if _, err := redlock.New(stores, nil); !errors.Is(err, leash.ErrInvalidArgument) {
			t.Fatalf("New(2 members) = %v, want ErrInvalidArgument", err)
		}
		va, vb := views(stores, 0), views(stores, 0)
		va[1].down.Store(true)
		vb[0].down.Store(true)
		a := client(t, redlock.NewUnsafe(members(va), 1), nil)
		b := client(t, redlock.NewUnsafe(members(vb), 1), nil)
		ha, err := a.Mutex("x").TryLock(ctx)
		if err != nil {
			t.Fatalf("A's TryLock: %v", err)
		}
		hb, err := b.Mutex("x").TryLock(ctx)
		if err != nil {
			t.Fatalf("B's TryLock: %v; want the double grant a 1-of-2 quorum gives", err)
		}
		if ha.Err() != nil || hb.Err() != nil {
			t.Fatalf("holders' errors %v, %v; want both holding", ha.Err(), hb.Err())
		}
	})
}

// Members whose clocks run 30% fast end a lease at 70% of it by the
// client's clock. With a drift allowance that covers it (35%), the holder
// is told it lost the lock before another client can take it; without one
// (and with the core's margin set to 1ms), the next holder is granted the
// lock while the first still believes it holds it.
func TestDriftAllowance(t *testing.T) {
	const lease = 2 * time.Second
	for _, tc := range []struct {
		name    string
		opts    *redlock.Options
		margin  time.Duration
		overlap bool
	}{
		{"an allowance covering the drift", &redlock.Options{DriftFactor: 0.35}, time.Millisecond, false},
		{"negative control: no allowance", &redlock.Options{DriftFactor: redlock.NoDrift}, time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stores := memstores(3)
			opts := &leash.Options{Lease: lease, RenewInterval: leash.NoRenewal, SafetyMargin: tc.margin}
			a := client(t, quorum(t, views(stores, 0.3), tc.opts), opts)
			b := client(t, quorum(t, views(stores, 0.3), tc.opts), opts)
			ha, err := a.Mutex("x").Lock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			hb, err := b.Mutex("x").Lock(t.Context()) // granted once the members let A's lease go
			if err != nil {
				t.Fatal(err)
			}
			defer hb.Unlock(t.Context())
			stillA := ha.Err() == nil
			if stillA != tc.overlap {
				t.Fatalf("when B was granted, A still believed it held the lock: %v; want %v", stillA, tc.overlap)
			}
		})
	}
}

// A member that never answers counts as a refusal after the member
// timeout: the lock is granted by the other two, renewed by them, and
// released.
func TestHungMember(t *testing.T) {
	stores := memstores(3)
	vs := views(stores, 0)
	vs[1].hang.Store(true)
	q := quorum(t, vs, &redlock.Options{MemberTimeout: 50 * time.Millisecond})
	c := client(t, q, &leash.Options{Lease: 600 * time.Millisecond})
	h, err := c.Mutex("x").Lock(t.Context())
	if err != nil {
		t.Fatalf("Lock with one member hung: %v", err)
	}
	res := q.Renew(t.Context(), []driver.Request{{Name: "x", Owner: h.Owner(), Lease: time.Second}})
	if res[0].Err != nil || res[0].Status != driver.Renewed {
		t.Fatalf("Renew with one member hung = %+v, want Renewed", res[0])
	}
	err = h.Unlock(t.Context())
	if err == nil || errors.Is(err, leash.ErrNotHeld) {
		t.Fatalf("Unlock with one member hung = %v, want an unknown-outcome error", err)
	}
	for i, s := range []driver.Store{stores[0], stores[2]} {
		if g, err := s.Acquire(t.Context(), driver.Request{Name: "x", Owner: "00000000-0000-4000-8000-000000000000:1", Lease: time.Second}); err != nil || !g.Acquired {
			t.Errorf("member %d after Unlock: %+v, %v; want free", i, g, err)
		}
	}
}

// Renewal reaching less than a majority: the hold is told, with the
// reason, before its validity ends.
func TestRenewalLosesMajority(t *testing.T) {
	stores := memstores(3)
	vs := views(stores, 0)
	c := client(t, quorum(t, vs, nil), &leash.Options{Lease: 600 * time.Millisecond})
	h, err := c.Mutex("x").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	vs[0].down.Store(true)
	vs[1].down.Store(true)
	<-h.Lost()
	var le *leash.LostError
	if !errors.As(h.Err(), &le) || le.Reason != leash.ReasonUnreachable {
		t.Fatalf("loss = %v, want ReasonUnreachable", h.Err())
	}
	// Member 2 still has the lock, and it is the holder's: nobody else can
	// have a majority before the lease ends on members 0 and 1.
	h2, err := client(t, quorum(t, views(stores, 0), nil), nil).Mutex("x").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h2.Fence() <= h.Fence() {
		t.Errorf("next fence %d, want > %d", h2.Fence(), h.Fence())
	}
}

// Members that send no release notifications: Watch says so, and a waiting
// Lock polls instead, taking the lock when the holder releases it.
func TestWatchNeedsWatchers(t *testing.T) {
	q := quorum(t, views(memstores(3), 0), nil) // views are not Watchers
	if _, err := q.Watch(t.Context(), driver.KindMutex, "x", func(driver.Wake) {}); err == nil {
		t.Fatal("Watch over members without notifications = nil error, want one")
	}
	c := client(t, q, &leash.Options{Lease: 5 * time.Second})
	h, err := c.Mutex("x").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { // Owner: this test; ends when the Lock returns
		h2, err := c.Mutex("x").Lock(context.WithoutCancel(t.Context()))
		if err == nil {
			err = h2.Unlock(t.Context())
		}
		got <- err
	}()
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting Lock after the release: %v", err)
	}
}
