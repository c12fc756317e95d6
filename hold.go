package leash

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leash-go/leash/driver"
)

// Tenure states.
const (
	stateHeld int32 = iota + 1
	stateLost
	stateReleased
)

// A tenure is one continuous holding of a lock by one owner: from the grant
// to the last Unlock or the loss. Re-entries share it (and its fencing token);
// each Lock call gets its own Hold on it. A MultiLock tenure has one part per
// name; every other tenure has one part.
type tenure struct {
	c        *Client
	kind     driver.Kind
	parts    []part
	owner    string // store owner
	explicit string // owner given with WithOwner, "" for anonymous tenures
	cfg      lockConfig
	grantAt  int64   // monotonic ns: send time of the granting acquire
	parent   *tenure // the tenure on the same name this one was taken inside, if any

	validUntil atomic.Int64 // monotonic ns: the local validity deadline (see the package doc)
	lastTouch  atomic.Int64 // monotonic ns; Hold.Touch

	mu    sync.Mutex
	state int32
	// announced: OpAcquired was sent. Only the acquiring goroutine uses it;
	// it sits here, in the padding after state, to keep a tenure small.
	announced bool
	holds     []*Hold // live holds, cancelled on loss
	lostErr   *LostError
	lostCh    chan struct{} // made on demand by Lost
	pending   chan struct{} // explicit owners: closed when the acquire resolves

	// Scheduler state, guarded by scheduler.mu.
	idx        int // index in scheduler.items, -1 when not scheduled
	dueAt      int64
	eligibleAt int64
	renewing   bool
	recorded   bool // listed in a published driver.ClientRecord (see record.go)
	lastErr    error
}

// A part is one name of a tenure and the token it was granted.
type part struct {
	name  string
	fence int64
}

// name is the tenure's first (for most kinds, only) name.
func (t *tenure) name() string { return t.parts[0].name }

// fence is the tenure's token: the highest of its parts'.
func (t *tenure) fence() int64 {
	f := t.parts[0].fence
	for _, p := range t.parts[1:] {
		f = max(f, p.fence)
	}
	return f
}

// request is the store request for part i, with the tenure's lease.
func (t *tenure) request(i int) driver.Request {
	r := driver.Request{Kind: t.kind, Name: t.parts[i].name, Owner: t.owner, Lease: t.cfg.lease}
	if t.parent != nil {
		r.Parent = t.parent.owner
	}
	return r
}

// requests is one request per part.
func (t *tenure) requests() []driver.Request {
	reqs := make([]driver.Request, len(t.parts))
	for i := range t.parts {
		reqs[i] = t.request(i)
	}
	return reqs
}

// setValid moves the validity deadline forward to send+lease-margin, never back.
func (t *tenure) setValid(send int64) {
	v := send + int64(t.cfg.lease-t.cfg.margin)
	for {
		old := t.validUntil.Load()
		if v <= old || t.validUntil.CompareAndSwap(old, v) {
			return
		}
	}
}

// check declares the tenure lost if its validity deadline has passed. Holders
// call it through Hold.Err, Hold.Lost and the hold context's Err, so a process
// that resumes from a pause learns of the loss on its first look, even before
// the scheduler goroutine runs.
func (t *tenure) check() {
	if t.c.now() < t.validUntil.Load() {
		return
	}
	t.mu.Lock()
	held := t.state == stateHeld
	t.mu.Unlock()
	if held {
		t.c.sched.mu.Lock()
		err := t.lastErr
		t.c.sched.mu.Unlock()
		t.lose(expiryReason(err), err)
	}
}

func expiryReason(lastErr error) Reason {
	if lastErr != nil {
		return ReasonUnreachable
	}
	return ReasonExpired
}

// alive reports whether the tenure is held, checking its deadline first.
func (t *tenure) alive() bool {
	t.check()
	return t.held()
}

// held reports whether t is held as far as it knows, without checking its
// validity deadline (which alive does, and which may end the tenure and take
// the Client's lock): for callers that hold c.mu.
func (t *tenure) held() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state == stateHeld
}

// lose ends a held tenure: it records why, closes Lost, cancels every hold's
// context and stops renewal. It reports whether it made the transition.
func (t *tenure) lose(reason Reason, cause error) bool {
	t.mu.Lock()
	if t.state != stateHeld {
		t.mu.Unlock()
		return false
	}
	t.state = stateLost
	le := &LostError{Name: t.name(), Fence: t.fence(), Reason: reason, Err: cause}
	t.lostErr = le
	// Contexts first, then Lost: whoever sees Lost closed also sees every
	// hold's context cancelled. Cancelling runs no user code synchronously.
	for _, h := range t.holds {
		h.cancel(le)
	}
	if t.lostCh == nil {
		t.lostCh = closedChan
	} else {
		close(t.lostCh)
	}
	t.mu.Unlock()

	t.c.sched.remove(t)
	t.c.forget(t)
	t.c.endKept(t, reason)
	t.c.observeEnd(t, OpLost, reason, cause)
	lvl := slog.LevelError
	if reason == ReasonClosed {
		lvl = slog.LevelWarn
	}
	t.c.log.Log(context.Background(), lvl, "lock lost",
		slog.String(attrLock, t.name()), slog.String(attrKind, t.kind.String()), slog.Int64(attrToken, t.fence()),
		slog.String(attrReason, reason.String()), slog.Any(attrError, cause))
	return true
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// newHold adds a hold to a held tenure; the caller holds t.mu. ctx is the
// Lock call's context: the hold's context keeps its values but not its
// cancellation.
func (t *tenure) newHold(ctx context.Context) *Hold {
	h := &Hold{t: t}
	base := context.WithoutCancel(ctx)
	for _, p := range t.parts {
		base = context.WithValue(base, tenureKey{t.c, p.name}, t)
	}
	inner, cancel := context.WithCancelCause(base)
	h.ctx = &holdCtx{Context: inner, t: t}
	h.cancel = cancel
	t.holds = append(t.holds, h)
	return h
}

// reenter adds a hold if the tenure is still held, or returns nil.
func (t *tenure) reenter(ctx context.Context) *Hold {
	t.check()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != stateHeld {
		return nil
	}
	return t.newHold(ctx)
}

// tenureKey finds, in a hold's context, the tenure of one lock of one Client.
type tenureKey struct {
	c    *Client
	name string
}

// tenureIn returns the innermost tenure of c on name carried by ctx.
func tenureIn(ctx context.Context, c *Client, name string) *tenure {
	t, _ := ctx.Value(tenureKey{c, name}).(*tenure)
	return t
}

// holdCtx is a hold's context. Its Err checks the validity deadline first, so
// that code asking "may I still write?" gets a fresh answer even when the
// scheduler has not run yet (a process resuming from SIGSTOP).
type holdCtx struct {
	context.Context
	t *tenure
}

func (c *holdCtx) Err() error {
	c.t.check()
	return c.Context.Err()
}

func (c *holdCtx) String() string { return fmt.Sprintf("leash.Hold(%q).Context", c.t.name()) }

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
	t      *tenure
	ctx    *holdCtx
	cancel context.CancelCauseFunc
	done   atomic.Bool
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
func (h *Hold) Context() context.Context { return h.ctx }

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
	reqs := t.requests()
	res := t.c.renewStore(ctx, reqs)
	if len(res) != len(reqs) {
		return fmt.Errorf("leash: renew %q: store returned %d results for %d requests", t.name(), len(res), len(reqs))
	}
	// Folded as the watchdog folds them: a part gone or taken loses the
	// whole hold, even when another part's round trip failed.
	switch r, _ := outcome(res); {
	case r.Err != nil:
		return fmt.Errorf("leash: renew %q: %w", t.name(), r.Err)
	case r.Status == driver.RenewGone:
		t.lose(ReasonReleasedElsewhere, nil)
		return h.Err()
	case r.Status == driver.RenewTaken:
		t.lose(ReasonTakenOver, nil)
		return h.Err()
	}
	t.c.sched.renewed(t, send, 0)
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
	if lostErr != nil && !t.mayStillHold(lostErr.Reason) {
		return lostErr
	}
	if lostErr == nil && c.cfg.observer != nil { // a loss was observed already
		defer func() { c.observeUnlocked(t, lostErr) }()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.releaseTimeout)
	defer cancel()
	var errs []error
	for i := range t.parts {
		req := t.request(i)
		err := c.store.Release(rctx, req)
		switch {
		case err == nil:
		case errors.Is(err, ErrNotHeld):
			if lostErr == nil {
				// The store had lost the lock before we noticed: someone
				// force-unlocked it, it expired on the server, or other
				// data now sits under its name (ErrNotALock says what).
				cause := ErrNotHeld
				if errors.Is(err, ErrNotALock) {
					cause = err
				}
				lostErr = &LostError{Name: req.Name, Fence: t.parts[i].fence, Reason: ReasonReleasedElsewhere, Err: cause}
			}
		default:
			c.sched.cleanup(req, c.now()+int64(t.cfg.lease), false)
			errs = append(errs, fmt.Errorf("leash: unlock %q: %w (retrying in the background; the lease ends on its own within %v)",
				req.Name, err, t.cfg.lease))
		}
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
// UnlockAfter returns a *LostError if the lock was lost before the call (the
// store then keeps nothing), or a wrapped store error if the round trip
// failed, in which case the lock keeps its current lease or d, whichever the
// server has, and expires on its own.
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
		return lostErr
	}
	c := t.c
	if c.cfg.observer != nil {
		defer func() { c.observeUnlocked(t, lostErr) }()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.releaseTimeout)
	defer cancel()
	reqs := t.requests()
	for i := range reqs {
		reqs[i].Lease = d
	}
	res := c.store.Renew(rctx, reqs)
	if len(res) != len(reqs) {
		return fmt.Errorf("leash: unlock %q after %v: store returned %d results for %d requests", t.name(), d, len(res), len(reqs))
	}
	// Folded as the watchdog folds them: a part gone or taken is a loss,
	// even when another part's round trip failed.
	switch r, i := outcome(res); {
	case r.Err != nil:
		return fmt.Errorf("leash: unlock %q after %v: %w (the lock ends on its own within %v)",
			reqs[i].Name, d, r.Err, max(d, t.cfg.lease))
	case r.Status == driver.RenewGone:
		lostErr = &LostError{Name: reqs[i].Name, Fence: t.parts[i].fence, Reason: ReasonReleasedElsewhere, Err: ErrNotHeld}
		return lostErr
	case r.Status == driver.RenewTaken:
		lostErr = &LostError{Name: reqs[i].Name, Fence: t.parts[i].fence, Reason: ReasonTakenOver, Err: ErrNotHeld}
		return lostErr
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
	if i := slices.Index(t.holds, h); i >= 0 {
		t.holds = slices.Delete(t.holds, i, i+1)
	}
	last = len(t.holds) == 0
	lostErr = t.lostErr
	if last && t.state == stateHeld {
		t.state = stateReleased
	}
	t.mu.Unlock()
	h.cancel(ErrReleased)
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

// mayStillHold reports whether, after a loss for this reason, the server may
// still record the owner on some name of the tenure (so a release is worth
// sending, owner-checked). A MultiLock that lost one name still holds the
// others.
func (t *tenure) mayStillHold(r Reason) bool {
	switch r {
	case ReasonExpired, ReasonUnreachable, ReasonMaxHold, ReasonStalled:
		return true
	}
	return len(t.parts) > 1
}
