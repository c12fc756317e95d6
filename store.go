package leash

import (
	"context"
	"errors"
	"time"
)

// Store is the contract between the leash core and a lock server. The core
// owns everything that must behave the same on every server (owners,
// reentrancy, waiting, renewal scheduling, lost-lease detection); a Store owns
// only what touches the server. Package storetest is the executable
// definition of this contract: every Store must pass storetest.Run.
//
// Every method must be safe for concurrent use. Lease time, and every
// deadline a store keeps (queue places, reader and permit leases), is
// measured by the server's clock, never the client's.
//
// Requests carry a [Kind]. Every store supports KindMutex; a store that does
// not support another kind returns an error matching ErrUnsupported for it.
// Locks of every kind share one name space: the holds of a Mutex, a
// FairMutex and an RWMutex writer on one name are the same lock and exclude
// each other, and readers exclude all three.
//
// A store never deletes, truncates or changes the expiry of what is not a
// lock. When a name holds something else (another application's key, row or
// node under the same name, or a semaphore where a Mutex, FairMutex or
// RWMutex is asked for, and the reverse), or one of the keys a store keeps
// beside the lock (a fencing counter, a queue) holds what the store does not
// write there, every method that would touch it refuses it with an
// error matching ErrNotALock, a *NotALockError saying what is there, and
// changes nothing: Acquire, AcquireMany, ForceRelease, Inspect and
// SetPermits return it; Release returns it matching ErrNotHeld too; Renew
// reports RenewGone (the lock is not there any more). The refusal is
// definite, never an unknown outcome. A store recognises a lock the same
// way in every method, List included.
//
// A store may implement optional capabilities, which the core discovers:
// [MultiStore] (several locks in one step), [NameChecker] (stricter names),
// [PermitSetter] (a semaphore's permit count), [ClientRecorder] (a record of
// each Client beside the locks, for operators: who holds a lock), and
// [Validator].
type Store interface {
	// Acquire takes req.Name for req.Owner in one atomic step, if the kind's
	// rules allow it, and sets its lease to req.Lease.
	//
	// KindMutex, KindFair, KindWrite: exclusive. A fresh grant has Holds == 1;
	// an acquire by the current owner is a re-entry: Holds is incremented,
	// the lease refreshed and the tenure's token returned unchanged. KindFair
	// grants only to the head of the name's queue (or to anyone when the
	// queue is empty); a caller that is not granted is queued, or its place
	// refreshed, for req.Wait. KindWrite is not granted while readers hold,
	// and a caller that is not granted is marked as a waiting writer for
	// req.Wait, which keeps new readers out.
	//
	// KindRead: shared with other readers, not granted while a writer holds
	// the lock or waits for it, except when req.Parent holds the write lock
	// (a downgrade: the writer's own read lease, under an owner of its own,
	// which outlives the write lock's release). An owner holding a read lease
	// asking for the write lock gets an error matching ErrUpgrade.
	//
	// KindPermit: one of the name's permits, leased to req.Owner. req.Permits
	// sets the permit count if the semaphore does not exist yet.
	//
	// Every fresh grant carries a fencing token strictly greater than that of
	// every earlier grant of the name, of any kind. When the request is not
	// granted, Acquire returns Acquired == false, no error, and in Remaining
	// how long until the blocking holder's (or queue head's) lease runs out,
	// or, with Grace set, until the store's restart grace ends.
	//
	// An error means the outcome is unknown, the lock may have been granted,
	// except for the definite refusals ErrNotALock, ErrUpgrade and
	// ErrUnsupported, after which nothing was granted.
	Acquire(ctx context.Context, req Request) (Grant, error)

	// Renew extends, for each request, the lease of a lock still held by its
	// owner, and reports per request whether it did. It returns one result per
	// request, in order. A failure that affects some requests (one server
	// node, one batch) is reported in those results' Err and must not affect
	// the others. Renew never creates a lock. A name that holds something
	// other than a lock is RenewGone, left as it is.
	Renew(ctx context.Context, reqs []Request) []RenewResult

	// Release drops holds of req.Name owned by req.Owner: one hold with
	// ReleaseOne (re-applying req.Lease while holds remain), every hold with
	// ReleaseAll. When the last hold goes, waiters are notified (see Watch).
	// Releasing a lock the owner does not hold returns an error matching
	// ErrNotHeld and changes nothing (and ErrNotALock too when the name holds
	// something other than a lock). Withdraw removes the owner's place in a
	// fair queue or its waiting-writer mark (it never fails for a missing
	// place). A release retried by the transport after an unanswered attempt
	// must report what the first attempt did.
	Release(ctx context.Context, req Request, mode ReleaseMode) (freed bool, err error)

	// Watch arranges for wake to be called with each notification about the
	// locks of kind on name (see Wake* for the messages), and returns once
	// notifications are flowing, so that a notification sent after Watch
	// returns is never missed. KindRead and KindWrite share one watch. wake
	// may also be called with WakeAll when a notification could have been
	// lost (a reconnect); it must not block. The returned stop ends the
	// watch; it may be called once.
	Watch(ctx context.Context, kind Kind, name string, wake func(msg string)) (stop func(), err error)

	// Inspect reports the state of name as the server sees it, whatever the
	// kind of lock held on it; ErrNotALock when it holds something else.
	Inspect(ctx context.Context, name string) (Info, error)

	// ForceRelease deletes every lock, lease, permit and queue place on name
	// whoever holds them, and wakes every waiter. It reports whether there
	// was anything to delete. It is an operator's tool: holders learn of it
	// at their next renewal. A name that holds something other than a lock
	// is refused with ErrNotALock and left untouched.
	ForceRelease(ctx context.Context, name string) (bool, error)
}

// Notification messages, the argument of the wake function given to
// Store.Watch.
const (
	// WakeOne wakes one waiter per client: a mutex or a permit was released.
	// It is "0", the message Redisson publishes on unlock.
	WakeOne = "0"
	// WakeAll wakes every waiter: something changed for all of them, or a
	// notification may have been lost.
	WakeAll = "1"
	// WakeReaders wakes every waiting reader: the write lock was released
	// and no writer waits.
	WakeReaders = "r"
	// WakeWriter wakes one waiting writer: the last reader left, or the
	// writer released with other writers waiting.
	WakeWriter = "w"
	// Any other message is the owner of the fair queue's new head: only that
	// waiter is woken.
)

// MultiStore is implemented by a Store that can take several exclusive locks
// in one atomic step. Without it, MultiLock takes the names one at a time in
// a global order.
type MultiStore interface {
	// Partition groups names into sets that AcquireMany can take together
	// (on Redis Cluster, one set per hash slot), in the order MultiLock must
	// take them. Every name appears in exactly one set.
	Partition(names []string) [][]string
	// AcquireMany takes every request's lock (all KindMutex, one owner) in
	// one atomic step, or none. Each granted lock is as after Acquire; when
	// not granted, Remaining is the shortest remaining lease among the
	// blocking holders.
	AcquireMany(ctx context.Context, reqs []Request) (MultiGrant, error)
}

// NameChecker is implemented by a Store that accepts fewer names than
// [ValidateName] does (for example because of key-length or hash-slot rules).
// The core calls CheckName before any round trip and wraps a non-nil error
// with ErrInvalidName.
type NameChecker interface {
	CheckName(name string) error
}

// ErrUnsupported is returned by a Store for a lock kind it does not implement.
var ErrUnsupported = errors.New("leash: not supported by this store")

// ErrUpgrade is returned when the holder of a read lock asks for the write
// lock on the same name: it would wait for itself. Release the read lock
// first, or take the write lock and downgrade.
var ErrUpgrade = errors.New("leash: cannot upgrade a read lock to a write lock")

// Kind says which kind of lock a request is about.
type Kind uint8

// Lock kinds.
const (
	// KindMutex is the exclusive, reentrant lock of Mutex (Redisson's RLock).
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
	return "kind(" + string(rune('0'+k)) + ")"
}

// Request names one lock operation for the store.
type Request struct {
	// Kind is the kind of lock.
	Kind Kind
	// Name is the lock name, already validated by the core.
	Name string
	// Owner identifies the tenure, unique to it: "<client-id>:<n>", or
	// "<client-id>:<n>@<explicit owner>" (see WithOwner). The client id is
	// a UUID in its 36-character text form, as Redisson's is: a store that
	// shares its server with an application's data may rely on that shape to
	// tell a lock from the application's keys.
	Owner string
	// Parent is, on every request of a read tenure downgraded from a write
	// lock, the write tenure's Owner; empty otherwise. Only Acquire of
	// KindRead reads it (see Acquire); Renew and Release must ignore it, and
	// a Parent that does not hold the write lock makes an ordinary read.
	Parent string
	// Lease is the lease to set, measured by the server's clock.
	Lease time.Duration
	// Wait is how long a waiter's place lasts without a new attempt: a fair
	// queue place, a waiting-writer mark. Used by Acquire of KindFair and
	// KindWrite.
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
	// Holds is the owner's hold count after the acquire when Acquired.
	Holds int
	// Remaining is, when not Acquired, how long until the blocking holder's
	// lease (or the fair queue head's place) runs out; negative when the
	// store cannot tell.
	Remaining time.Duration
	// Grace reports, when not Acquired, that no one holds the lock but the
	// store grants nothing yet: its server restarted and may have forgotten
	// leases that still run (see ErrRestartGrace). Remaining is then the
	// time until the grace ends.
	Grace bool
}

// MultiGrant is the result of an AcquireMany.
type MultiGrant struct {
	// Acquired reports whether the caller now holds every lock.
	Acquired bool
	// Fences are the locks' fencing tokens, in request order, when Acquired.
	Fences []int64
	// Remaining is, when not Acquired, the shortest remaining lease among
	// the blocking holders; negative when the store cannot tell.
	Remaining time.Duration
	// Grace reports, when not Acquired, a refusal in the store's restart
	// grace, as Grant.Grace does.
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
)

// RenewResult is the outcome of renewing one lock. When Err is non-nil the
// outcome is unknown and Status is meaningless.
type RenewResult struct {
	Status RenewStatus
	Err    error
}

// ReleaseMode says what a Release drops.
type ReleaseMode uint8

// Release modes.
const (
	// ReleaseOne drops one hold, like a Redisson RLock unlock.
	ReleaseOne ReleaseMode = iota + 1
	// ReleaseAll drops every hold of the owner. The core uses it: it counts
	// re-entries itself, so a transport retry of an acquire can never leave a
	// hold behind.
	ReleaseAll
	// Withdraw drops the owner's place in a fair queue, or its waiting-writer
	// mark, when it stops waiting.
	Withdraw
)

// Info describes a name as the server sees it.
type Info struct {
	// Name is the lock name.
	Name string
	// Kind is the kind of lock held on the name: KindMutex for an exclusive
	// hold (Mutex, FairMutex or Redisson), KindWrite or KindRead for an
	// RWMutex, KindPermit for a Semaphore.
	Kind Kind
	// Held reports whether anyone holds the lock (or a permit).
	Held bool
	// Owners lists the owners and their hold counts: one for an exclusive
	// lock, every reader for a read lock, every permit for a semaphore.
	Owners []OwnerHolds
	// Remaining is the remaining lease (the longest, for readers and
	// permits); negative when not held or no expiry.
	Remaining time.Duration
	// Fence is the last fencing token granted for the name (0 if none).
	Fence int64
	// Permits is a semaphore's permit count (0 for other kinds).
	Permits int
	// Queued is the number of waiters with a place in a fair queue or a
	// waiting-writer mark.
	Queued int
	// Waiters is the number of clients watching for a release, or -1 when
	// the store cannot tell.
	Waiters int
}

// OwnerHolds is one owner of a lock and its hold count.
type OwnerHolds struct {
	// Owner is the owner string, "<client-id>:<n>" for a leash tenure.
	Owner string
	// Holds is the store's hold count. leash counts re-entries in the
	// client (see Mutex.Lock), so a leash holder shows 1 however deep it
	// has re-entered; a Redisson holder shows its own count.
	Holds int
	// Kind is the owner's kind of hold (KindRead for a reader on an RWMutex).
	Kind Kind
	// Remaining is this owner's remaining lease when the store tracks one
	// per owner (readers, permits); otherwise negative.
	Remaining time.Duration
}
