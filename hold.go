package leash

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/leash-go/leash/driver"
)

// holdCtx is a hold's context, made by its first Context call. Its Err
// checks the validity deadline first, so that code asking "may I still
// write?" gets a fresh answer even when the scheduler has not run yet (a
// process resuming from SIGSTOP).
type holdCtx struct {
	context.Context // context.WithCancelCause(&values)
	values          holdValues
	cancel          context.CancelCauseFunc
}

func (c *holdCtx) Err() error {
	c.values.t.check()
	return c.Context.Err()
}

func (c *holdCtx) String() string { return fmt.Sprintf("leash.Hold(%q).Context", c.values.t.name()) }

// holdValues is what a hold's context derives from: the values of the
// Lock call's context without its cancellation (as context.WithoutCancel),
// and itself under holdsKey, by which a Lock with the hold's context finds
// the tenure to re-enter (see tenureIn).
type holdValues struct {
	base context.Context
	t    *tenure
}

func (v *holdValues) Deadline() (time.Time, bool) { return time.Time{}, false }
func (v *holdValues) Done() <-chan struct{}       { return nil }
func (v *holdValues) Err() error                  { return nil }

func (v *holdValues) Value(key any) any {
	if _, ok := key.(holdsKey); ok {
		return v
	}
	return v.base.Value(key)
}

// How a hold ended, recorded under its tenure's mutex when Unlock (or
// UnlockAfter) takes the hold off its tenure.
const (
	holdEndReleased uint8 = iota + 1 // before the tenure was lost
	holdEndLost                      // after it was lost
)

// Hold is a held lock, returned by Lock, TryLock and the other acquiring
// methods. Each successful call returns its own Hold, re-entries included;
// release it with Unlock exactly once. A Hold is safe for concurrent use by
// multiple goroutines.
//
// A Hold does NOT guarantee that no one else holds the lock: a lease can
// always be lost to a pause or a partition longer than the lease. What leash
// guarantees is that the holder is told: when the lock is lost, the hold's
// Context is cancelled, Lost is closed and Err returns a [*LostError] saying
// why — by the local validity deadline, before the server can grant the lock
// to anyone else. Check Err (or Context().Err()) right before each protected
// write, and pass Fence to the resource so that it can reject a stale holder.
type Hold struct {
	t     *tenure
	base  context.Context         // the Lock call's context, whose values the hold's context keeps
	ctx   atomic.Pointer[holdCtx] // made by the first Context call, under t.mu
	next  *Hold                   // the next hold in t.ctxs, under t.mu
	done  atomic.Bool             // Unlock was called
	ended uint8                   // a holdEnd once Unlock took the hold off t, under t.mu
}

// Name returns the lock name (for a MultiLock hold, its first name).
func (h *Hold) Name() string { return h.t.name() }

// Names returns the names the hold covers: one, except for a MultiLock hold.
func (h *Hold) Names() []string {
	names := make([]string, len(h.t.parts))
	for i, p := range h.t.parts {
		names[i] = p.name
	}
	return names
}

// Kind returns the kind of lock held.
func (h *Hold) Kind() driver.Kind { return h.t.kind }

// Fence returns the tenure's fencing token: strictly greater than the token
// of every earlier grant of this lock name, and the same for every re-entry.
// Give it to the protected resource with each write, and have the resource
// reject tokens lower than the highest it has seen. For a MultiLock hold it
// is the highest of its names' tokens; see FenceOf.
func (h *Hold) Fence() int64 { return h.t.fence() }

// FenceOf returns the fencing token of one of the hold's names, or 0 if the
// hold does not cover name.
func (h *Hold) FenceOf(name string) int64 {
	for _, p := range h.t.parts {
		if p.name == name {
			return p.fence
		}
	}
	return 0
}

// Owner returns the owner string the store records for this hold:
// "<client-id>:<n>", or "<client-id>:<n>@<owner>" for an owner set with
// WithOwner. n is unique to the tenure (Lock to last Unlock).
func (h *Hold) Owner() string { return h.t.owner }

// Context returns a context that is cancelled when the lock is lost (its
// cause is a *LostError) or when this hold is unlocked (its cause is
// ErrReleased). It carries the values of the context given to Lock, and
// Lock called with it (or a context derived from it) re-enters this lock.
func (h *Hold) Context() context.Context {
	if c := h.ctx.Load(); c != nil {
		return c
	}
	// Made on demand: most holds never need one, and a context costs more
	// than the rest of the hold.
	t := h.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := h.ctx.Load(); c != nil {
		return c
	}
	c := &holdCtx{values: holdValues{base: h.base, t: t}}
	c.Context, c.cancel = context.WithCancelCause(&c.values)
	switch {
	case h.ended == holdEndReleased:
		c.cancel(ErrReleased)
	case t.lostErr != nil:
		c.cancel(t.lostErr)
	default:
		// Live, or being unlocked: end unlinks and cancels it.
		h.next, t.ctxs = t.ctxs, h
	}
	h.ctx.Store(c)
	return c
}

// Lost returns a channel that is closed when the lock is lost. It is not
// closed by Unlock; to wait for either, use Context().Done().
func (h *Hold) Lost() <-chan struct{} {
	t := h.t
	t.check()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lostCh == nil {
		if t.state == stateLost {
			t.lostCh = closedChan
		} else {
			t.lostCh = make(chan struct{})
		}
	}
	return t.lostCh
}

// Err returns nil while the lock is held, a *LostError once it is lost, and
// ErrReleased after this hold's Unlock. It checks the validity deadline
// itself, so it is the right call right before a protected write.
func (h *Hold) Err() error {
	t := h.t
	t.check()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lostErr != nil {
		return t.lostErr
	}
	if h.done.Load() {
		return ErrReleased
	}
	return nil
}

// ValidUntil returns the local validity deadline: the hold is safe to use
// until then, unless renewed. It moves forward with each renewal.
func (h *Hold) ValidUntil() time.Time {
	return h.t.c.epoch.Add(time.Duration(h.t.validUntil.Load()))
}

// Touch tells the watchdog that the holder is alive. It matters only when
// liveness checks are on (Options.Liveness): a holder that stops touching its
// hold for longer than Liveness is told it lost the lock (ReasonStalled) and
// the watchdog stops renewing it. Touch is cheap: one atomic store.
func (h *Hold) Touch() { h.t.lastTouch.Store(h.t.c.now()) }

// Renew extends the lease now, by the lock's lease, in one round trip. With a
// fixed lease (RenewInterval NoRenewal) it is the only way to extend it; with
// the watchdog it is rarely needed. ctx bounds the round trip. Renew returns
// a *LostError if the lock was already lost or the store says it is gone, and
// a wrapped store error (the hold unchanged) if the round trip failed.
func (h *Hold) Renew(ctx context.Context) error {
	if err := h.Err(); err != nil {
		return err
	}
	t := h.t
	send := t.c.now()
	switch v := fold(t.c.renewAll(ctx, t.requests())); {
	case v.lost != 0:
		t.lose(v.lost, nil)
		return h.Err()
	case v.err != nil:
		return fmt.Errorf("leash: renew %q: %w", t.name(), v.err)
	}
	t.c.sched.renewed(t, send)
	return nil
}

// Unlock releases this hold. The lock itself is released only by the last
// Unlock of a tenure (the outermost, for nested re-entries); earlier ones
// only drop their own hold. Unlock does not depend on ctx being alive: it
// keeps ctx's values, ignores its cancellation, and bounds the round trip by
// Options.ReleaseTimeout, so `defer hold.Unlock(ctx)` is safe.
//
// Unlock returns nil on success; ErrNotHeld if this hold was already
// unlocked; a *LostError if the lock was lost before the Unlock (the
// protected work was not protected throughout); or a wrapped store error if
// the release round trip failed, in which case leash keeps retrying in the
// background until the lease would have run out anyway.
func (h *Hold) Unlock(ctx context.Context) error {
	t, last, lostErr, err := h.end("unlock")
	if err != nil || !last {
		return err
	}
	c := t.c
	if lostErr != nil {
		t.ackRevokeAtUnlock(lostErr)
		if !t.mayStillHold(lostErr.Reason) {
			return lostErr
		}
	}
	if lostErr == nil && c.cfg.observer != nil { // a loss was observed already
		defer func() { c.observeUnlocked(t, lostErr) }()
	}
	var buf [releaseInline]driver.Request // no allocation for a few names
	reqs := t.appendRequests(buf[:0])
	var (
		errs    []error
		notHeld bool
	)
	for i, err := range c.release(ctx, reqs, c.now()+int64(t.cfg.lease)) {
		switch {
		case err == nil:
		case errors.Is(err, ErrNotHeld):
			notHeld = true
			if lostErr == nil {
				// The store had lost the lock before we noticed: someone
				// force-unlocked it, it expired on the server, or other
				// data now sits under its name (ErrNotALock says what).
				cause := ErrNotHeld
				if errors.Is(err, ErrNotALock) {
					cause = err
				}
				lostErr = &LostError{Name: reqs[i].Name, Fence: t.parts[i].fence, Reason: ReasonReleasedElsewhere, Err: cause}
			}
		default:
			errs = append(errs, fmt.Errorf("leash: unlock %q: %w (retrying in the background; %s)",
				reqs[i].Name, err, c.endsWithin(t.cfg.lease)))
		}
	}
	if notHeld {
		// Perhaps revoked before the Client heard of it (the message lost
		// or still on its way): the holder is done with the lock, so the
		// revocation is acknowledged, or the name would stay out of use
		// until the revoked lease ran out. A name with no revocation of this
		// owner is left as it is.
		c.ackRevoke(t)
	}
	if c.debugOn() {
		c.log.Debug("lock released", slog.String(attrLock, t.name()), slog.Int64(attrToken, t.fence()))
	}
	if lostErr != nil {
		errs = append([]error{lostErr}, errs...)
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// UnlockAfter ends this hold now but, when it is the tenure's last hold,
// leaves the lock held in the store for d more: the watchdog stops, the lease
// is set to d by the server's clock, and the lock frees itself then. Nobody
// needs to stay alive for that, which is what a scheduled job wants when it
// must not run again on another instance before d has passed (ShedLock's
// lockAtLeastFor). The hold's context ends with ErrReleased, as after Unlock.
// A d of zero or less is a plain Unlock; d is capped at MaxLease.
//
// UnlockAfter returns a *LostError if the lock was lost before the call: the
// lock is then not extended, and what the store may still keep of it (a hold
// lost to MaxHold, a stall or an expiry seen only by this process) ends with
// the lease it has. It returns a wrapped store error if the round trip
// failed, in which case the lock keeps its current lease or d, whichever the
// server has, and expires on its own; and, before any round trip, an error
// matching ErrUnsupported on a store whose locks last exactly as long as a
// session (driver.SessionStore: etcdstore, zkstore), where nothing outlives
// its holder.
func (h *Hold) UnlockAfter(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return h.Unlock(ctx)
	}
	d = min(d, MaxLease)
	if err := h.t.c.unlockAfterErr(h.t.name(), d); err != nil {
		return err
	}
	t, last, lostErr, err := h.end("unlock")
	if err != nil || !last {
		return err
	}
	if lostErr != nil {
		t.ackRevokeAtUnlock(lostErr)
		return lostErr
	}
	c := t.c
	if c.cfg.observer != nil {
		defer func() { c.observeUnlocked(t, lostErr) }()
	}
	rctx := c.releaseContext(ctx)
	if r := c.sched.inFlight(t); r != nil {
		// A renewal sent before the unlock, with the full lease, must not
		// land after this one and cut the lock's tail short: wait for its
		// answer (the round's own timeout bounds the wait).
		select {
		case <-r.sent:
		case <-rctx.Done():
		}
	}
	reqs := t.requests()
	for i := range reqs {
		reqs[i].Lease = d
	}
	switch v := fold(c.renewAll(rctx, reqs)); {
	case v.lost != 0:
		lostErr = &LostError{Name: reqs[v.part].Name, Fence: t.parts[v.part].fence, Reason: v.lost, Err: ErrNotHeld}
		if v.lost == ReasonRevoked {
			// Revoked, and learnt only now: the holder is done with it, so
			// the store may free the name without waiting out the lease.
			c.ackRevoke(t)
		}
		return lostErr
	case v.err != nil:
		return fmt.Errorf("leash: unlock %q after %v: %w (%s)",
			reqs[v.part].Name, d, v.err, c.endsWithin(max(d, t.cfg.lease)))
	}
	c.log.Debug("lock left to expire", slog.String(attrLock, t.name()), slog.Duration("after", d))
	c.rec.leftToExpire(c, t, d)
	return nil
}

// end ends hold h: it marks it done, drops it from its tenure and cancels its
// context. When h was the tenure's last hold, the tenure is released and
// unregistered (before any release round trip, so that no renewal outlives
// an unlock: one already in flight cannot resurrect the lock, because the
// store renews only what the owner still holds), and last is true. lostErr is
// the tenure's loss, if it was lost. err is non-nil when there is nothing
// more to do: h was already unlocked, or it was not the last hold and the
// tenure was lost.
func (h *Hold) end(op string) (t *tenure, last bool, lostErr *LostError, err error) {
	t = h.t
	if !h.done.CompareAndSwap(false, true) {
		return t, false, nil, fmt.Errorf("leash: %s %q: %w: this hold was already unlocked", op, t.name(), ErrNotHeld)
	}
	t.check()
	t.mu.Lock()
	t.nholds--
	last = t.nholds == 0
	lostErr = t.lostErr
	if last && t.state == stateHeld {
		t.state = stateReleased
	}
	h.ended = holdEndReleased
	if lostErr != nil {
		h.ended = holdEndLost
	}
	hc := h.ctx.Load()
	if hc != nil {
		for p := &t.ctxs; *p != nil; p = &(*p).next {
			if *p == h {
				*p = h.next
				break
			}
		}
	}
	t.mu.Unlock()
	if hc != nil {
		hc.cancel(ErrReleased)
	}
	if !last {
		if lostErr != nil {
			return t, false, lostErr, lostErr
		}
		return t, false, nil, nil
	}
	t.c.sched.remove(t)
	t.c.forget(t)
	return t, true, lostErr, nil
}
