package leash

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leash-go/leash/driver"
)

// renewStore renews reqs (every renewal of the Client goes through it): with
// Store.Renew, or, on a driver.SessionStore, with one keep-alive of the
// Client's session followed by Renew, which for such a store checks each
// lock without extending it. The keep-alive is sent first: a check that then
// finds a lock held proves it was attached to the session the keep-alive
// extended, so the lock lasts its lease from before the keep-alive was sent.
// A session that has ended (ErrNotHeld) makes every lock gone; any other
// keep-alive error makes every outcome unknown.
func (c *Client) renewStore(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	ss := c.caps.session
	if ss == nil {
		return c.store.Renew(ctx, reqs)
	}
	err := ss.KeepAlive(ctx, c.id)
	if err == nil {
		return c.store.Renew(ctx, reqs)
	}
	ended := errors.Is(err, driver.ErrNotHeld)
	if ended {
		c.sessionEnded(err)
	}
	res := make([]driver.RenewResult, len(reqs))
	for i := range res {
		if ended {
			res[i].Status = driver.RenewGone
		} else {
			res[i].Err = fmt.Errorf("keep-alive: %w", err)
		}
	}
	return res
}

// sessionEnded loses every lock the watchdog tracks at once: the store's
// session ended (it expired on the server), and every lock it kept with it,
// whichever renewal round each lock is in. A lock granted but not yet
// tracked, or a MultiLock part held while it waits, is found at its own
// next renewal.
func (c *Client) sessionEnded(cause error) {
	var ts []*tenure
	c.sched.mu.Lock()
	c.sched.q.each(func(e *entry) { ts = append(ts, e.t) })
	c.sched.mu.Unlock()
	for _, t := range ts {
		t.lose(ReasonReleasedElsewhere, fmt.Errorf("the store's session ended: %w", cause))
	}
}

// unlockAfterErr is UnlockAfter's refusal on a session store, whose locks
// live exactly as long as the session: one cannot be left to expire d later
// on its own.
func (c *Client) unlockAfterErr(name string, d time.Duration) error {
	if c.caps.session == nil {
		return nil
	}
	return fmt.Errorf("leash: unlock %q after %v: %w", name, d,
		driver.Unsupported(c.store, "leases that outlive their holder's session (UnlockAfter; its locks last exactly as long as the session)"))
}

// endKept releases, in the background, a lock a session store may still
// keep after its hold was lost here: on such a store a lock does not expire
// while its session lives, so a lock whose holder stopped renewing it (its
// validity deadline, MaxHold or liveness passed) would stay held for as long
// as the Client keeps other locks alive. A lock the store reported gone or
// taken has nothing to release.
func (c *Client) endKept(t *tenure, reason Reason) {
	if c.caps.session == nil {
		return
	}
	switch reason {
	case ReasonExpired, ReasonUnreachable, ReasonMaxHold, ReasonStalled:
		for _, r := range t.requests() {
			c.retryRelease(r, forever, false)
		}
	}
}

// endsWithin says, for an error message, when a lock the Client could not
// release ends without it.
func (c *Client) endsWithin(lease time.Duration) string {
	if c.caps.session != nil {
		return "the store keeps it until the release succeeds or the session ends"
	}
	return fmt.Sprintf("the lease ends on its own within %v", lease)
}
