package leash

import (
	"strconv"
	"time"

	"github.com/leash-go/leash/driver"
)

// An Observer receives a Client's lock events as they happen, for metrics:
// the prom module turns them into Prometheus collectors. Observe runs on the
// goroutine where the event happens: the caller of Lock or Unlock (and their
// kin), the watchdog's (renewal rounds, most losses), a caller of Hold.Err,
// Hold.Lost or a hold context's Err that notices the validity has passed, or
// Close's. It is never called with leash's own locks held, but it must be
// quick, must not block, must be safe for concurrent use, and must not call
// back into the Client (Close from the watchdog's goroutine would wait for
// itself).
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// Op says what an [Event] reports.
type Op uint8

// The events an Observer receives. A tenure is a lock from its grant to its
// end: re-entries, and the holds they add and drop, are not events. Every
// tenure whose grant is observed ends exactly once, released or lost, after
// that grant; so acquired minus released minus lost is the number of locks
// held.
const (
	// OpAcquired: an attempt to take a lock (Lock, TryLock, RLock,
	// Acquire and their kin, when not a re-entry) got it. Wait is how long
	// the call had taken.
	OpAcquired Op = iota + 1
	// OpNotAcquired: such an attempt ended without the lock. Err says why:
	// a *NotAcquiredError when someone else held it until the call gave up
	// (TryLock, a context that ended; also a grant that came just as the
	// context ended, and was given back); another error when the store
	// failed or refused, or the Client closed while the call waited. Wait
	// is how long the call took. Calls refused before any attempt (bad
	// options, a closed Client, a context already done) are not events. A
	// grant that comes just as the Client closes is reported acquired, then
	// lost (ReasonClosed), though the caller gets ErrClosed.
	OpNotAcquired
	// OpReleased: a held lock's last hold was unlocked (Unlock or
	// UnlockAfter). Held is how long it was held.
	OpReleased
	// OpLost: a held lock was lost, while held or as Unlock or UnlockAfter
	// found it gone or taken. Reason says why; Err is the cause, if any.
	// Held is how long it was held. The holder is told first (its context,
	// Lost), the observer just after.
	OpLost
	// OpRenewed: the watchdog finished a renewal round. Locks is how many
	// locks the round tried to renew (a MultiLock counts once), Failed how
	// many of them the store could not renew this time (they are retried
	// until their validity ends), Err the last such failure, and Took the
	// round's duration.
	OpRenewed
	// OpStarving: a waiting Mutex Lock has waited longer than
	// Options.Starvation, or found starving waiters queued before it, and
	// its first attempt since, which made its starving mark, returned (on a
	// store that keeps the marks only); or the Lock marked the name on its
	// first attempt (a Lock of its Client started starving on the name less
	// than a second ago, see Options.Starvation) and that attempt was
	// refused. Wait is how long the call had waited. The call's end is
	// reported as usual.
	OpStarving
)

var opNames = [...]string{OpAcquired: "acquired", OpNotAcquired: "not acquired", OpReleased: "released",
	OpLost: "lost", OpRenewed: "renewed", OpStarving: "starving"}

// String returns the op's name, such as "acquired".
func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// An Event is one thing that happened to a Client's locks; see [Op] for the
// fields each kind of event sets.
type Event struct {
	Op   Op
	Kind driver.Kind
	// Name is the lock's name; for a MultiLock, its first name in lock
	// order. It is unbounded (lock names often carry ids): an observer
	// should not make it a metric label as it is.
	Name   string
	Wait   time.Duration
	Held   time.Duration
	Reason Reason
	Err    error
	Locks  int
	Failed int
	Took   time.Duration
}

// observe sends e to the Client's observer, if it has one.
func (c *Client) observe(e Event) {
	if c.cfg.observer != nil {
		c.cfg.observer.Observe(e)
	}
}

// observeGrant reports that tenure t, whose acquire call began at start,
// was granted.
func (c *Client) observeGrant(t *tenure, start int64) {
	if c.cfg.observer == nil {
		return
	}
	t.announced = true
	c.observe(Event{Op: OpAcquired, Kind: t.kind, Name: t.name(), Wait: time.Duration(c.now() - start)})
}

// observeStarving reports that the acquire call for tenure t, begun at
// start, is starving (see OpStarving).
func (c *Client) observeStarving(t *tenure, start int64) {
	if c.cfg.observer == nil {
		return
	}
	c.observe(Event{Op: OpStarving, Kind: t.kind, Name: t.name(), Wait: time.Duration(c.now() - start)})
}

// observeNotAcquired reports an acquire call for tenure t, begun at start,
// that ended with err, unless err is nil or the grant was reported (and its
// end will be).
func (c *Client) observeNotAcquired(t *tenure, start int64, err error) {
	if c.cfg.observer == nil || err == nil || t.announced {
		return
	}
	c.observe(Event{Op: OpNotAcquired, Kind: t.kind, Name: t.name(), Wait: time.Duration(c.now() - start), Err: err})
}

// observeUnlocked reports the end of tenure t by Unlock or UnlockAfter: lost,
// if the round trip found it gone or taken, else released.
func (c *Client) observeUnlocked(t *tenure, lost *LostError) {
	if lost != nil {
		c.observeEnd(t, OpLost, lost.Reason, lost.Err)
		return
	}
	c.observeEnd(t, OpReleased, 0, nil)
}

// observeEnd reports the end of tenure t: released, or lost for reason.
func (c *Client) observeEnd(t *tenure, op Op, reason Reason, err error) {
	if c.cfg.observer == nil {
		return
	}
	c.observe(Event{Op: op, Kind: t.kind, Name: t.name(), Held: time.Duration(c.now() - t.grantAt), Reason: reason, Err: err})
}
