package leash

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Mutex is an exclusive, reentrant lock on one name, obtained from
// [Client.Mutex]. It is only a name and its options: it holds no state, may
// be copied, and is safe for concurrent use. Its holds are [Hold] values.
//
// On Redis, a Mutex uses Redisson's RLock layout, so a Go service using leash
// and a Java service using Redisson's RLock or RFencedLock exclude each other
// on the same name.
type Mutex struct {
	c    *Client
	name string
	cfg  lockConfig
	err  error
}

// Name returns the lock name.
func (m *Mutex) Name() string { return m.name }

// Lock takes the lock, waiting as long as ctx allows while someone else holds
// it. Waiters are woken by the store when the lock is released (pub/sub on
// Redis); a fallback timer set to the holder's remaining lease covers a lost
// notification or an expiry.
//
// ctx bounds only the wait, never the hold: cancelling it after Lock returns
// does nothing to the lock. A lock granted just as ctx ends is released
// before Lock returns, so a cancelled Lock never leaves a lock behind.
//
// Re-entry: when ctx is a held lock's [Hold.Context] (or derives from it),
// Lock on the same name re-enters at once: it returns a new Hold on the same
// tenure, with the same fencing token, and only the last Unlock releases the
// lock. A context from [WithOwner] re-enters any hold of the same owner on
// this Client. Any other context waits like any other client, even in the
// same goroutine: locking twice without the hold's context deadlocks until
// ctx ends, as with sync.Mutex.
//
// The lease is renewed by the watchdog while the lock is held (unless
// RenewInterval is NoRenewal) until Unlock, MaxHold, or loss.
//
// Lock may return a *NotAcquiredError matching ErrNotAcquired and ctx.Err()
// when ctx ends first; ErrClosed; an error matching ErrInvalidArgument; or a
// wrapped store error (the outcome is then unknown to the server, and leash
// releases the lock in the background if it was granted).
func (m *Mutex) Lock(ctx context.Context) (*Hold, error) { return m.lock(ctx, true) }

// TryLock makes one attempt to take the lock and does not wait. When someone
// else holds it, TryLock returns a *NotAcquiredError (matching
// ErrNotAcquired) whose Remaining is the holder's remaining lease. Re-entry
// and the other errors are as for [Mutex.Lock].
func (m *Mutex) TryLock(ctx context.Context) (*Hold, error) { return m.lock(ctx, false) }

func (m *Mutex) lock(ctx context.Context, wait bool) (*Hold, error) {
	c := m.c
	if m.err != nil {
		return nil, m.err
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, &NotAcquiredError{Name: m.name, Remaining: -1, Err: err}
	}
	explicit, hasOwner := ownerFrom(ctx)
	if hasOwner {
		if err := validateOwner(explicit); err != nil {
			return nil, err
		}
		return m.lockOwned(ctx, explicit, wait)
	}
	if t, ok := ctx.Value(tenureKey{c, m.name}).(*tenure); ok {
		if h := t.reenter(ctx); h != nil {
			return h, nil
		}
	}
	return m.acquire(ctx, c.newTenure(m.name, "", m.cfg), wait)
}

// lockOwned takes or re-enters the lock for an explicit owner. Concurrent
// calls for the same owner wait for the first one's acquire and then re-enter.
func (m *Mutex) lockOwned(ctx context.Context, owner string, wait bool) (*Hold, error) {
	c := m.c
	k := ownedKey{m.name, owner}
	for {
		c.mu.Lock()
		t := c.owned[k]
		if t == nil {
			t = c.newTenure(m.name, owner, m.cfg)
			t.pending = make(chan struct{})
			c.owned[k] = t
			c.mu.Unlock()
			h, err := m.acquire(ctx, t, wait)
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
			select {
			case <-p:
				continue
			case <-ctx.Done():
				return nil, &NotAcquiredError{Name: m.name, Remaining: -1, Err: ctx.Err()}
			case <-c.done:
				return nil, ErrClosed
			}
		}
		c.mu.Unlock()
		if h := t.reenter(ctx); h != nil {
			return h, nil
		}
		c.forget(t) // ended: start a new tenure
	}
}

// acquire runs the acquire loop for a new tenure.
func (m *Mutex) acquire(ctx context.Context, t *tenure, wait bool) (*Hold, error) {
	c := m.c
	req := t.request()
	var (
		w     *waiter
		timer *time.Timer
	)
	defer func() {
		if w != nil {
			c.waiters.leave(w)
		}
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		send := c.now()
		g, err := c.store.Acquire(ctx, req)
		if err != nil {
			// The outcome is unknown: the server may have granted the lock.
			// Keep releasing it in the background until its lease would end.
			c.sched.cleanup(req, send+int64(req.Lease), true)
			if ctx.Err() != nil {
				return nil, &NotAcquiredError{Name: m.name, Remaining: -1, Err: ctx.Err()}
			}
			return nil, fmt.Errorf("leash: lock %q: %w", m.name, err)
		}
		if g.Acquired {
			return m.granted(ctx, t, g, send)
		}
		c.log.Debug("lock busy", slog.String(attrLock, m.name), slog.Duration("remaining", g.Remaining))
		if !wait {
			return nil, &NotAcquiredError{Name: m.name, Remaining: g.Remaining}
		}
		if w == nil {
			// Subscribe, then try again before waiting: a release between the
			// first attempt and the subscription is not missed.
			if w, err = c.waiters.join(ctx, m.name); err != nil {
				if ctx.Err() != nil {
					return nil, &NotAcquiredError{Name: m.name, Remaining: g.Remaining, Err: ctx.Err()}
				}
				if c.closed.Load() {
					return nil, ErrClosed
				}
				return nil, fmt.Errorf("leash: lock %q: watch for release: %w", m.name, err)
			}
			continue
		}
		fallback := g.Remaining
		if fallback < 0 || fallback > t.cfg.lease {
			fallback = t.cfg.lease
		}
		// A little slack past the holder's expiry, spread so that waiting
		// clients do not retry in lock-step.
		fallback += time.Millisecond + rand.N(fallback/50+time.Millisecond)
		if timer == nil {
			timer = time.NewTimer(fallback)
		} else {
			timer.Reset(fallback)
		}
		select {
		case <-w.ch:
		case <-timer.C:
		case <-ctx.Done():
			return nil, &NotAcquiredError{Name: m.name, Remaining: g.Remaining, Err: ctx.Err()}
		case <-c.done:
			return nil, ErrClosed
		}
	}
}

// granted turns a successful acquire into the tenure's first hold, unless ctx
// ended meanwhile or the Client closed, in which case it releases the lock
// before returning.
func (m *Mutex) granted(ctx context.Context, t *tenure, g Grant, send int64) (*Hold, error) {
	c := m.c
	t.fence = g.Fence
	t.grantAt = send
	t.lastTouch.Store(send)
	t.setValid(send)
	t.mu.Lock()
	t.state = stateHeld
	h := t.newHold(ctx)
	t.mu.Unlock()
	if err := ctx.Err(); err != nil {
		m.undo(ctx, t)
		return nil, &NotAcquiredError{Name: m.name, Remaining: -1, Err: err}
	}
	if !c.sched.add(t) {
		m.undo(ctx, t)
		return nil, ErrClosed
	}
	c.log.Debug("lock acquired", slog.String(attrLock, m.name), slog.String(attrOwner, t.owner), slog.Int64(attrToken, t.fence))
	return h, nil
}

// undo releases a lock that was granted but will not be handed to the caller.
func (m *Mutex) undo(ctx context.Context, t *tenure) {
	c := m.c
	t.mu.Lock()
	t.state = stateReleased
	t.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.releaseTimeout)
	defer cancel()
	if _, err := c.store.Release(rctx, t.request(), ReleaseAll); err != nil && !errors.Is(err, ErrNotHeld) {
		c.sched.cleanup(t.request(), t.grantAt+int64(t.cfg.lease), false)
	}
}
