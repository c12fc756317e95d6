package driver

import "context"

// FenceRaiser is implemented by a store that can raise a name's fencing
// counter without granting anything: after RaiseFence(name, floor) returns
// nil, every later grant of name, to any owner, carries a token greater than
// floor. A quorum of independent stores (package redlock) raises a
// majority's counters to the token it hands out before it hands it out, so
// that the next grant, whichever majority makes it, issues a larger one.
type FenceRaiser interface {
	// RaiseFence raises name's fencing counter to floor when it is lower; it
	// never lowers it, and grants, frees or extends nothing: a holder keeps
	// its lock and lease, though a retry of its acquire (which reports the
	// name's last token, as redisstore's and memstore's do) may then report
	// the floor instead of its grant's token. A floor that is not positive
	// is refused, before any network call, with an error matching
	// leash.ErrInvalidArgument. A name whose counter holds something other
	// than the store's counter is refused with ErrNotALock and left
	// unchanged. Any other error means the outcome is unknown: the counter
	// may or may not have been raised.
	RaiseFence(ctx context.Context, name string, floor int64) error
}
