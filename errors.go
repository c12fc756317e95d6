package leash

import (
	"errors"
	"fmt"
	"time"

	"github.com/leash-go/leash/driver"
)

// Sentinel errors. Compare with [errors.Is]: leash wraps them with the lock
// name and, where there is one, the underlying cause.
var (
	// ErrNotAcquired means the lock was held by someone else: TryLock found it
	// taken, or Lock gave up because its context ended. The error is a
	// [*NotAcquiredError] carrying the holder's remaining lease.
	ErrNotAcquired = errors.New("leash: lock not acquired")

	// ErrRestartGrace means a lock was not acquired because the store's
	// server restarted (or is new, or a replica took over) and may have
	// forgotten leases that still run: it grants nothing until they have
	// run out, though no one may hold the lock. The error is a
	// [*NotAcquiredError] whose Grace is set and whose Remaining is the
	// grace left; Lock waits it out like any holder's lease. An operator
	// who knows the server lost nothing can declare it (redisstore's
	// MarkFresh, leash mark-fresh).
	ErrRestartGrace = errors.New("leash: the store's restart grace")

	// ErrNotHeld means the caller tried to release or renew a lock it does not
	// hold: the handle was already unlocked, or the store no longer has the
	// caller as the owner.
	ErrNotHeld = driver.ErrNotHeld

	// ErrLost matches every [*LostError]: the lock ended while the holder still
	// believed it held it.
	ErrLost = errors.New("leash: lock lost")

	// ErrRevoked matches a [*LostError] whose Reason is ReasonRevoked: an
	// operator force-unlocked the lock and the store told the holder at
	// once (see [Client.ForceUnlock]).
	ErrRevoked = errors.New("leash: lock revoked")

	// ErrReleased is the cause of a hold's context after a successful Unlock.
	ErrReleased = errors.New("leash: lock released")

	// ErrClosed is returned by every call on a Client after Close.
	ErrClosed = errors.New("leash: client closed")

	// ErrInvalidArgument matches every error about bad input: names, owners and
	// options. It is returned before any round trip to the store.
	ErrInvalidArgument = errors.New("leash: invalid argument")

	// ErrInvalidName means a lock name was rejected. It matches ErrInvalidArgument.
	ErrInvalidName = fmt.Errorf("%w: lock name", ErrInvalidArgument)

	// ErrInvalidOptions means an Options or LockOptions field was rejected. It
	// matches ErrInvalidArgument; the message names the field.
	ErrInvalidOptions = fmt.Errorf("%w: options", ErrInvalidArgument)

	// ErrNotALock means a lock name holds something that is not a lock of the
	// kind asked for: another application's data (a Redis string, list or
	// plain hash under the same key, say), or a semaphore where a lock is
	// asked for and the reverse. Nothing was granted and nothing was changed:
	// leash never deletes, alters or extends what is not its lock. The error
	// is a [*NotALockError] saying what the name holds. It is a definite
	// refusal, not a store failure: retrying does not help until the name
	// holds a lock again (or nothing).
	ErrNotALock = driver.ErrNotALock

	// ErrUpgrade is returned when the holder of a read lock asks for the
	// write lock on the same name: it would wait for itself. Release the read
	// lock first, or take the write lock and downgrade.
	ErrUpgrade = driver.ErrUpgrade

	// ErrUnsupported means the Client's store lacks what a call needs (a
	// lock kind, a semaphore resize, administration); the message names the
	// store and what it lacks. Nothing was sent to the server.
	ErrUnsupported = driver.ErrUnsupported
)

// NotALockError is returned when a lock name holds something other than a
// lock of the kind asked for (see ErrNotALock); errors.Is(err, ErrNotALock)
// reports true for it. Found says in a few words what the name holds.
type NotALockError = driver.NotALockError

// NotAcquiredError is returned when a lock could not be taken because someone
// else holds it, or because the store is in its restart grace (Grace).
// errors.Is(err, ErrNotAcquired) reports true for it, and errors.Is(err,
// ErrRestartGrace) when Grace is set; when the wait ended because its
// context did, errors.Is(err, ctx.Err()) does too.
type NotAcquiredError struct {
	// Name is the lock name.
	Name string
	// Remaining is the holder's remaining lease as the store last reported it,
	// or a negative value when the store could not tell (no expiry, or the
	// holder released it just before the answer). With Grace, it is the time
	// left in the restart grace.
	Remaining time.Duration
	// Grace reports that the store refused because of its restart grace (see
	// ErrRestartGrace), not because someone holds the lock.
	Grace bool
	// Err is why the wait ended: nil for TryLock, the context's error for Lock.
	Err error
}

func (e *NotAcquiredError) Error() string {
	var msg string
	switch {
	case e.Grace:
		msg = fmt.Sprintf("leash: lock %q not acquired: the lock server restarted, or is new, and may have forgotten leases that still run: no lock is granted", e.Name)
		if e.Remaining >= 0 {
			msg += fmt.Sprintf(" for %v more", e.Remaining.Round(time.Second/10))
		}
		msg += ", so that they run out (the store's restart grace)"
	case errors.As(e.Err, new(*LateGrantError)), e.Err != nil && e.Remaining < 0:
		// The wait ended with no holder's lease to tell: the lock was not
		// tried (ctx had ended), or the outcome was given back.
		msg = fmt.Sprintf("leash: lock %q not acquired", e.Name)
	default:
		msg = fmt.Sprintf("leash: lock %q not acquired: held by another owner", e.Name)
		if e.Remaining >= 0 {
			msg += fmt.Sprintf(" for another %v", e.Remaining.Round(time.Millisecond))
		}
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is reports whether target is ErrNotAcquired, or ErrRestartGrace when the
// refusal was the grace's.
func (e *NotAcquiredError) Is(target error) bool {
	return target == ErrNotAcquired || (e.Grace && target == ErrRestartGrace)
}

// Unwrap returns the reason the wait ended, if any.
func (e *NotAcquiredError) Unwrap() error { return e.Err }

// LateGrantError is the reason, in a [NotAcquiredError], that a lock was
// granted but not returned: the store's answer came after the grant's
// validity had ended (the acquire took longer than Lease less SafetyMargin:
// the server or the network stalled), so the lock may already be someone
// else's. The grant was given back. Lock tries again; TryLock returns this.
type LateGrantError struct {
	Took   time.Duration // from sending the acquire to its answer
	Lease  time.Duration
	Margin time.Duration // the safety margin
}

func (e *LateGrantError) Error() string {
	return fmt.Sprintf("granted only after the grant's validity had ended (the acquire took %v; lease %v less safety margin %v), and given back",
		e.Took.Round(time.Millisecond), e.Lease, e.Margin)
}

// Reason says why a lock was lost.
type Reason uint8

// Reasons a hold can be lost. The zero value is not a valid reason.
const (
	// ReasonExpired: the local validity deadline passed without a successful
	// renewal, for instance because the process was paused or a fixed lease ran
	// out. The store may free the lock at any moment after this.
	ReasonExpired Reason = iota + 1
	// ReasonUnreachable: renewals failed with store errors until the validity
	// deadline passed. LostError.Err holds the last error.
	ReasonUnreachable
	// ReasonReleasedElsewhere: the store no longer has the lock: it was
	// force-unlocked, deleted, expired on the server, or the server lost its
	// data in a restart.
	ReasonReleasedElsewhere
	// ReasonTakenOver: the store reports that another owner holds the lock.
	ReasonTakenOver
	// ReasonMaxHold: the hold reached its MaxHold; the watchdog stopped renewing.
	ReasonMaxHold
	// ReasonStalled: the holder opted into liveness checks and did not call
	// Hold.Touch in time; the watchdog stopped renewing.
	ReasonStalled
	// ReasonClosed: the Client was closed while the lock was held.
	ReasonClosed
	// ReasonRevoked: an operator force-unlocked the lock and the store told
	// the holder (see [Client.ForceUnlock]), by a message heard at once or
	// at the next renewal. errors.Is(err, ErrRevoked) matches it.
	ReasonRevoked
)

var reasonText = [...]string{
	ReasonExpired:           "expired",
	ReasonUnreachable:       "store unreachable",
	ReasonReleasedElsewhere: "released elsewhere",
	ReasonTakenOver:         "taken over",
	ReasonMaxHold:           "max hold reached",
	ReasonStalled:           "holder stalled",
	ReasonClosed:            "client closed",
	ReasonRevoked:           "revoked",
}

// String returns the reason in a few words, as used in logs and by the CLI.
func (r Reason) String() string {
	if int(r) < len(reasonText) && reasonText[r] != "" {
		return reasonText[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// LostError reports that a lock ended while its holder still held it. It is
// the cause of the hold's context ([context.Cause]) and what [Hold.Err]
// returns; errors.Is(err, ErrLost) reports true for it.
type LostError struct {
	// Name is the lock name.
	Name string
	// Fence is the fencing token of the lost tenure.
	Fence int64
	// Reason says why the lock was lost.
	Reason Reason
	// Err is the underlying cause, if any: the last store error for
	// ReasonUnreachable, ErrNotHeld when Unlock found the lock gone.
	Err error
}

func (e *LostError) Error() string {
	msg := fmt.Sprintf("leash: lock %q lost (fence %d): %s", e.Name, e.Fence, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is reports whether target is ErrLost, or ErrRevoked for a lock revoked.
func (e *LostError) Is(target error) bool {
	return target == ErrLost || (target == ErrRevoked && e.Reason == ReasonRevoked)
}

// Unwrap returns the underlying cause, if any.
func (e *LostError) Unwrap() error { return e.Err }
