package driver

// StarvationStore is implemented by a store whose KindMutex has a
// starvation mode: a waiter that has waited too long puts a mark on the name
// that later acquirers respect, so that no waiter is overtaken without end.
// The core sends such a waiter's KindMutex requests with Wait > 0 (a
// starving waiter's mark, as a fair queue place is) only when Starvation
// reports true; without it the Mutex is unfair, as before. The rules, on top
// of KindMutex's:
//
//   - A KindMutex Acquire with Wait > 0 is a starving waiter's. It is
//     granted only when the lock is free and the caller is first among the
//     marks and fair queue places (one queue, in arrival order, so a
//     starving Mutex waiter and a FairMutex waiter are served in the order
//     they came). When not granted, the caller's mark is taken, or
//     refreshed, for Wait: a waiter that dies leaves the queue within one
//     Wait, and its mark stops blocking anyone.
//   - A KindMutex Acquire with Wait == 0 (a waiter not yet starving, a
//     TryLock) is not granted while a live mark or place exists, even when
//     the lock is free: Remaining is then the first mark's remaining life.
//     A re-entry, or a retry of a granted acquire, is granted as before.
//   - Release of a lock with marks queued wakes only the first one's waiter:
//     a [Wake] for WakeHead sent to the KindFair watchers of the name. The
//     core has a starving waiter watch KindFair as well as KindMutex.
//   - Withdraw of a KindMutex request removes its mark.
//
// Clients that know nothing of marks (Redisson's RLock on Redis) are still
// excluded by the lock itself; they are only not made to wait in line. The
// lock is granted to one owner at a time whatever the marks say.
type StarvationStore interface {
	// Starvation reports whether the store keeps the rules above. A
	// wrapper around another store reports what the inner store does.
	Starvation() bool
}
