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
