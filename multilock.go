package leash

import (
	"context"
	"fmt"
	"slices"

	"github.com/leash-go/leash/driver"
)

// MaxMultiNames is the most names one MultiLock accepts.
const MaxMultiNames = 1024

// MultiLock takes several exclusive locks all or nothing, obtained from
// [Client.MultiLock]. Its hold covers every name: one tenure, one context,
// one loss signal (any name lost loses the whole hold), and one fencing token
// per name ([Hold.FenceOf]).
//
// Names the store can take together (on Redis, names in one hash slot — all
// of them on a single server) are taken by one atomic step in one round
// trip. Otherwise the names are taken group by group in one global order, so
// that two MultiLocks over overlapping names cannot deadlock; groups already
// taken are renewed while a later one is awaited, and released before Lock
// returns if it gives up. The locks are Mutex locks: a Mutex on any of the
// names excludes the MultiLock, and the reverse.
//
// Re-entry works through the hold's context, as for [Mutex]. Explicit owners
// (WithOwner) do not apply to MultiLock. Locking a MultiLock inside a hold of
// one of its names returns an error rather than waiting for itself.
type MultiLock struct {
	c     *Client
	names []string // sorted
	cfg   *lockConfig
	err   error
}

// MultiLock returns the lock over names (at least one, each at most once, at
// most MaxMultiNames). opts, at most one, overrides the Client's lock options.
func (c *Client) MultiLock(names []string, opts ...*LockOptions) *MultiLock {
	m := &MultiLock{c: c, names: slices.Sorted(slices.Values(names))}
	switch {
	case len(names) == 0:
		m.err = fmt.Errorf("%w: MultiLock needs at least one name", ErrInvalidArgument)
		return m
	case len(names) > MaxMultiNames:
		m.err = fmt.Errorf("%w: MultiLock over %d names; the limit is %d", ErrInvalidArgument, len(names), MaxMultiNames)
		return m
	}
	for i, n := range m.names {
		if i > 0 && m.names[i-1] == n {
			m.err = fmt.Errorf("%w: MultiLock: name %q appears twice", ErrInvalidArgument, truncate(n))
			return m
		}
		if err := checkName(c.store, n); err != nil {
			m.err = err
			return m
		}
	}
	l := c.newLocker(driver.KindMutex, m.names[0], opts)
	m.cfg, m.err = l.cfg, l.err
	return m
}

// Names returns the lock names, sorted.
func (m *MultiLock) Names() []string { return slices.Clone(m.names) }

// Lock takes every lock, waiting as long as ctx allows. See [Mutex.Lock] for
// ctx and errors; a NotAcquiredError names the lock that was not free.
func (m *MultiLock) Lock(ctx context.Context) (*Hold, error) { return m.lock(ctx, true) }

// TryLock makes one attempt per group of names and does not wait: it takes
// every lock, or none. See [Mutex.TryLock].
func (m *MultiLock) TryLock(ctx context.Context) (*Hold, error) { return m.lock(ctx, false) }

func (m *MultiLock) lock(ctx context.Context, wait bool) (*Hold, error) {
	c := m.c
	if m.err != nil {
		return nil, m.err
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, &NotAcquiredError{Name: m.names[0], Remaining: -1, Err: err}
	}
	for _, n := range m.names {
		t := tenureIn(ctx, c, n)
		for ; t != nil && !t.alive(); t = t.parent {
		}
		if t == nil {
			continue
		}
		// A tenure's parts are in its lock's name order, sorted for a MultiLock.
		if slices.EqualFunc(t.parts, m.names, func(p part, n string) bool { return p.name == n }) {
			if h := t.reenter(ctx); h != nil {
				return h, nil
			}
			continue
		}
		return nil, fmt.Errorf("%w: %q is held through this context by another hold; MultiLock would wait for itself",
			ErrInvalidArgument, n)
	}
	return c.acquire(ctx, &plan{t: c.newTenure(driver.KindMutex, m.names, "", m.cfg), wait: wait, many: true})
}
