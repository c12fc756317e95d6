package leash

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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
	cfg   lockConfig
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
	return m.acquire(ctx, c.newTenure(driver.KindMutex, m.names, "", m.cfg), wait)
}

// groups splits the tenure's parts into what the store can take atomically,
// in the order they must be taken, as part indexes.
func (m *MultiLock) groups() [][]int {
	index := make(map[string]int, len(m.names))
	for i, n := range m.names {
		index[n] = i
	}
	ms := m.c.caps.multi
	if ms == nil {
		out := make([][]int, len(m.names))
		for i := range m.names {
			out[i] = []int{i}
		}
		return out
	}
	var out [][]int
	for _, g := range ms.Partition(m.names) {
		idx := make([]int, len(g))
		for i, n := range g {
			idx[i] = index[n]
		}
		out = append(out, idx)
	}
	return out
}

// acquireGroup takes one group of parts in one step.
func (m *MultiLock) acquireGroup(ctx context.Context, reqs []driver.Request) (driver.MultiGrant, error) {
	if ms := m.c.caps.multi; ms != nil {
		return ms.AcquireMany(ctx, reqs)
	}
	g, err := m.c.store.Acquire(ctx, reqs[0])
	if err != nil || !g.Acquired {
		return driver.MultiGrant{Remaining: g.Remaining, Grace: g.Grace}, err
	}
	return driver.MultiGrant{Acquired: true, Fences: []int64{g.Fence}}, nil
}

// acquire takes the groups in order, holding each while waiting for the next.
func (m *MultiLock) acquire(ctx context.Context, t *tenure, wait bool) (h *Hold, err error) {
	c := m.c
	var start int64 // for the observer
	if c.cfg.observer != nil {
		start = c.now()
		defer func() { c.observeNotAcquired(t, start, err) }()
	}
	groups := m.groups()
	every := t.cfg.interval
	if every == 0 {
		every = t.cfg.lease / 3
	}
	var (
		held     []driver.Request              // parts taken so far
		heldIdx  []int                         // their part indexes
		sent     = make([]int64, len(t.parts)) // per part: send time of its last grant or renewal
		w        *waiter
		nap      sleeper
		finished bool
	)
	defer func() {
		if w != nil {
			c.waiters.leave(w)
		}
		nap.stop()
		if !finished && len(held) > 0 {
			c.releaseParts(ctx, held, c.now()+int64(t.cfg.lease))
		}
	}()
	for gi := 0; gi < len(groups); {
		reqs := make([]driver.Request, len(groups[gi]))
		for i, p := range groups[gi] {
			reqs[i] = t.request(p)
		}
		send := c.now()
		mg, err := m.acquireGroup(ctx, reqs)
		if err != nil && refused(err) {
			// Nothing of this group was granted; the groups held so far
			// are released on the way out.
			return nil, fmt.Errorf("leash: multilock: %w", err)
		}
		if err != nil {
			for _, r := range reqs {
				c.sched.cleanup(r, send+int64(r.Lease), true)
			}
			if ctx.Err() != nil {
				return nil, &NotAcquiredError{Name: reqs[0].Name, Remaining: -1, Err: ctx.Err()}
			}
			return nil, fmt.Errorf("leash: multilock %q: %w", reqs[0].Name, err)
		}
		if mg.Acquired {
			for i, p := range groups[gi] {
				t.parts[p].fence = mg.Fences[i]
				sent[p] = send
			}
			held = append(held, reqs...)
			heldIdx = append(heldIdx, groups[gi]...)
			gi++
			if w != nil {
				c.waiters.leave(w)
				w = nil
			}
			continue
		}
		if !wait {
			return nil, &NotAcquiredError{Name: reqs[0].Name, Remaining: mg.Remaining, Grace: mg.Grace}
		}
		if w == nil {
			names := make([]string, len(reqs))
			for i, r := range reqs {
				names[i] = r.Name
			}
			if w, err = c.watchFor(ctx, driver.KindMutex, names, t.owner); err != nil {
				return nil, c.waitEnded(reqs[0].Name, mg.Remaining, mg.Grace, err)
			}
			continue
		}
		// Sleep until a release, the holder's expiry, or the renewal of the
		// groups already held, whichever comes first.
		l := locker{cfg: t.cfg}
		d := l.fallback(mg.Remaining, w)
		renewAt := int64(-1)
		if len(heldIdx) > 0 {
			oldest := sent[heldIdx[0]]
			for _, p := range heldIdx[1:] {
				oldest = min(oldest, sent[p])
			}
			renewAt = oldest + int64(every)
			d = min(d, max(time.Duration(renewAt-c.now()), 0))
		}
		if err := c.sleep(ctx, w, &nap, d); err != nil {
			return nil, c.waitEnded(reqs[0].Name, mg.Remaining, mg.Grace, err)
		}
		if renewAt >= 0 && c.now() >= renewAt {
			if err := m.renewHeld(ctx, t, held, heldIdx, sent); err != nil {
				// A group taken earlier was lost while waiting: start over,
				// watching the first group again.
				c.releaseParts(ctx, held, c.now()+int64(t.cfg.lease))
				held, heldIdx, gi = nil, nil, 0
				c.waiters.leave(w)
				w = nil
			}
		}
	}
	finished = true
	return c.granted(ctx, t, slices.Min(sent), start)
}

// renewHeld renews the parts taken so far (held, at part indexes heldIdx),
// recording the send time of those renewed; it returns an error if any part
// is gone or its validity passed.
func (m *MultiLock) renewHeld(ctx context.Context, t *tenure, held []driver.Request, heldIdx []int, sent []int64) error {
	c := m.c
	send := c.now()
	res := c.renewStore(ctx, held)
	if len(res) != len(held) {
		return fmt.Errorf("leash: multilock: store returned %d renewal results for %d requests", len(res), len(held))
	}
	for i, r := range res {
		p := heldIdx[i]
		switch {
		case r.Err == nil && r.Status == driver.Renewed:
			sent[p] = send
		case r.Err == nil:
			return fmt.Errorf("leash: multilock: %q lost while waiting", held[i].Name)
		case send-sent[p] >= int64(t.cfg.lease-t.cfg.margin):
			return errors.Join(fmt.Errorf("leash: multilock: %q expired while waiting", held[i].Name), r.Err)
		}
	}
	return nil
}
