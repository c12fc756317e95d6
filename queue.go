package leash

import "time"

// The renewal scheduler's queue: one entry per tracked tenure, kept in two
// heaps, so that a tick visits only the entries with something due and a
// round takes the entries it renews without a scan of every held lock. A
// new entry waits in a plain list until the next tick moves it into the
// heaps: a lock taken and released in between (most of them, in a
// Lock+Unlock loop) costs an append and a swap, no heap work. An
// entry is the scheduler's: only the scheduler reads or writes it, with
// scheduler.mu held. It sits in its tenure (tenure.sched) only to be
// allocated with it and found again.

// An entry is the scheduler's record of one tracked tenure.
type entry struct {
	t *tenure
	// at is the entry's key in queue.byTime: when the scheduler must look
	// at it next. It is never later than the entry's next event (see
	// nextEvent), but may be earlier: the holder moves some events later
	// without the scheduler (Hold.Touch, Hold.Renew), and the scheduler
	// then finds nothing to do and sets at again.
	at         int64
	dueAt      int64  // renewal due (monotonic ns)
	eligibleAt int64  // renewed with any round that is due, from then
	lastErr    error  // the last renewal's failure; nil after a success
	round      *round // the round in flight, while renewing
	pos        int32  // index in queue.byTime, or queue.fresh when fresh; -1 once no longer tracked
	epos       int32  // index in queue.eligible; -1 when not in it
	fresh      bool   // in queue.fresh, not yet in the heaps
	renewing   bool   // in a round in flight
	recorded   bool   // listed in a published driver.ClientRecord (see record.go)
}

// init makes e the untracked entry of t.
func (e *entry) init(t *tenure) { *e = entry{t: t, pos: -1, epos: -1} }

// schedule sets e's renewal times from base, when its grant or last
// renewal was sent: eligible eligibleFrac of an interval later, due a full
// interval later less jitter (a fraction of the interval).
func (e *entry) schedule(base int64, jitter float64) {
	iv := int64(e.t.cfg.interval)
	e.eligibleAt = base + int64(eligibleFrac*float64(iv))
	e.dueAt = base + iv - int64(jitter*float64(iv))
}

// nextEvent is the next time the scheduler must look at e: its validity
// deadline, MaxHold, liveness deadline, or renewal, whichever comes first.
func (e *entry) nextEvent() int64 {
	t := e.t
	next := t.validUntil.Load()
	if t.cfg.maxHold > 0 {
		next = min(next, t.grantAt+int64(t.cfg.maxHold))
	}
	if t.cfg.liveness > 0 {
		next = min(next, t.lastTouch.Load()+int64(t.cfg.liveness))
	}
	if t.cfg.interval > 0 && !e.renewing {
		next = min(next, e.dueAt)
	}
	return next
}

// queue is the scheduler's set of tracked entries: fresh holds those added
// since the last tick; byTime holds every other one by at; eligible holds,
// by eligibleAt, those of byTime with renewal on and no round in flight;
// leases counts the entries of each lease, for the record.
type queue struct {
	fresh    []*entry
	byTime   heap
	eligible heap
	leases   []leaseCount
}

type leaseCount struct {
	lease time.Duration
	n     int
}

func (q *queue) init() {
	q.byTime = heap{key: func(e *entry) int64 { return e.at }, pos: func(e *entry) *int32 { return &e.pos }}
	q.eligible = heap{key: func(e *entry) int64 { return e.eligibleAt }, pos: func(e *entry) *int32 { return &e.epos }}
}

// add starts tracking e, whose times are set: in fresh, until settle.
func (q *queue) add(e *entry) {
	e.fresh, e.pos = true, int32(len(q.fresh))
	q.fresh = append(q.fresh, e)
	for i := range q.leases {
		if q.leases[i].lease == e.t.cfg.lease {
			q.leases[i].n++
			return
		}
	}
	q.leases = append(q.leases, leaseCount{e.t.cfg.lease, 1})
}

// settle moves the fresh entries into the heaps. The scheduler calls it
// first thing in each tick, which add wakes by each entry's first event.
func (q *queue) settle() {
	for _, e := range q.fresh {
		e.fresh, e.pos = false, -1
		q.byTime.push(e)
		if e.t.cfg.interval > 0 {
			q.eligible.push(e)
		}
	}
	clear(q.fresh)
	q.fresh = q.fresh[:0]
}

// len is the number of tracked entries.
func (q *queue) len() int { return len(q.fresh) + q.byTime.len() }

// each calls f with every tracked entry, in no particular order.
func (q *queue) each(f func(*entry)) {
	for _, e := range q.fresh {
		f(e)
	}
	q.byTime.each(f)
}

// drop stops tracking e, already taken out of byTime or fresh.
func (q *queue) drop(e *entry) {
	if e.epos >= 0 {
		q.eligible.remove(e)
	}
	for i := range q.leases {
		if q.leases[i].lease == e.t.cfg.lease {
			if q.leases[i].n--; q.leases[i].n == 0 {
				last := len(q.leases) - 1
				q.leases[i] = q.leases[last]
				q.leases = q.leases[:last]
			}
			return
		}
	}
}

// remove stops tracking e; it is a no-op if e is not tracked.
func (q *queue) remove(e *entry) {
	switch {
	case e.pos < 0:
		return
	case e.fresh:
		i, last := e.pos, len(q.fresh)-1
		q.fresh[i] = q.fresh[last]
		q.fresh[i].pos = i
		q.fresh[last] = nil
		q.fresh = q.fresh[:last]
		e.fresh, e.pos = false, -1
	default:
		q.byTime.remove(e)
	}
	q.drop(e)
}

// requeue sets e's key from its times once they changed, and puts it back
// among the eligible when renewal is on and no round is in flight.
func (q *queue) requeue(e *entry) {
	if e.fresh {
		e.at = e.nextEvent() // settle uses it
		return
	}
	if e.t.cfg.interval > 0 && !e.renewing {
		if e.epos < 0 {
			q.eligible.push(e)
		} else {
			q.eligible.fix(e)
		}
	}
	e.at = e.nextEvent()
	if e.pos < 0 {
		q.byTime.push(e)
	} else {
		q.byTime.fix(e)
	}
}

// longestLease is the longest lease of the tracked entries.
func (q *queue) longestLease() time.Duration {
	var d time.Duration
	for _, l := range q.leases {
		d = max(d, l.lease)
	}
	return d
}

// clear stops tracking every entry and returns their tenures.
func (q *queue) clear() []*tenure {
	ts := make([]*tenure, 0, q.len())
	q.each(func(e *entry) {
		ts = append(ts, e.t)
		e.pos, e.epos, e.fresh = -1, -1, false
	})
	q.fresh, q.byTime.ns, q.eligible.ns, q.leases = nil, nil, nil, nil
	return ts
}

// A heap is a binary min-heap of entries by key, that keeps each entry's
// index in it up to date (pos), so that any entry can be moved or removed
// in O(log n). Each node keeps its entry's key beside it: sifting compares
// within the heap's own array and touches an entry only to move it, which
// matters with many goroutines taking and releasing locks through one
// scheduler.
type heap struct {
	ns  []node
	key func(*entry) int64
	pos func(*entry) *int32
}

type node struct {
	key int64
	e   *entry
}

func (h *heap) len() int { return len(h.ns) }

// minKey returns the least key; the heap must not be empty.
func (h *heap) minKey() int64 { return h.ns[0].key }

// each calls f with every entry, in no particular order.
func (h *heap) each(f func(*entry)) {
	for _, n := range h.ns {
		f(n.e)
	}
}

func (h *heap) push(e *entry) {
	h.ns = append(h.ns, node{h.key(e), e})
	*h.pos(e) = int32(len(h.ns) - 1)
	h.up(len(h.ns) - 1)
}

// pop removes and returns the entry with the least key.
func (h *heap) pop() *entry {
	e := h.ns[0].e
	h.remove(e)
	return e
}

func (h *heap) remove(e *entry) {
	i := int(*h.pos(e))
	last := len(h.ns) - 1
	if i != last {
		h.ns[i] = h.ns[last]
		*h.pos(h.ns[i].e) = int32(i)
	}
	h.ns[last] = node{}
	h.ns = h.ns[:last]
	*h.pos(e) = -1
	if i != last {
		h.fixAt(i)
	}
}

// fix restores the order after e's key changed.
func (h *heap) fix(e *entry) {
	i := int(*h.pos(e))
	h.ns[i].key = h.key(e)
	h.fixAt(i)
}

func (h *heap) fixAt(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

// up moves the node at i up to its place; it sets each moved entry's pos.
func (h *heap) up(i int) {
	n := h.ns[i]
	for i > 0 {
		p := (i - 1) / 2
		if h.ns[p].key <= n.key {
			break
		}
		h.ns[i] = h.ns[p]
		*h.pos(h.ns[i].e) = int32(i)
		i = p
	}
	h.ns[i] = n
	*h.pos(n.e) = int32(i)
}

// down moves the node at i down to its place; it reports whether it moved.
func (h *heap) down(i int) bool {
	start, n, size := i, h.ns[i], len(h.ns)
	for {
		l := 2*i + 1
		if l >= size {
			break
		}
		c := l
		if r := l + 1; r < size && h.ns[r].key < h.ns[l].key {
			c = r
		}
		if n.key <= h.ns[c].key {
			break
		}
		h.ns[i] = h.ns[c]
		*h.pos(h.ns[i].e) = int32(i)
		i = c
	}
	h.ns[i] = n
	*h.pos(n.e) = int32(i)
	return i > start
}
