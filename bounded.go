package leash

import (
	"context"
	"sync"
	"time"
)

// The contexts of releases (and withdrawals and delayed unlocks) are
// detached from the caller's cancellation and bounded by
// Options.ReleaseTimeout. context.WithTimeout gives each its own timer,
// cancellation and channel (five allocations per Unlock, and a timer to
// stop); releaseContext instead rounds each deadline down to a slot of at
// most boundSlot and lets every context of a slot share one channel, closed
// by one timer when the slot ends. Rounding down keeps the bound: a release
// context ends at most one slot before its ReleaseTimeout, never after it.

// boundSlot is the longest slot of release deadlines; a slot is at most a
// sixteenth of ReleaseTimeout.
const boundSlot = 10 * time.Millisecond

// bounds hands out the shared channel of the latest slot (see
// releaseContext). Deadlines only grow, so the latest slot is the only one
// a new context can fall in; earlier slots' timers still close theirs.
type bounds struct {
	mu   sync.Mutex
	slot int64         // end of the latest slot, Client.now() ns; 0 for none
	at   time.Time     // the same instant, as a deadline
	done chan struct{} // closed by a timer at slot
}

// boundedCtx is a release context: ctx's values without its cancellation,
// done when its slot ends.
type boundedCtx struct {
	context.Context // context.WithoutCancel of the caller's
	at              time.Time
	done            chan struct{}
}

func (b *boundedCtx) Deadline() (time.Time, bool) { return b.at, true }
func (b *boundedCtx) Done() <-chan struct{}       { return b.done }
func (b *boundedCtx) Err() error {
	select {
	case <-b.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// releaseContext returns a context with ctx's values but not its
// cancellation, which ends within Options.ReleaseTimeout from now (at
// most a slot sooner, see boundSlot), so that neither a cancelled caller
// nor a dead server can hold a release up. It needs no cancel: the slot's
// timer ends it.
func (c *Client) releaseContext(ctx context.Context) context.Context {
	d := c.cfg.releaseTimeout
	g := int64(min(boundSlot, d/16))
	now := c.now()
	slot := now + int64(d)
	if g > 1 {
		slot -= slot % g
	}
	q := &c.bounds
	q.mu.Lock()
	if slot != q.slot {
		q.slot, q.at, q.done = slot, c.epoch.Add(time.Duration(slot)), make(chan struct{})
		done := q.done
		// Owner: the runtime's timer. Ends at slot, by closing done.
		time.AfterFunc(time.Duration(slot-now), func() { close(done) })
	}
	b := &boundedCtx{Context: context.WithoutCancel(ctx), at: q.at, done: q.done}
	q.mu.Unlock()
	return b
}
