package leash

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leash-go/leash/driver"
)

// revokes is the Client's side of prompt revocation, on a store that is a
// [driver.Revoker]: from the Client's first grant on, it listens for the
// revocations of its owners' locks; a revoked tenure is lost at once
// (ReasonRevoked), and then acknowledged, so that the store frees the name
// without waiting for the tombstone to lapse. A revocation that is not heard
// (before the listening starts, across a reconnect) is learnt at the next
// renewal instead, which the store answers RenewRevoked; the tombstone keeps
// the name from everyone else until then.
type revokes struct {
	started atomic.Bool // the listener was started (or the store has none)
	// listening is closed once revocations flow (for tests).
	listening chan struct{}
	mu        sync.Mutex
	closed    bool
	wg        sync.WaitGroup // the listener
	acks      sync.WaitGroup // acknowledgements in flight, added to under mu
	// unacked holds the tenures revoked and told that acknowledge at their
	// last Unlock (LockOptions.AckRevokeOnUnlock) and have not yet: Close
	// acknowledges those left, since it ends every hold.
	unacked map[*tenure]struct{}
}

// listen starts the revocation listener once, on the first grant. It costs
// an atomic load on every later grant.
func (c *Client) listenRevokes() {
	r := &c.revokes
	if c.caps.revoke == nil || r.started.Load() || !r.started.CompareAndSwap(false, true) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	// Owner: the Client. Stops when Close closes c.done.
	r.wg.Go(func() { c.revokeLoop() })
}

// revokeLoop watches the Client's revocations until Close, retrying a
// watch that cannot be made.
func (c *Client) revokeLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // Owner: revokeLoop. Stops when the Client closes or revokeLoop returns.
		select {
		case <-c.done:
		case <-ctx.Done():
		}
		cancel()
	}()
	delay := 100 * time.Millisecond
	for {
		stop, err := c.caps.revoke.WatchRevokes(ctx, c.id, c.revoked)
		if err == nil {
			close(c.revokes.listening)
			<-ctx.Done()
			if _, ok := c.store.(io.Closer); !ok {
				// A store that Close closes drops the watch with its
				// connection, without a round trip that a dead server
				// would hold up.
				stop()
			}
			return
		}
		c.log.Warn("cannot listen for revocations; revoked locks are learnt at their next renewal",
			slog.Any(attrError, err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// revoked handles one revocation: the tenure it names, if the Client still
// holds it, is lost at once (ReasonRevoked, or ReasonReleasedElsewhere for a
// lock the store freed at once). It is called by the store and must not
// block.
func (c *Client) revoked(rv driver.Revocation) {
	var t *tenure
	s := &c.sched
	s.mu.Lock()
	s.q.each(func(e *entry) {
		if t == nil && e.t.owner == rv.Owner {
			t = e.t
		}
	})
	s.mu.Unlock()
	// A tenure not tracked was released or lost already, or its grant is
	// still on its way back: its first renewal hears RenewRevoked.
	if t == nil {
		return
	}
	r := &c.revokes
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	// A lock freed at once (ForceRelease) was released elsewhere, as the
	// next renewal would have said; one kept by a tombstone was revoked,
	// and lose acknowledges it.
	reason := ReasonRevoked
	if rv.Freed {
		reason = ReasonReleasedElsewhere
	}
	// Owner: the Client. Lose runs the observer, which must not hold up
	// the store's notifications; revocations are rare.
	r.wg.Go(func() { t.lose(reason, nil) })
}

// ackRevoke acknowledges the revocation of t, which has been told (its
// Lost is closed), so that the store frees its names at once; in the
// background, bounded by ReleaseTimeout. Without it the tombstone lapses
// with the lease t had.
func (c *Client) ackRevoke(t *tenure) {
	r := &c.revokes
	if c.caps.revoke == nil {
		return
	}
	reqs := t.requests()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	// Owner: the Client; ends within ReleaseTimeout. Close waits for it.
	r.acks.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.releaseTimeout)
		defer cancel()
		for _, req := range reqs {
			if err := c.caps.revoke.AckRevoke(ctx, req); err != nil {
				c.log.Warn("acknowledging a revocation failed; the name frees when the revoked lease runs out",
					slog.String(attrLock, req.Name), slog.Any(attrError, err))
			}
		}
	})
}

// ackRevokeAtUnlock acknowledges, at the tenure's last Unlock, the
// revocation that lost it, when its lock asked for that
// (LockOptions.AckRevokeOnUnlock) rather than for an acknowledgement at
// once.
func (t *tenure) ackRevokeAtUnlock(lost *LostError) {
	if lost.Reason == ReasonRevoked && t.cfg.ackOnUnlock {
		r := &t.c.revokes
		r.mu.Lock()
		delete(r.unacked, t)
		r.mu.Unlock()
		t.c.ackRevoke(t)
	}
}

// revokedUntilUnlock records t, revoked and about to be told, as
// acknowledging at its last Unlock (see unacked). The caller holds t.mu.
func (t *tenure) revokedUntilUnlock() {
	r := &t.c.revokes
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unacked == nil {
		r.unacked = map[*tenure]struct{}{}
	}
	r.unacked[t] = struct{}{}
}

// unackedRequests returns, and forgets, the requests of the tenures that
// were revoked and told and still wait for their last Unlock to
// acknowledge: Close ends them.
func (c *Client) unackedRequests() []driver.Request {
	r := &c.revokes
	r.mu.Lock()
	defer r.mu.Unlock()
	var reqs []driver.Request
	for t := range r.unacked {
		reqs = t.appendRequests(reqs)
	}
	r.unacked = nil
	return reqs
}

// closeRevokes stops the listener and waits for it and for the
// acknowledgements in flight, then acknowledges, within ctx, the revocations
// Close ends: of notHeld, the requests its releases found not held (perhaps
// revoked unheard, see Unlock), and of the tenures still waiting for their
// last Unlock to acknowledge (see unacked). c.done is closed already.
func (c *Client) closeRevokes(ctx context.Context, notHeld []driver.Request) {
	r := &c.revokes
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait() // no revocation is handled after this
	r.acks.Wait()
	if c.caps.revoke == nil {
		return
	}
	for _, req := range append(notHeld, c.unackedRequests()...) {
		if err := c.caps.revoke.AckRevoke(ctx, req); err != nil {
			c.log.Warn("acknowledging a revocation on close failed; the name frees when the revoked lease runs out",
				slog.String(attrLock, req.Name), slog.Any(attrError, err))
		}
	}
}
