package leash

import (
	"context"

	"github.com/leash-go/leash/driver"
)

// Mutex is an exclusive, reentrant lock on one name, obtained from
// [Client.Mutex]. It is only a name and its options: it holds no state, may
// be copied, and is safe for concurrent use. Its holds are [Hold] values.
//
// On Redis, a Mutex uses Redisson's RLock layout, so a Go service using leash
// and a Java service using Redisson's RLock or RFencedLock exclude each other
// on the same name.
type Mutex struct{ l locker }

// Mutex returns the exclusive, reentrant lock called name. It makes no round
// trip and allocates little, so it is fine to call per use. opts, at most
// one, overrides the Client's lock options for this lock; a bad name or bad
// options make every Lock and TryLock fail with ErrInvalidArgument.
func (c *Client) Mutex(name string, opts ...*LockOptions) *Mutex {
	return &Mutex{l: c.newLocker(driver.KindMutex, name, opts)}
}

// Name returns the lock name.
func (m *Mutex) Name() string { return m.l.name }

// Lock takes the lock, waiting as long as ctx allows while someone else holds
// it. Waiters are woken by the store when the lock is released (pub/sub on
// Redis); a fallback timer set to the holder's remaining lease covers a lost
// notification or an expiry.
//
// The lock is unfair while nobody has waited long: a release wakes waiters,
// and the first attempt to arrive wins, often the releasing client's own
// next Lock, which costs the fewest round trips. A waiter that has waited
// longer than Options.Starvation (1ms by default) is starving: it marks the
// name on the store, and from then on the lock goes to the marked waiters
// in the order they marked it, every newcomer marking and queueing behind
// them, until no one is left starving (see Options.Starvation).
//
// ctx bounds only the wait, never the hold: cancelling it after Lock returns
// does nothing to the lock. A lock granted just as ctx ends is released
// before Lock returns, so a cancelled Lock never leaves a lock behind.
//
// Re-entry: when ctx is a held lock's [Hold.Context] (or derives from it),
// Lock on the same name re-enters at once: it returns a new Hold on the same
// tenure, with the same fencing token, and only the last Unlock releases the
// lock. A context from [WithOwner] re-enters any hold of the same owner on
// this Client. Any other context waits like any other client, even in the
// same goroutine: locking twice without the hold's context deadlocks until
// ctx ends, as with sync.Mutex.
//
// The lease is renewed by the watchdog while the lock is held (unless
// RenewInterval is NoRenewal) until Unlock, MaxHold, or loss.
//
// Lock may return a *NotAcquiredError matching ErrNotAcquired and ctx.Err()
// when ctx ends first; ErrClosed; an error matching ErrInvalidArgument; a
// *NotALockError matching ErrNotALock, at once, when the name holds
// something other than a lock (nothing was granted or changed); or a wrapped
// store error (the outcome is then unknown to the server, and leash releases
// the lock in the background if it was granted).
//
// A grant whose answer arrives after its validity ended (the acquire took
// longer than Lease less SafetyMargin: the server or the network stalled)
// is never returned, since another owner may hold the lock by then: Lock
// gives it back and tries again.
func (m *Mutex) Lock(ctx context.Context) (*Hold, error) { return m.l.lock(ctx, true) }

// TryLock makes one attempt to take the lock and does not wait. When someone
// else holds it, or starving waiters are queued for it (see
// Options.Starvation), TryLock returns a *NotAcquiredError (matching
// ErrNotAcquired) whose Remaining is the holder's remaining lease (or the
// first starving waiter's mark's). A grant that arrives after its validity
// ended is given back, and TryLock returns a *NotAcquiredError whose Err is
// a *LateGrantError. Re-entry and the other errors are as for [Mutex.Lock].
func (m *Mutex) TryLock(ctx context.Context) (*Hold, error) { return m.l.lock(ctx, false) }
