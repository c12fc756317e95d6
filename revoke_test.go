package leash_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
)

// A force unlock on a store that revokes tells the holder (ErrRevoked)
// before anyone else is granted the name, and the holder's acknowledgement
// frees it without waiting out the lease.
func TestForceUnlockRevokes(t *testing.T) {
	s := memstore.New()
	holder := newClient(t, s, &leash.Options{Lease: time.Hour})
	defer holder.Close()
	other := newClient(t, s, nil)
	defer other.Close()
	h := mustLock(t, holder.Mutex("job"), context.Background())
	<-leash.RevokesHeard(holder)

	// Whether the holder had been told is read the moment the waiter's Lock
	// returns: comparing two goroutines' clock readings after they wake
	// would measure the scheduler, not the order of events.
	toldFirst := make(chan bool, 1)
	go func() {
		g, err := other.Mutex("job").Lock(context.Background())
		if err != nil {
			t.Errorf("the waiter's Lock: %v", err)
			toldFirst <- false
			return
		}
		select {
		case <-h.Lost():
			toldFirst <- true
		default:
			t.Error("the name was granted before the holder was told")
			toldFirst <- false
		}
		_ = g.Unlock(context.Background())
	}()
	if ok, err := other.ForceUnlock(context.Background(), "job"); err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v; want true, nil", ok, err)
	}
	le := wantLost(t, h, leash.ReasonRevoked)
	if !errors.Is(le, leash.ErrRevoked) || le.Reason.String() != "revoked" {
		t.Errorf("lost error %v: want it to match ErrRevoked and say revoked", le)
	}
	<-toldFirst
	if err := h.Unlock(context.Background()); !errors.Is(err, leash.ErrRevoked) {
		t.Errorf("Unlock of a revoked hold = %v, want ErrRevoked", err)
	}
}

// A holder that does not hear the revocation learns at its next renewal,
// with the same reason, and the tombstone holds the name until then.
func TestRevokeHeardAtRenewal(t *testing.T) {
	s := deafStore{newFaultStore(t)}
	holder := newClient(t, s, &leash.Options{Lease: 3 * time.Second, RenewInterval: 100 * time.Millisecond})
	defer holder.Close()
	h := mustLock(t, holder.Mutex("job"), context.Background())
	if ok, err := s.Revoke(context.Background(), "job"); err != nil || !ok {
		t.Fatalf("Revoke = %v, %v", ok, err)
	}
	if g, err := s.Acquire(context.Background(), driver.Request{Name: "job", Owner: "0b0d0f00-0000-4000-8000-000000000001:1", Lease: time.Second}); err != nil || g.Acquired {
		t.Fatalf("Acquire beside the tombstone = %+v, %v; want refused", g, err)
	}
	wantLost(t, h, leash.ReasonRevoked)
}

// ForceUnlockNow frees the name at once, and the holder is still told at
// once, that its lock was released elsewhere.
func TestForceUnlockNow(t *testing.T) {
	s := memstore.New()
	holder := newClient(t, s, &leash.Options{Lease: time.Hour})
	defer holder.Close()
	h := mustLock(t, holder.Mutex("job"), context.Background())
	<-leash.RevokesHeard(holder)
	if ok, err := holder.ForceUnlockNow(context.Background(), "job"); err != nil || !ok {
		t.Fatalf("ForceUnlockNow = %v, %v", ok, err)
	}
	if heldBy(t, s, "job") != "" {
		t.Error("the name is still held after ForceUnlockNow")
	}
	wantLost(t, h, leash.ReasonReleasedElsewhere)
}

// With LockOptions.AckRevokeOnUnlock, a revoked holder that has been told
// keeps its name from everyone else until it unlocks (its work has
// stopped), not only until it is told; its Unlock then frees the name at
// once. Without the option (the negative control), the Client acknowledges
// as soon as the holder is told.
func TestAckRevokeOnUnlock(t *testing.T) {
	for _, atUnlock := range []bool{true, false} {
		s := memstore.New()
		lost := make(chan struct{}, 1)
		holder := newClient(t, s, &leash.Options{Lease: time.Hour, Observer: leash.ObserverFunc(func(e leash.Event) {
			if e.Op == leash.OpLost {
				lost <- struct{}{}
			}
		})})
		other := newClient(t, s, nil)
		h := mustLock(t, holder.Mutex("job", &leash.LockOptions{AckRevokeOnUnlock: atUnlock}), context.Background())
		<-leash.RevokesHeard(holder)
		if ok, err := other.ForceUnlock(context.Background(), "job"); err != nil || !ok {
			t.Fatalf("ForceUnlock = %v, %v; want true, nil", ok, err)
		}
		wantLost(t, h, leash.ReasonRevoked)
		<-lost                 // the holder was told; an acknowledgement at once is on its way by now
		leash.WaitAcks(holder) // and has arrived
		_, err := other.Mutex("job").TryLock(context.Background())
		switch {
		case atUnlock && !errors.Is(err, leash.ErrNotAcquired):
			t.Fatalf("AckRevokeOnUnlock: another client's TryLock after the holder was told, before its Unlock = %v; want ErrNotAcquired", err)
		case !atUnlock && err != nil:
			t.Fatalf("without AckRevokeOnUnlock: TryLock after the holder was told = %v; want the lock", err)
		case !atUnlock:
			holder.Close()
			other.Close()
			continue
		}
		if err := h.Unlock(context.Background()); !errors.Is(err, leash.ErrRevoked) {
			t.Errorf("Unlock of a revoked hold = %v, want ErrRevoked", err)
		}
		leash.WaitAcks(holder)
		g, err := other.Mutex("job").TryLock(context.Background())
		if err != nil {
			t.Fatalf("TryLock after the revoked holder's Unlock = %v; want the lock", err)
		}
		_ = g.Unlock(context.Background())
		holder.Close()
		other.Close()
	}
}

// deafRevoker is a memstore whose revocations are never heard on the
// channel: a Client learns of them only from a renewal.
type deafRevoker struct{ *memstore.Store }

func (deafRevoker) WatchRevokes(context.Context, string, func(driver.Revocation)) (func(), error) {
	return func() {}, nil
}

// A revocation learnt only by UnlockAfter's renewal (the holder never heard
// it) is acknowledged there: the holder is done with the lock, and the name
// is free at once rather than when the revoked lease runs out.
func TestUnlockAfterAcknowledgesARevocation(t *testing.T) {
	s := deafRevoker{memstore.New()}
	holder := newClient(t, s, &leash.Options{Lease: time.Hour})
	defer holder.Close()
	other := newClient(t, s, nil)
	defer other.Close()
	h := mustLock(t, holder.Mutex("job"), context.Background())
	if ok, err := other.ForceUnlock(context.Background(), "job"); err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v; want true, nil", ok, err)
	}
	if err := h.UnlockAfter(context.Background(), time.Minute); !errors.Is(err, leash.ErrRevoked) {
		t.Fatalf("UnlockAfter of a revoked hold = %v, want ErrRevoked", err)
	}
	leash.WaitAcks(holder)
	g, err := other.Mutex("job").TryLock(context.Background())
	if err != nil {
		t.Fatalf("TryLock after the revoked holder's UnlockAfter = %v; want the lock (acknowledged)", err)
	}
	_ = g.Unlock(context.Background())
}

// An Unlock that finds its lock revoked before the holder heard of it (the
// message lost, or still on its way) acknowledges the revocation: the
// holder is done with the lock, and the name is free at once rather than
// when the revoked lease runs out (an hour here), with or without
// AckRevokeOnUnlock.
func TestUnlockAcknowledgesAnUnheardRevocation(t *testing.T) {
	for _, atUnlock := range []bool{true, false} {
		s := deafRevoker{memstore.New()}
		holder := newClient(t, s, &leash.Options{Lease: time.Hour})
		other := newClient(t, s, nil)
		h := mustLock(t, holder.Mutex("job", &leash.LockOptions{AckRevokeOnUnlock: atUnlock}), context.Background())
		if ok, err := other.ForceUnlock(context.Background(), "job"); err != nil || !ok {
			t.Fatalf("ForceUnlock = %v, %v; want true, nil", ok, err)
		}
		var le *leash.LostError
		if err := h.Unlock(context.Background()); !errors.As(err, &le) || le.Reason != leash.ReasonReleasedElsewhere {
			t.Errorf("AckRevokeOnUnlock %v: Unlock of a hold revoked unheard = %v; want a LostError, released elsewhere", atUnlock, err)
		}
		leash.WaitAcks(holder)
		g, err := other.Mutex("job").TryLock(context.Background())
		if err != nil {
			t.Fatalf("AckRevokeOnUnlock %v: TryLock after the revoked holder's Unlock = %v; want the lock (acknowledged)", atUnlock, err)
		}
		_ = g.Unlock(context.Background())
		holder.Close()
		other.Close()
	}
}

// Close ends every hold, so it acknowledges the revocations it finds: one
// the Client never heard of (its release finds the lock revoked), and one it
// heard of for a hold that acknowledges at its Unlock (AckRevokeOnUnlock)
// and was never unlocked. The name is free once Close has returned, rather
// than when the revoked lease runs out (an hour here).
func TestCloseAcknowledgesRevocations(t *testing.T) {
	for _, heard := range []bool{false, true} {
		var s driver.Store = deafRevoker{memstore.New()}
		if heard {
			s = memstore.New()
		}
		holder := newClient(t, s, &leash.Options{Lease: time.Hour})
		other := newClient(t, s, nil)
		h := mustLock(t, holder.Mutex("job", &leash.LockOptions{AckRevokeOnUnlock: true}), context.Background())
		if heard {
			<-leash.RevokesHeard(holder)
		}
		if ok, err := other.ForceUnlock(context.Background(), "job"); err != nil || !ok {
			t.Fatalf("ForceUnlock = %v, %v; want true, nil", ok, err)
		}
		if heard {
			wantLost(t, h, leash.ReasonRevoked)
		}
		holder.Close()
		g, err := other.Mutex("job").TryLock(context.Background())
		if err != nil {
			t.Fatalf("revocation heard %v: TryLock after the revoked holder's Client closed = %v; want the lock (acknowledged)", heard, err)
		}
		_ = g.Unlock(context.Background())
		other.Close()
	}
}

// A revoked AckRevokeOnUnlock hold unlocked as soon as its Lost fires is
// forgotten by its Client: none is left for Close to acknowledge, however
// the Unlock races the rest of the loss (the record was once made after Lost
// closed, and an Unlock woken by it could clear it first).
func TestUnlockAtLostLeavesNothingUnacked(t *testing.T) {
	s := memstore.New()
	holder := newClient(t, s, &leash.Options{Lease: time.Hour})
	defer holder.Close()
	other := newClient(t, s, nil)
	defer other.Close()
	for i := range 200 {
		h := mustLock(t, holder.Mutex("job", &leash.LockOptions{AckRevokeOnUnlock: true}), context.Background())
		<-leash.RevokesHeard(holder)
		if ok, err := other.ForceUnlock(context.Background(), "job"); err != nil || !ok {
			t.Fatalf("round %d: ForceUnlock = %v, %v; want true, nil", i, ok, err)
		}
		<-h.Lost()
		_ = h.Unlock(context.Background())
		leash.WaitAcks(holder)
		if n := leash.Unacked(holder); n != 0 {
			t.Fatalf("round %d: %d revoked holds left waiting for an Unlock that happened", i, n)
		}
	}
}
