package leash

import (
	"strconv"
	"time"
)

// An Observer receives a Client's lock events as they happen, for metrics:
// the prom module turns them into Prometheus collectors. Observe runs on the
// goroutine where the event happens (a Lock caller's, an Unlock caller's, the
// watchdog's), never with leash's own locks held; it must be quick, must not
// block, and must be safe for concurrent use.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// Op says what an [Event] reports.
type Op uint8

// The events an Observer receives. Every tenure (a lock from its grant to its
// end; re-entries and the holds they add are not events) that is acquired
// ends exactly once, released or lost; so acquired minus released minus lost
// is the number of locks held.
const (
	// OpAcquired: a Lock, TryLock or Acquire took the lock. Wait is how long
	// the call took.
	OpAcquired Op = iota + 1
	// OpNotAcquired: a Lock, TryLock or Acquire ended without the lock. Err
	// says why: a *NotAcquiredError when it was held by someone else until
	// the call gave up (TryLock, a context that ended), another error when
	// the store failed. Wait is how long the call took.
	OpNotAcquired
	// OpReleased: a held lock's last hold was unlocked (Unlock or
	// UnlockAfter). Held is how long it was held.
	OpReleased
	// OpLost: a held lock was lost. Reason says why; Err is the cause, if
	// any. Held is how long it was held. The holder is told first (its
	// context, Lost), the observer just after.
	OpLost
	// OpRenewed: the watchdog finished a renewal round. Locks is how many
	// locks it renewed, Failed how many of them the store could not renew
	// this time (they are retried until their validity ends), Err the last
	// such failure, and Took the round's duration.
	OpRenewed
)

var opNames = [...]string{OpAcquired: "acquired", OpNotAcquired: "not acquired", OpReleased: "released",
	OpLost: "lost", OpRenewed: "renewed"}

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
	Kind Kind
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

// observeAcquire reports the end of an acquire call for tenure t that began
// at start (c.now()).
func (c *Client) observeAcquire(t *tenure, start int64, err error) {
	if c.cfg.observer == nil {
		return
	}
	e := Event{Op: OpAcquired, Kind: t.kind, Name: t.name(), Wait: time.Duration(c.now() - start)}
	if err != nil {
		e.Op, e.Err = OpNotAcquired, err
	}
	c.observe(e)
}

// observeEnd reports the end of tenure t: released, or lost for reason.
func (c *Client) observeEnd(t *tenure, op Op, reason Reason, err error) {
	if c.cfg.observer == nil {
		return
	}
	c.observe(Event{Op: op, Kind: t.kind, Name: t.name(), Held: time.Duration(c.now() - t.grantAt), Reason: reason, Err: err})
}
