package driver

import (
	"context"
	"strconv"
	"time"
)

// Store is the required core of every lock server: an exclusive, leased,
// fenced lock (KindMutex) on a name. See the package documentation for the
// rules every method keeps and for the optional capabilities.
type Store interface {
	// Acquire takes req.Name for req.Owner in one atomic step, if the kind's
	// rules allow it, and sets its lease to req.Lease: the server keeps the
	// lock at least req.Lease from when the request was sent, by its clock,
	// and may keep it a little longer (a whole-second TTL rounded up); a
	// store that cannot keep a lease that short or that long refuses the
	// request with an error saying so, before granting. On a SessionStore
	// the lock joins the client's session, which must then last req.Lease
	// from the request at least (refresh the session with the grant, or
	// grant under a fresh one): the core counts the lock's validity from the
	// request's send time.
	//
	// KindMutex (and KindFair and KindWrite, for a [KindStore]) is
	// exclusive: it is granted when no one holds the name, or when
	// req.Owner already holds it (a transport retry: the lease is refreshed
	// and the same token returned). Every fresh grant carries a fencing
	// token strictly greater than that of every earlier grant of the name,
	// of any kind. When the request is not granted, Acquire returns
	// Acquired == false, no error, and in Remaining how long until the
	// blocking holder's lease runs out: the core tries again then, if no
	// release notification (see [Watcher]) comes first.
	//
	// An error means the outcome is unknown, except for the definite
	// refusals ErrNotALock, ErrUpgrade and ErrUnsupported, after which
	// nothing was granted.
	Acquire(ctx context.Context, req Request) (Grant, error)

	// Renew sets, for each request, the lease of a lock still held by its
	// owner to req.Lease from now — shorter than before, too: the core
	// shortens a lease to leave a lock to expire (Hold.UnlockAfter) — and
	// reports per request whether it did: one result per request,
	// in order. A failure that affects some requests (one server node, one
	// batch) is reported in those results' Err and must not affect the
	// others. Renew never creates a lock. A name that holds something other
	// than a lock is RenewGone, left as it is. A [SessionStore]'s Renew
	// checks that each owner still holds its lock; it need not extend
	// anything, since the session's keep-alive does.
	Renew(ctx context.Context, reqs []Request) []RenewResult

	// Release drops req.Owner's lock on req.Name (every hold, for a store
	// that counts them) and, when the lock is free, lets waiters know (see
	// [Watcher]). Releasing a lock the owner does not hold returns an error
	// matching ErrNotHeld and changes nothing (matching ErrNotALock too when
	// the name holds something other than a lock). A release retried by the
	// transport after an unanswered attempt must report what the first
	// attempt did: a store whose client library may resend a command marks
	// each call (Redis: a latch key per call), while one SQL statement or
	// one etcd transaction that the driver does not resend needs nothing.
	Release(ctx context.Context, req Request) error
}

// Kind says which kind of lock a request is about.
type Kind uint8

// Lock kinds. Locks of every kind share one name space: the holds of a
// Mutex, a FairMutex and an RWMutex writer on one name are the same lock and
// exclude each other, and readers exclude all three.
const (
	// KindMutex is the exclusive lock of Mutex (Redisson's RLock).
	KindMutex Kind = iota
	// KindFair is the exclusive lock of FairMutex, granted in arrival order.
	KindFair
	// KindRead is a reader's shared lease of an RWMutex.
	KindRead
	// KindWrite is the exclusive writer lock of an RWMutex.
	KindWrite
	// KindPermit is one permit of a Semaphore.
	KindPermit
)

var kindText = [...]string{KindMutex: "mutex", KindFair: "fair", KindRead: "read", KindWrite: "write", KindPermit: "permit"}

// String returns the kind's name.
func (k Kind) String() string {
	if int(k) < len(kindText) {
		return kindText[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Request names one lock operation for the store.
type Request struct {
	// Kind is the kind of lock.
	Kind Kind
	// Name is the lock name, already validated by the core.
	Name string
	// Owner identifies the tenure, unique to it: "<client-id>:<n>", or
	// "<client-id>:<n>@<explicit owner>". The client id is a UUID in its
	// 36-character text form, as Redisson's is: a store that shares its
	// server with an application's data may rely on that shape to tell a
	// lock from the application's keys (see [OwnerClient]).
	Owner string
	// Parent is, on every request of a read tenure downgraded from a write
	// lock, the write tenure's Owner; empty otherwise. Only Acquire of
	// KindRead reads it (see [KindStore]); Renew and Release must ignore it,
	// and a Parent that does not hold the write lock makes an ordinary read.
	Parent string
	// Lease is the lease to set, measured by the server's clock.
	Lease time.Duration
	// Wait is how long a waiter's place lasts without a new attempt: a fair
	// queue place, a waiting-writer mark, a starving Mutex waiter's mark.
	// Used by Acquire of KindFair and KindWrite, and of KindMutex on a
	// [StarvationStore]; zero for an attempt that does not wait (and for a
	// Mutex waiter not yet starving).
	Wait time.Duration
	// Permits is the permit count of a semaphore that does not exist yet.
	// Used by Acquire of KindPermit.
	Permits int
}

// Grant is the result of an Acquire.
type Grant struct {
	// Acquired reports whether the caller now holds the lock.
	Acquired bool
	// Fence is the tenure's fencing token when Acquired.
	Fence int64
	// Remaining is, when not Acquired, how long until the blocking holder's
	// lease (or the fair queue head's place) runs out: positive whenever a
	// holder with a lease blocks, negative only when the store cannot tell
	// (the core then waits up to a lease). It is also when the core tries
	// again if no notification wakes it first.
	Remaining time.Duration
	// Queued reports, when not Acquired, that starving waiters' marks or
	// fair queue places are queued for the name (see [StarvationStore]):
	// the caller will be served after them, so a waiting Mutex marks the
	// name at once rather than when it has waited long. A store may leave
	// it false.
	Queued bool
	// Grace reports, when not Acquired, that no one holds the lock but the
	// store grants nothing yet: its server restarted and may have forgotten
	// leases that still run. Remaining is then the time until the grace
	// ends. The core reports it as leash.ErrRestartGrace.
	Grace bool
}

// RenewStatus is the per-lock outcome of a renewal.
type RenewStatus uint8

// Renewal outcomes.
const (
	// Renewed: the owner still held the lock and its lease was extended.
	Renewed RenewStatus = iota + 1
	// RenewGone: the lock no longer exists on the server.
	RenewGone
	// RenewTaken: the lock exists but the owner does not hold it.
	RenewTaken
	// RenewRevoked: the owner's lock was revoked (see [Revoker]): the name
	// is kept for it by a tombstone it should acknowledge.
	RenewRevoked
)

// RenewResult is the outcome of renewing one lock. When Err is non-nil the
// outcome is unknown and Status is meaningless.
type RenewResult struct {
	Status RenewStatus
	Err    error
}

// Watcher is implemented by a store that notifies waiters when a lock is
// released, so that they need not sleep until the holder's lease ends.
type Watcher interface {
	// Watch arranges for wake to be called with each notification about the
	// locks of kind on name, and returns once notifications are flowing, so
	// that a notification sent after Watch returns is never missed. KindRead
	// and KindWrite share one watch. wake is also called with a Wake for
	// WakeAll when a notification could have been lost (a reconnect); it
	// must not block. The returned stop ends the watch; it may be called
	// once.
	Watch(ctx context.Context, kind Kind, name string, wake func(Wake)) (stop func(), err error)
}

// A Wake is one notification about the locks on a name: which of the
// waiting callers should try again.
type Wake struct {
	// To says which waiters to wake. The zero value wakes every waiter.
	To Waking
	// Head is, when To is WakeHead, the owner at the head of the fair
	// queue: only its waiter is woken.
	Head string
	// Fence is, when not zero, the fencing token of the lock the release
	// granted to Head (see [HandoffStore]); Lease is that grant's lease,
	// from the release, by the server's clock.
	Fence int64
	Lease time.Duration
}

// Waking says which waiters a [Wake] is for.
type Waking uint8

// Whom a notification wakes.
const (
	// WakeAll wakes every waiter: something changed for all of them, or a
	// notification may have been lost.
	WakeAll Waking = iota
	// WakeOne wakes one waiter per client: a mutex or a permit was released.
	WakeOne
	// WakeReaders wakes every waiting reader: the write lock was released
	// and no writer waits.
	WakeReaders
	// WakeWriter wakes one waiting writer: the last reader left, or the
	// writer released with other writers waiting.
	WakeWriter
	// WakeHead wakes the waiter whose owner is Wake.Head, the fair queue's
	// new head.
	WakeHead
)
