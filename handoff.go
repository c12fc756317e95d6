package leash

import (
	"time"

	"github.com/leash-go/leash/driver"
)

// Hand-off in fewer round trips (issue #17). On a driver.HandoffStore, a
// release that frees a Mutex or FairMutex grants it at once to the waiter
// that would be served next anyway — the first fair queue place or starving
// Mutex mark — and the wake-up carries the grant: its fencing token and a
// short lease (handoffLease, a queue place's). The woken waiter returns from
// Lock without another round trip; the watchdog renews the lock to its full
// lease halfway through what is left of the short validity (granted,
// scheduler.add), which also picks the grant up; a hold released sooner
// costs no renewal.
//
// Why it is safe:
//
//   - Exclusion and fencing are the store's: the grant is made in the
//     release's atomic step, to one owner, with a fresh token, and excludes
//     everyone as any held lock does (Redisson's clients too).
//   - Validity. The waiter never sees the server's time of the grant. The
//     grant went to the waiter's place, which existed when the release ran,
//     and was taken by one of the waiter's own requests (the owner is the
//     tenure's, new for each acquiring call, so no earlier call's place can
//     be granted to it): the first of them that could take a place
//     (placeSent) was sent before the grant. So the
//     local deadline placeSent + lease − margin comes before the server's
//     end of the grant, as a deadline counted from an acquire's send time
//     does. Counting from when the wake-up arrived instead would not be
//     safe: a wake-up delayed past the grant's lease (a slow subscriber
//     connection) would leave the waiter thinking it holds a lock that has
//     lapsed and been granted again (TestHandoffValidityNegativeControl).
//     When less than half of that validity is left (a long wait), the
//     waiter does not use the grant untold: its next attempt picks it up
//     (an Acquire by the grant's owner returns it with the full lease from
//     that request's send time), one round trip, as without a hand-off.
//   - A waiter that is gone blocks the name for handoffLease at most, as
//     its place would have: the grant lapses unless renewed. One that gives
//     up (ctx cancelled, timed out, Client closed) withdraws its place,
//     which releases a grant handed to it and not picked up; one that took
//     the grant and then finds ctx cancelled releases it (granted).
//   - A waiter that missed the wake-up (a reconnect) finds the grant on its
//     next attempt, which comes within half of handoffLease whatever its
//     queue lease (plan.fallback): the store answers an Acquire by the
//     grant's owner with that grant, not a second hold.
const handoffLease = DefaultQueueLease

// handed returns, and forgets, the grant a release handed to w's owner.
func (ws *waiters) handed(w *waiter) (driver.Wake, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	h := w.handed
	w.handed = driver.Wake{}
	return h, h.Fence != 0
}

// handoffUsable reports whether t may use the grant h, handed to its place
// (see above), without asking the store, and if so the lease its validity
// is counted by and the instant it is counted from. placeSent is the send
// time of the first request that could take t's place; -1 when none was
// sent.
func (c *Client) handoffUsable(t *tenure, h driver.Wake, placeSent int64) (time.Duration, int64, bool) {
	lease := min(h.Lease, t.cfg.lease)
	from := placeSent
	if c.cfg.handoffFromReceipt {
		from = c.now() // the unsafe rule, for the negative control only
	}
	valid := lease - t.cfg.margin
	if placeSent < 0 || t.cfg.interval <= 0 || valid <= 0 || c.now()-from >= int64(valid/2) {
		return 0, 0, false
	}
	return lease, from, true
}
