package leash

import "time"

// The renewal scheduler's queue: one entry per tracked tenure, kept in two
// heaps, so that a tick visits only the entries with something due and a
// round takes the entries it renews without a scan of every held lock. An
// entry is the scheduler's: only the scheduler reads or writes it, with
// scheduler.mu held. Its tenure keeps a pointer to it only to be found
// again (tenure.sched), and is allocated with it.

// An entry is the scheduler's record of one tracked tenure.
type entry struct {
	t *tenure
	// at is the entry's key in queue.byTime: when the scheduler must look
	// at it next. It is never later than the entry's next event (see
	// nextEvent), but may be earlier: the holder moves some events later
	// without the scheduler (Hold.Touch, Hold.Renew), and the scheduler
	// then finds nothing to do and sets at again.
	at         int64
	dueAt      int64 // renewal due (monotonic ns)
	eligibleAt int64 // renewed with any round that is due, from then
	lastErr    error // the last renewal's failure; nil after a success
	pos        int32 // index in queue.byTime; -1 once no longer tracked
	epos       int32 // index in queue.eligible; -1 when not in it
	renewing   bool  // in a round in flight
	recorded   bool  // listed in a published driver.ClientRecord (see record.go)
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

// queue is the scheduler's set of tracked entries: byTime holds every one
// by at; eligible holds, by eligibleAt, those with renewal on and no round
// in flight; leases counts the entries of each lease, for the record.
type queue struct {
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

// add starts tracking e, whose times are set.
func (q *queue) add(e *entry) {
	q.byTime.push(e)
	if e.t.cfg.interval > 0 {
		q.eligible.push(e)
	}
	for i := range q.leases {
		if q.leases[i].lease == e.t.cfg.lease {
			q.leases[i].n++
			return
		}
	}
	q.leases = append(q.leases, leaseCount{e.t.cfg.lease, 1})
}

// drop stops tracking e, already taken out of byTime.
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
	if e.pos < 0 {
		return
	}
	q.byTime.remove(e)
	q.drop(e)
}

// requeue sets e's key from its times once they changed, and puts it back
// among the eligible when renewal is on and no round is in flight.
func (q *queue) requeue(e *entry) {
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
	ts := make([]*tenure, len(q.byTime.es))
	for i, e := range q.byTime.es {
		ts[i] = e.t
		e.pos, e.epos = -1, -1
	}
	q.byTime.es, q.eligible.es, q.leases = nil, nil, nil
	return ts
}

// A heap is a binary min-heap of entries by key, that keeps each entry's
// index in it up to date (pos), so that any entry can be moved or removed
// in O(log n).
type heap struct {
	es  []*entry
	key func(*entry) int64
	pos func(*entry) *int32
}

func (h *heap) len() int { return len(h.es) }

// min returns the entry with the least key; the heap must not be empty.
func (h *heap) min() *entry { return h.es[0] }

func (h *heap) push(e *entry) {
	h.es = append(h.es, e)
	*h.pos(e) = int32(len(h.es) - 1)
	h.up(len(h.es) - 1)
}

// pop removes and returns the entry with the least key.
func (h *heap) pop() *entry {
	e := h.es[0]
	h.remove(e)
	return e
}

func (h *heap) remove(e *entry) {
	i := int(*h.pos(e))
	last := len(h.es) - 1
	if i != last {
		h.swap(i, last)
	}
	h.es[last] = nil
	h.es = h.es[:last]
	*h.pos(e) = -1
	if i != last {
		h.fixAt(i)
	}
}

// fix restores the order after e's key changed.
func (h *heap) fix(e *entry) { h.fixAt(int(*h.pos(e))) }

func (h *heap) fixAt(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *heap) swap(i, j int) {
	h.es[i], h.es[j] = h.es[j], h.es[i]
	*h.pos(h.es[i]) = int32(i)
	*h.pos(h.es[j]) = int32(j)
}

func (h *heap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h.key(h.es[p]) <= h.key(h.es[i]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down moves the entry at i down; it reports whether it moved.
func (h *heap) down(i int) bool {
	start := i
	n := len(h.es)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && h.key(h.es[r]) < h.key(h.es[l]) {
			c = r
		}
		if h.key(h.es[i]) <= h.key(h.es[c]) {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > start
}
