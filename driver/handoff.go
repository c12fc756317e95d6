package driver

// HandoffStore is implemented by a store whose release can grant an
// exclusive lock at once to the waiter that would be served next anyway —
// the first fair queue place or starving Mutex mark (see [StarvationStore])
// — and tell that waiter in its wake-up, so that it returns from Lock
// without another round trip. The core asks for it by sending Release of
// KindMutex or KindFair with Wait > 0, only when Handoff reports true. The
// rules, on top of Release's and Acquire's:
//
//   - A Release with Wait > 0 that frees the lock while a live place or
//     mark is first in the name's queue grants the lock to that place's
//     owner, in the same atomic step: a fresh grant (a fencing token
//     strictly greater than every earlier one, the restart grace kept: a
//     store that may not grant yet frees the lock as before) with a lease
//     of Wait from the release, by the server's clock — or what the place
//     had left to live, if less — not the owner's own lease. The place is
//     gone. The grant is pending until its owner picks
//     it up. The wake-up for the owner, a [Wake] for WakeHead sent to the
//     KindFair watchers of the name, carries the grant: Fence and Lease.
//     With Wait == 0, or no place first, Release is as before.
//   - A pending grant is a held lock for everyone else: it excludes every
//     other owner (Redisson's clients too), and it lapses when its lease
//     runs out, so a waiter that is gone blocks the name no longer than its
//     place would have.
//   - Its owner picks it up by an Acquire of an exclusive kind (a waiter
//     that missed the wake-up finds it on its next attempt): granted, with
//     the pending grant's token, the lease set to that request's Lease, and
//     no second hold counted. A Renew by its owner extends it as any held
//     lock. Its owner's Release releases it.
//   - A Withdraw by its owner (the waiter gave up: cancelled, timed out)
//     releases a grant it has not picked up by an Acquire, as Release would
//     (without a further hand-off), and wakes the next waiter. (The core
//     withdraws only while it waits, never after it used a grant; after a
//     Renew, a store may release the grant on Withdraw or keep it.)
//   - A store that gives back a grant its owner's Acquire picked up (and
//     so answers that Acquire not granted) must not deliver the grant's
//     wake-up with its Fence afterwards: the lock may have gone to someone
//     else since. It delivers it as a plain WakeHead, or not at all. (The
//     core drops a grant announced before a refused attempt's answer, not
//     one announced after.)
//
// The waiter never sees the server's time of the grant: the core counts the
// validity of a handed-off lock from the send time of the request of its
// own that took the place (the grant came after the place existed), for
// Lease less the safety margin, and renews it to its full lease at once.
type HandoffStore interface {
	// Handoff reports whether the store keeps the rules above. A wrapper
	// around another store reports what the inner store does.
	Handoff() bool
}
