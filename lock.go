package leash

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/leash-go/leash/driver"
)

// A locker is what every acquiring method of every lock type runs: the name,
// the kind and the resolved options. It holds no state and may be copied.
type locker struct {
	c       *Client
	kind    driver.Kind
	name    string
	cfg     lockConfig
	wait    time.Duration // how long a queue place or waiting-writer mark lasts
	permits int           // semaphore size, for driver.KindPermit
	err     error         // construction error, returned by every call
}

// newLocker resolves the options of a lock called name.
func (c *Client) newLocker(kind driver.Kind, name string, opts []*LockOptions) locker {
	l := locker{c: c, kind: kind, name: name}
	var o *LockOptions
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		l.err = fmt.Errorf("%w: %q takes at most one *LockOptions, got %d", ErrInvalidOptions, truncate(name), len(opts))
		return l
	}
	if err := checkName(c.store, name); err != nil {
		l.err = err
		return l
	}
	if err := c.caps.kind(kind); err != nil {
		l.err = fmt.Errorf("leash: lock %q: %w", truncate(name), err)
		return l
	}
	l.cfg, l.err = c.lockConfig(o)
	return l
}

// lockConfig resolves per-lock options against the Client's.
func (c *Client) lockConfig(o *LockOptions) (lockConfig, error) {
	if o == nil {
		return c.cfg.lock, nil
	}
	base := Options{Lease: c.cfg.lock.lease, RenewInterval: c.cfg.lock.interval, SafetyMargin: c.cfg.lock.margin,
		MaxHold: c.cfg.lock.maxHold, Liveness: c.cfg.lock.liveness}
	if base.RenewInterval == 0 {
		base.RenewInterval = NoRenewal
	}
	return resolve(&base, o)
}

// lock takes or re-enters the lock; wait says whether to wait for it.
func (l locker) lock(ctx context.Context, wait bool) (*Hold, error) {
	c := l.c
	if l.err != nil {
		return nil, l.err
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, &NotAcquiredError{Name: l.name, Remaining: -1, Err: err}
	}
	explicit, hasOwner := ownerFrom(ctx)
	if hasOwner {
		if err := validateOwner(explicit); err != nil {
			return nil, err
		}
	}
	if l.kind == driver.KindPermit {
		// Every Acquire takes one more permit, a lease of its own: there is
		// no re-entry, and explicit owners do not apply.
		return l.acquire(ctx, c.newTenure(l.kind, []string{l.name}, "", l.cfg), wait)
	}
	h, t, err := l.reentry(ctx)
	if h != nil || err != nil {
		return h, err
	}
	if hasOwner {
		return c.lockOwned(ctx, l, explicit, wait)
	}
	nt := c.newTenure(l.kind, []string{l.name}, "", l.cfg)
	if t != nil && l.kind == driver.KindRead && t.kind == driver.KindWrite {
		// A downgrade: the store grants the read lease despite the write
		// lock because the request names the writer as its parent.
		nt.parent = t
	}
	return l.acquire(ctx, nt, wait)
}

// reentry applies the re-entry rules to the tenure on l's name carried by
// ctx, if any. It returns a new hold on a re-entered tenure; or the write
// tenure a read lock downgrades from; or an error for a request that would
// wait for itself.
func (l locker) reentry(ctx context.Context) (*Hold, *tenure, error) {
	t := tenureIn(ctx, l.c, l.name)
	for ; t != nil && !t.alive(); t = t.parent {
	}
	if t == nil {
		return nil, nil, nil
	}
	return l.relate(ctx, t)
}

// relate applies the re-entry rules to t, a live tenure that the caller
// already holds on l's name (through its context, or as the same explicit
// owner): see reentry.
func (l locker) relate(ctx context.Context, t *tenure) (*Hold, *tenure, error) {
	exclusive := func(k driver.Kind) bool { return k == driver.KindMutex || k == driver.KindFair }
	switch {
	case len(t.parts) > 1:
		return nil, nil, fmt.Errorf("%w: %q is held through this context as part of a MultiLock; locking it again would wait for itself",
			ErrInvalidArgument, l.name)
	case exclusive(l.kind) && exclusive(t.kind), l.kind == t.kind:
		if h := t.reenter(ctx); h != nil {
			return h, nil, nil
		}
		return nil, nil, nil
	case l.kind == driver.KindWrite && t.kind == driver.KindRead:
		for w := t.parent; w != nil; w = w.parent {
			if w.kind == driver.KindWrite {
				if h := w.reenter(ctx); h != nil {
					return h, nil, nil
				}
			}
		}
		return nil, nil, fmt.Errorf("leash: lock %q: %w", l.name, ErrUpgrade)
	case l.kind == driver.KindRead && t.kind == driver.KindWrite:
		return nil, t, nil
	}
	return nil, nil, fmt.Errorf("%w: %q is held through this context or owner as a %s lock; a %s lock on the same name would wait for itself",
		ErrInvalidArgument, l.name, t.kind, l.kind)
}

// lockOwned takes or re-enters a lock for an explicit owner. Concurrent calls
// for the same owner wait for the first one's acquire and then re-enter.
func (c *Client) lockOwned(ctx context.Context, l locker, owner string, wait bool) (*Hold, error) {
	k := ownedKey{l.name, owner, family(l.kind)}
	for {
		c.mu.Lock()
		t := c.owned[k]
		if t == nil {
			// The owner may hold the name as another kind: a write lock it
			// downgrades, or a read lock it may not upgrade. The store cannot
			// tell, since every tenure has an owner of its own.
			var parent *tenure
			if o := c.ownedOther(k); o != nil {
				if p := o.pending; p != nil {
					c.mu.Unlock()
					if err := c.await(ctx, l.name, p); err != nil {
						return nil, err
					}
					continue
				}
				c.mu.Unlock()
				if o.alive() {
					h, downgradeFrom, err := l.relate(ctx, o)
					if h != nil || err != nil {
						return h, err
					}
					parent = downgradeFrom
				}
				c.mu.Lock()
				// Decide again if anything changed while c.mu was free.
				if c.owned[k] != nil || c.ownedOther(k) != o || (parent != nil && !parent.held()) {
					c.mu.Unlock()
					continue
				}
			}
			t = c.newTenure(l.kind, []string{l.name}, owner, l.cfg)
			t.parent = parent
			t.pending = make(chan struct{})
			c.owned[k] = t
			c.mu.Unlock()
			h, err := l.acquire(ctx, t, wait)
			c.mu.Lock()
			close(t.pending)
			t.pending = nil
			if err != nil && c.owned[k] == t {
				delete(c.owned, k)
			}
			c.mu.Unlock()
			return h, err
		}
		if p := t.pending; p != nil {
			c.mu.Unlock()
			if err := c.await(ctx, l.name, p); err != nil {
				return nil, err
			}
			continue
		}
		c.mu.Unlock()
		if h := t.reenter(ctx); h != nil {
			return h, nil
		}
		c.forget(t) // ended: start a new tenure
	}
}

// ownedOther returns the explicit owner's tenure on k's name of another
// family than k's that is being acquired or is still held, if any. c.mu
// must be held.
func (c *Client) ownedOther(k ownedKey) *tenure {
	for _, f := range [...]driver.Kind{driver.KindMutex, driver.KindRead, driver.KindWrite} {
		if f != k.kind {
			if t := c.owned[ownedKey{k.name, k.owner, f}]; t != nil && (t.pending != nil || t.held()) {
				return t
			}
		}
	}
	return nil
}

// await waits for an explicit owner's acquire in flight (pending) to end.
func (c *Client) await(ctx context.Context, name string, pending <-chan struct{}) error {
	select {
	case <-pending:
		return nil
	case <-ctx.Done():
		return &NotAcquiredError{Name: name, Remaining: -1, Err: ctx.Err()}
	case <-c.done:
		return ErrClosed
	}
}

// request is the store request for a new tenure. Only a waiting acquire
// takes a queue place or a waiting-writer mark: TryLock never does.
func (l locker) request(t *tenure, wait bool) driver.Request {
	r := t.request(0)
	switch l.kind {
	case driver.KindFair, driver.KindWrite:
		if wait {
			r.Wait = l.wait
		}
	case driver.KindPermit:
		r.Permits = l.permits
	}
	return r
}

// family maps kinds that are the same lock in the store to one: a Mutex and
// a FairMutex on one name are the same exclusive lock.
func family(k driver.Kind) driver.Kind {
	if k == driver.KindFair {
		return driver.KindMutex
	}
	return k
}

// acquire runs the acquire loop for a new single-name tenure.
func (l locker) acquire(ctx context.Context, t *tenure, wait bool) (h *Hold, err error) {
	c := l.c
	var start int64 // for the observer
	if c.cfg.observer != nil {
		start = c.now()
		defer func() { c.observeNotAcquired(t, start, err) }()
	}
	req := l.request(t, wait)
	var (
		w      *waiter
		nap    sleeper
		placed bool // the store may hold a queue place or writer mark for us
	)
	defer func() {
		if w != nil {
			c.waiters.leave(w)
		}
		nap.stop()
		if placed {
			c.withdraw(ctx, req)
		}
	}()
	for {
		send := c.now()
		g, err := c.store.Acquire(ctx, req)
		if err != nil {
			if refused(err) {
				// The store refused: nothing was granted.
				return nil, fmt.Errorf("leash: lock %q: %w", l.name, err)
			}
			// The outcome is unknown: the server may have granted the lock.
			// Keep releasing it in the background until its lease would end.
			c.sched.cleanup(req, send+int64(req.Lease), true)
			if ctx.Err() != nil {
				return nil, &NotAcquiredError{Name: l.name, Remaining: -1, Err: ctx.Err()}
			}
			return nil, fmt.Errorf("leash: lock %q: %w", l.name, err)
		}
		if g.Acquired {
			placed = false
			t.parts[0].fence = g.Fence
			return c.granted(ctx, t, send, start)
		}
		placed = req.Wait > 0
		if c.debugOn() {
			c.log.Debug("lock busy", slog.String(attrLock, l.name), slog.String(attrKind, l.kind.String()),
				slog.Duration("remaining", g.Remaining))
		}
		if !wait {
			return nil, &NotAcquiredError{Name: l.name, Remaining: g.Remaining, Grace: g.Grace}
		}
		if w == nil {
			// Subscribe, then try again before waiting: a release between the
			// first attempt and the subscription is not missed.
			if w, err = c.watchFor(ctx, l.kind, []string{l.name}, t.owner); err != nil {
				return nil, c.waitEnded(l.name, g.Remaining, g.Grace, err)
			}
			continue
		}
		if err := c.sleep(ctx, w, &nap, l.fallback(g.Remaining, w)); err != nil {
			return nil, c.waitEnded(l.name, g.Remaining, g.Grace, err)
		}
	}
}

// refused reports whether an Acquire error is the store's definite refusal,
// after which nothing was granted and nothing needs releasing: the lock kind
// is unsupported, the request is an upgrade, or the name is not a lock.
func refused(err error) bool {
	return errors.Is(err, ErrNotALock) || errors.Is(err, ErrUpgrade) || errors.Is(err, ErrUnsupported)
}

// waitEnded is the error of a wait that ctx or Close ended.
func (c *Client) waitEnded(name string, remaining time.Duration, grace bool, err error) error {
	if errors.Is(err, ErrClosed) {
		return ErrClosed
	}
	return &NotAcquiredError{Name: name, Remaining: remaining, Grace: grace, Err: err}
}

// fallback is how long a waiter sleeps when no notification comes: until the
// holder's lease runs out, but no longer than a third of a queue place's life
// (the attempt refreshes it), nor than a second when polling.
func (l locker) fallback(remaining time.Duration, w *waiter) time.Duration {
	d := remaining
	if d < 0 || d > l.cfg.lease {
		d = l.cfg.lease
	}
	if l.wait > 0 {
		d = min(d, l.wait/3)
	}
	if w.poll {
		d = min(d, time.Second)
	}
	// A little slack past the holder's expiry, spread so that waiting
	// clients do not retry in lock-step.
	return d + time.Millisecond + rand.N(d/50+time.Millisecond)
}

// withdraw removes a waiter's queue place or writer mark, in the background
// of a bounded, detached context.
func (c *Client) withdraw(ctx context.Context, req driver.Request) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.releaseTimeout)
	defer cancel()
	if err := c.caps.withdraw.Withdraw(rctx, req); err != nil {
		c.log.Warn("withdraw from queue failed; the place expires on its own",
			slog.String(attrLock, req.Name), slog.Duration("within", req.Wait), slog.Any(attrError, err))
	}
}

// granted turns a successful acquire into the tenure's first hold, unless ctx
// ended meanwhile or the Client closed, in which case it releases the lock
// before returning. send is when the (first) granting request was sent,
// start when the acquire call began (for the observer).
func (c *Client) granted(ctx context.Context, t *tenure, send, start int64) (*Hold, error) {
	t.grantAt = send
	t.lastTouch.Store(send)
	t.setValid(send)
	t.mu.Lock()
	t.state = stateHeld
	h := t.newHold(ctx)
	t.mu.Unlock()
	if err := ctx.Err(); err != nil {
		c.undo(ctx, t)
		return nil, &NotAcquiredError{Name: t.name(), Remaining: -1, Err: err}
	}
	// Observed before the watchdog may lose it, so an observer sees the
	// grant before the tenure's end.
	c.observeGrant(t, start)
	if !c.sched.add(t) {
		c.undo(ctx, t)
		c.observeEnd(t, OpLost, ReasonClosed, ErrClosed)
		return nil, ErrClosed
	}
	if c.debugOn() {
		c.log.Debug("lock acquired", slog.String(attrLock, t.name()), slog.String(attrKind, t.kind.String()),
			slog.String(attrOwner, t.owner), slog.Int64(attrToken, t.fence()))
	}
	return h, nil
}

// undo releases a lock that was granted but will not be handed to the caller.
func (c *Client) undo(ctx context.Context, t *tenure) {
	t.mu.Lock()
	t.state = stateReleased
	t.mu.Unlock()
	c.releaseParts(ctx, t.requests(), t.grantAt+int64(t.cfg.lease))
}

// releaseParts releases reqs now, leaving any that fail to the background
// cleanup until until.
func (c *Client) releaseParts(ctx context.Context, reqs []driver.Request, until int64) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.releaseTimeout)
	defer cancel()
	for _, r := range reqs {
		if err := c.store.Release(rctx, r); err != nil && !errors.Is(err, ErrNotHeld) {
			c.sched.cleanup(r, until, false)
		}
	}
}
