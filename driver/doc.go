// Package driver is the contract between the leash core and a lock server:
// what a store must do, what it may do, and how the core finds out. Users of
// leash do not need it; authors of a store start here, and package storetest
// is its executable definition.
//
// # The required core
//
// Every store is a [Store]: an exclusive, leased, fenced lock on a name, in
// three methods.
//
//   - Acquire takes the lock in one atomic step (one round trip), sets its
//     lease by the server's clock, and returns a fencing token strictly
//     greater than every earlier grant of the name; or, when someone else
//     holds it, how long until that holder's lease runs out.
//   - Renew extends many leases in one call and reports each lock's outcome
//     apart: one failing lock or node never fails the others.
//   - Release drops a lock only for its owner, and a retried release reports
//     what the first attempt did.
//
// The core waits for a busy lock by sleeping until the remaining lease
// Acquire reported ("poll me after d"), and at most a second, unless the
// store is also a [Watcher], which tells waiters the moment a lock is
// released.
//
// A store does not count re-entries, know owners' goroutines, keep timers,
// or decide when to renew: the core does all of that, the same way on every
// store. A store that implements only the required core passes
// storetest's required section, and every Mutex works on it.
//
// # Capabilities
//
// Everything else is optional, and the core discovers it by interface:
//
//   - [KindStore]: lock kinds beyond KindMutex — a fair queue (KindFair),
//     read-write locks (KindRead, KindWrite), semaphores (KindPermit) — with
//     [Withdrawer] for the waiting places the fair queue and waiting writers
//     leave, and [PermitSetter] to resize a semaphore.
//   - [StarvationStore]: the Mutex's starvation mode, starving waiters'
//     marks that newcomers queue behind (with [Withdrawer]); without it the
//     Mutex is unfair.
//   - [HandoffStore]: a release grants the lock to the first fair place or
//     starving mark and the wake-up carries the grant, so the woken waiter
//     returns without another round trip (with [Withdrawer]).
//   - [ClientWatcher]: a wake-up for the first fair place or starving mark
//     goes to that waiter's client alone, not to every client waiting on the
//     name.
//   - [MultiStore]: several names in one atomic step (MultiLock).
//   - [Admin]: inspect a name, list locks by pattern, force one free: what
//     the leash CLI's show, ls and unlock need.
//   - [Revoker]: take a lock from a live holder safely: the holder's client
//     is told at once, and a tombstone grants the name to no one else until
//     the holder acknowledged or its lease ran out (leash unlock --force).
//   - [SessionStore]: a server that keeps every lock of a client alive with
//     one keep-alive (an etcd lease, a ZooKeeper session); the core then
//     renews the session, not each lock.
//   - [ClientRecorder]: records of who holds what, for operators.
//   - [JobStore]: scheduled jobs (package schedule): a claim of each tick
//     of a job, granted once and judged by the server's clock, and the last
//     runs of each job, kept beside its run lock.
//   - [NameChecker] (stricter names) and [Validator] (a construction error).
//   - [Drifter]: a drift allowance that the core keeps each hold's
//     validity deadline clear of (a quorum of servers, package redlock).
//   - [FenceRaiser]: raise a name's fencing counter to a floor without
//     granting anything, so that a quorum of independent stores (package
//     redlock) can keep its tokens growing whichever majority grants next.
//
// A lock kind the store lacks fails before any round trip, with an error
// that matches ErrUnsupported and names the store (its String method when it
// is a fmt.Stringer, its type otherwise) and the kind. Each capability has
// its own section in storetest, run when the store claims it.
//
// # Rules every method keeps
//
// Lease time, and every deadline a store keeps, is measured by the server's
// clock, never the client's. Every method is safe for concurrent use. An
// error from Acquire means the outcome is unknown (the lock may have been
// granted), except for the definite refusals ErrNotALock, ErrUpgrade and
// ErrUnsupported.
//
// A store is often shared with an application's own data, so it never
// deletes, truncates or changes the expiry of anything that is not a lock of
// the expected shape: every method that would touch such a name refuses it
// with a *NotALockError saying what is there (Renew reports RenewGone), and
// recognises a lock the same way everywhere, List included.
//
// # Opening by URL
//
// A store module registers a scheme ([Register], from its init function), so
// that [Open] and the leash CLI can open "redis://…", "mem://" and any other
// registered store from a URL. Open reads only the scheme and gives the
// store's [Opener] the URL as written, to parse as the store's URLs need; an
// opener says "this URL cannot name a store" with an error matching
// [ErrBadURL], and shows no password in any error ([Redact]).
package driver
