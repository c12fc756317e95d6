package redisstore

import (
	"sync/atomic"
	"time"
)

// lastArg keeps the last script argument made for a key, boxed: for an
// argument that rarely changes (a lease in milliseconds, the latch's life,
// the restart grace), so that passing it as an interface value does not
// allocate on every call. A miss makes and keeps the new one.
type lastArg[K comparable] struct {
	p atomic.Pointer[keyedArg[K]]
}

type keyedArg[K comparable] struct {
	k K
	v any
}

// get returns the argument for k, made by mk on a miss.
func (a *lastArg[K]) get(k K, mk func(K) any) any {
	if last := a.p.Load(); last != nil && last.k == k {
		return last.v
	}
	v := mk(k)
	a.p.Store(&keyedArg[K]{k, v})
	return v
}

// ownerArgs returns an empty argument list with room for six arguments,
// and a pointer to a copy of owner to pass among them (go-redis writes a
// *string as the string): one allocation where the list and the boxed owner
// would be two.
func ownerArgs(owner string) ([]any, *string) {
	b := &struct {
		args  [6]any
		owner string
	}{owner: owner}
	return b.args[:0], &b.owner
}

// msArg is a duration's script argument: whole milliseconds, at least 1.
func msArg(d time.Duration) any { return ms(d) }

// waitMSArg is a place lifetime's script argument (see waitMS).
func waitMSArg(d time.Duration) any { return waitMS(d) }

// leaseMS is a lease's script argument (ms(d), boxed once per lease).
func (s *Store) leaseMS(d time.Duration) any { return s.leaseArg.get(d, msArg) }

// graceKey is what the acquire scripts' grace argument depends on.
type graceKey struct {
	lease time.Duration
	f     *serverFacts
}
