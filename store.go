package leash

import (
	"context"
	"time"
)

// Store is the contract between the leash core and a lock server. The core
// owns everything that must behave the same on every server (owners,
// reentrancy, waiting, renewal scheduling, lost-lease detection); a Store owns
// only what touches the server. Package storetest is the executable
// definition of this contract: every Store must pass storetest.Run.
//
// Every method must be safe for concurrent use. Lease time is measured by the
// server's clock, never the client's.
type Store interface {
	// Acquire takes req.Name for req.Owner in one atomic step, if it is free
	// or already held by req.Owner, and sets its lease to req.Lease.
	//
	// A fresh grant has Holds == 1 and a fencing token strictly greater than
	// that of every earlier grant of the name. An acquire by the current owner
	// is a re-entry: it increments Holds, refreshes the lease and returns the
	// tenure's token unchanged. When someone else holds the lock, Acquire
	// returns Acquired == false with the holder's remaining lease and no error.
	//
	// An error means the outcome is unknown: the lock may have been granted.
	Acquire(ctx context.Context, req Request) (Grant, error)

	// Renew extends, for each request, the lease of a lock still held by its
	// owner, and reports per request whether it did. It returns one result per
	// request, in order. A failure that affects some requests (one server
	// node, one batch) is reported in those results' Err and must not affect
	// the others. Renew never creates a lock.
	Renew(ctx context.Context, reqs []Request) []RenewResult

	// Release drops holds of req.Name owned by req.Owner: one hold with
	// ReleaseOne (re-applying req.Lease while holds remain), every hold with
	// ReleaseAll. When the last hold goes, the lock is deleted and waiters are
	// notified (see Watch). Releasing a lock the owner does not hold returns
	// an error matching ErrNotHeld and changes nothing. A release retried by
	// the transport after an unanswered attempt must report what the first
	// attempt did.
	Release(ctx context.Context, req Request, mode ReleaseMode) (freed bool, err error)

	// Watch arranges for wake to be called each time the lock name is
	// released (by any client), and returns once notifications are flowing,
	// so that a release after Watch returns is never missed. wake may also be
	// called when a notification could have been lost (a reconnect); it must
	// not block. The returned stop ends the watch; it may be called once.
	Watch(ctx context.Context, name string, wake func()) (stop func(), err error)

	// Inspect reports the state of the lock name as the server sees it.
	Inspect(ctx context.Context, name string) (Info, error)

	// ForceRelease deletes the lock name whoever holds it and notifies
	// waiters. It reports whether there was a lock to delete. It is an
	// operator's tool: the holder learns of it at its next renewal.
	ForceRelease(ctx context.Context, name string) (bool, error)
}

// NameChecker is implemented by a Store that accepts fewer names than
// [ValidateName] does (for example because of key-length or hash-slot rules).
// The core calls CheckName before any round trip and wraps a non-nil error
// with ErrInvalidName.
type NameChecker interface {
	CheckName(name string) error
}

// Request names one lock operation for the store.
type Request struct {
	// Name is the lock name, already validated by the core.
	Name string
	// Owner identifies the tenure: "<client-id>:<n>" or "<client-id>:@<explicit owner>".
	Owner string
	// Lease is the lease to set, measured by the server's clock.
	Lease time.Duration
}

// Grant is the result of an Acquire.
type Grant struct {
	// Acquired reports whether the caller now holds the lock.
	Acquired bool
	// Fence is the tenure's fencing token when Acquired.
	Fence int64
	// Holds is the owner's hold count after the acquire when Acquired.
	Holds int
	// Remaining is the holder's remaining lease when not Acquired; negative
	// when the store cannot tell (for example a lock without expiry).
	Remaining time.Duration
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

// ReleaseMode says how many holds a Release drops.
type ReleaseMode uint8

// Release modes.
const (
	// ReleaseOne drops one hold, like a Redisson RLock unlock.
	ReleaseOne ReleaseMode = iota + 1
	// ReleaseAll drops every hold of the owner. The core uses it: it counts
	// re-entries itself, so a transport retry of an acquire can never leave a
	// hold behind.
	ReleaseAll
)

// Info describes a lock as the server sees it.
type Info struct {
	// Name is the lock name.
	Name string
	// Held reports whether anyone holds the lock.
	Held bool
	// Owners lists the owners and their hold counts (one owner for a mutex).
	Owners []OwnerHolds
	// Remaining is the remaining lease; negative when not held or no expiry.
	Remaining time.Duration
	// Fence is the last fencing token granted for the name (0 if none).
	Fence int64
	// Waiters is the number of clients waiting for a release, or -1 when the
	// store cannot tell.
	Waiters int
}

// OwnerHolds is one owner of a lock and its hold count.
type OwnerHolds struct {
	Owner string
	Holds int
}
