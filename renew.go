package leash

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/leash-go/leash/driver"
)

// scheduler is the Client's watchdog: one goroutine, whatever the number of
// held locks, with no timer per lock. It renews every held lock once per
// renew interval, batching all the locks that are due together into one
// renewal call (one Renew; on a session store, one keep-alive and one Renew
// that checks); it declares locks lost when their validity deadline,
// MaxHold or liveness deadline passes; and its goroutine runs the
// background releases (release.go) and publishes the holder record
// (record.go). What it tracks is in its queue (queue.go).
//
// Batching: a lock becomes eligible for renewal eligibleFrac of an interval
// after its last renewal and due a full interval after it (less jitter).
// When any lock is due, every eligible lock is renewed with it, so once
// acquisitions stop, every lock is in one cohort after at most two rounds,
// and a steady state of N locks costs one Renew call per interval (which the
// store splits into ceil(N/batch) pipelined scripts).
type scheduler struct {
	c      *Client
	ctx    context.Context // cancelled by stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}
	done   chan *round

	mu      sync.Mutex
	q       queue
	wakeAt  int64 // when the loop's timer fires next (monotonic ns)
	stopped bool
}

// A round is one renewal call in flight (see renewAll).
type round struct {
	es     []*entry
	send   int64
	jitter float64 // fraction of the interval to renew early next time
	res    []driver.RenewResult
	sent   chan struct{} // closed when the store call has returned
}

const (
	forever = math.MaxInt64
	// jitterFrac is the largest fraction of an interval by which a renewal
	// is brought forward, so that clients started together drift apart.
	jitterFrac = 0.1
	// eligibleFrac is the fraction of an interval after its last renewal
	// from which a lock is renewed with any round that is due. A round comes
	// at least (1 - jitterFrac) of an interval after the last, so with
	// eligibleFrac below half of that no two cohorts can stay apart: when
	// the first of them is due, the other has been eligible for a while. (At
	// one half, two cohorts that the jitter set just under half an interval
	// apart each found the other not yet eligible, round after round.)
	eligibleFrac = 0.4
)

func (s *scheduler) start(c *Client) {
	s.c = c
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.kick = make(chan struct{}, 1)
	s.done = make(chan *round)
	s.wakeAt = forever
	s.q.init()
	// Owner: the Client. Stops when Close calls stop.
	s.wg.Go(s.loop)
}

// stop ends the scheduler, waits for its goroutines, and returns the tenures
// it was tracking. Background releases still queued are then the retries'
// rest.
func (s *scheduler) stop() []*tenure {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.c.retries.close()
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.clear()
}

// add starts tracking a granted tenure. It reports false if the scheduler has
// stopped (the Client is closing). due, when not zero, is when to renew it
// first (monotonic ns), sooner than its interval: a lock handed over by a
// release holds a short lease until then.
func (s *scheduler) add(t *tenure, due int64) bool {
	iv := int64(t.cfg.interval)
	jitter := rand.Float64() * jitterFrac
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	e := &t.sched
	e.schedule(t.grantAt, jitter)
	if due != 0 {
		e.eligibleAt, e.dueAt = due, due
	} else if iv > 0 && s.wakeAt >= e.dueAt && s.wakeAt <= t.grantAt+iv {
		// The loop already wakes inside this tenure's renewal window (at
		// most one interval after the grant): renew it then, with whatever
		// is due, rather than wake the loop now to reset its timer. Locks
		// taken one after another would otherwise wake it on every Lock.
		e.dueAt = s.wakeAt
	}
	e.at = e.nextEvent()
	s.q.add(e)
	s.wakeLocked(e.at)
	if s.c.rec.store != nil && s.c.rec.until.Load()-t.grantAt < int64(t.cfg.lease) {
		// The Client's record is missing or could expire before this
		// lock: the loop looks at it soon (see record.go).
		s.wakeLocked(s.c.rec.checkBy(t.grantAt + int64(recordDelay(t.cfg.lease))))
	}
	return true
}

// remove stops tracking t. It is a no-op if t is not tracked.
func (s *scheduler) remove(t *tenure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.q.remove(&t.sched)
}

// renewed records a successful renewal of t sent at send, outside a round
// (Hold.Renew).
func (s *scheduler) renewed(t *tenure, send int64) {
	t.setValid(send)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &t.sched
	e.lastErr = nil
	if t.cfg.interval > 0 {
		e.schedule(send, 0)
	}
	if e.pos >= 0 {
		s.q.requeue(e)
		s.wakeLocked(e.at)
	}
}

// lastErr is the failure of t's last renewal, nil after a success.
func (s *scheduler) lastErr(t *tenure) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return t.sched.lastErr
}

// wake makes the loop wake by at (monotonic ns).
func (s *scheduler) wake(at int64) {
	s.mu.Lock()
	s.wakeLocked(at)
	s.mu.Unlock()
}

// wakeLocked is wake with s.mu held.
func (s *scheduler) wakeLocked(at int64) {
	if at < s.wakeAt {
		s.wakeAt = at
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

func (s *scheduler) loop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		case <-timer.C:
		case r := <-s.done:
			s.finish(r)
		}
		next := s.tick()
		d := time.Hour
		if next != forever {
			d = max(time.Duration(next-s.c.now()), 0)
		}
		timer.Reset(d)
	}
}

type loss struct {
	t      *tenure
	reason Reason
	err    error
}

// tick handles everything due now and returns when the loop must wake next.
// It visits only the entries whose time has come; when a renewal is due, it
// renews with it every entry that is eligible.
func (s *scheduler) tick() int64 {
	now := s.c.now()
	var (
		lost    []loss
		visited []*entry
		batch   []*entry
		anyDue  bool
		fresh   bool // an entry due for renewal is not in the record
	)
	s.mu.Lock()
	q := &s.q
	q.settle()
	for q.byTime.len() > 0 && q.byTime.minKey() <= now {
		e := q.byTime.pop()
		t := e.t
		var l loss
		switch {
		case now >= t.validUntil.Load():
			l = loss{t, expiryReason(e.lastErr), e.lastErr}
		case t.cfg.maxHold > 0 && now >= t.grantAt+int64(t.cfg.maxHold):
			l = loss{t, ReasonMaxHold, nil}
		case t.cfg.liveness > 0 && now >= t.lastTouch.Load()+int64(t.cfg.liveness):
			l = loss{t, ReasonStalled, nil}
		default:
			visited = append(visited, e)
			anyDue = anyDue || t.cfg.interval > 0 && !e.renewing && now >= e.dueAt
			continue
		}
		q.drop(e) // lose will find it untracked
		lost = append(lost, l)
	}
	if anyDue {
		for q.eligible.len() > 0 && q.eligible.minKey() <= now {
			e := q.eligible.pop()
			e.renewing = true
			fresh = fresh || !e.recorded
			batch = append(batch, e)
		}
	}
	for _, e := range visited {
		s.q.requeue(e)
	}
	pub := publication{next: forever}
	if s.c.rec.store != nil {
		pub = s.recordLocked(now, q.longestLease(), fresh)
	}
	var r *round
	if len(batch) > 0 {
		r = &round{es: batch, send: now, jitter: rand.Float64() * jitterFrac, sent: make(chan struct{})}
		for _, e := range batch {
			e.round = r
		}
	}
	todo, next := s.c.retries.take(now)
	if q.byTime.len() > 0 {
		next = min(next, q.byTime.minKey())
	}
	next = min(next, pub.next)
	s.wakeAt = next
	s.mu.Unlock()

	for _, l := range lost {
		l.t.lose(l.reason, l.err)
	}
	if r != nil {
		// Owner: the scheduler. Stops when the Renew call returns, which
		// the round's timeout and stop's cancellation bound.
		s.wg.Go(func() { s.renew(r) })
	}
	if pub.ok {
		s.startPublish(pub)
	}
	if todo != nil {
		// Owner: the scheduler. Stops after one pass over todo.
		s.wg.Go(func() { s.c.retryPass(s.ctx, todo) })
	}
	return next
}

// renew runs one round. Its timeout is the shortest remaining validity in the
// batch, capped at the renew interval: an answer after that is useless, and
// a round that hangs must not keep its locks from being retried.
func (s *scheduler) renew(r *round) {
	timeout := time.Duration(forever)
	n := 0
	for _, e := range r.es {
		n += len(e.t.parts)
	}
	reqs := make([]driver.Request, 0, n)
	for _, e := range r.es {
		t := e.t
		for i := range t.parts {
			reqs = append(reqs, t.request(i))
		}
		timeout = min(timeout, t.cfg.interval, time.Duration(t.validUntil.Load()-r.send))
	}
	ctx, cancel := context.WithTimeout(s.ctx, max(timeout, time.Millisecond))
	r.res = s.c.renewAll(ctx, reqs)
	cancel()
	close(r.sent)
	select {
	case s.done <- r:
	case <-s.ctx.Done():
	}
}

// renewAll renews reqs (see renewStore: one Renew, after one keep-alive on
// a session store) and returns one result per request, whatever the store
// answers: a store that returns a wrong number of results makes every
// outcome unknown.
func (c *Client) renewAll(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	res := c.renewStore(ctx, reqs)
	if len(res) != len(reqs) {
		err := fmt.Errorf("leash: the store returned %d renewal results for %d requests", len(res), len(reqs))
		res = make([]driver.RenewResult, len(reqs))
		for i := range res {
			res[i].Err = err
		}
	}
	return res
}

// A renewal is the outcome of renewing a tenure, folded from its parts'
// results: a part gone or taken loses the tenure (lost), even when another
// part's round trip failed; otherwise any error makes the outcome unknown
// (err). part is the index of the part the outcome is about. The zero value
// is a renewal of every part.
type renewal struct {
	lost Reason // ReasonReleasedElsewhere, ReasonTakenOver or ReasonRevoked; 0 if not lost
	err  error
	part int
}

// fold folds the results of a tenure's parts into one renewal. Every
// renewal of a tenure — the watchdog's round, Hold.Renew, UnlockAfter, and
// a MultiLock's parts held while it waits for the rest — reads its results
// through it.
func fold(res []driver.RenewResult) renewal {
	var out renewal
	for i, r := range res {
		switch {
		case r.Err == nil && r.Status == driver.RenewGone:
			return renewal{lost: ReasonReleasedElsewhere, part: i}
		case r.Err == nil && r.Status == driver.RenewTaken:
			return renewal{lost: ReasonTakenOver, part: i}
		case r.Err == nil && r.Status == driver.RenewRevoked:
			return renewal{lost: ReasonRevoked, part: i}
		case r.Err != nil:
			out = renewal{err: r.Err, part: i}
		case r.Status != driver.Renewed && out.err == nil:
			out = renewal{err: fmt.Errorf("the store returned an unknown renewal status %d", r.Status), part: i}
		}
	}
	return out
}

// finish applies a round's results.
func (s *scheduler) finish(r *round) {
	now := s.c.now()
	var (
		lost    []loss
		failed  int
		lastErr error
	)
	s.mu.Lock()
	off := 0
	for _, e := range r.es {
		t := e.t
		v := fold(r.res[off : off+len(t.parts)])
		off += len(t.parts)
		e.renewing, e.round = false, nil
		if e.pos < 0 {
			continue // released or lost meanwhile
		}
		switch {
		case v.lost != 0:
			lost = append(lost, loss{t, v.lost, nil})
			continue
		case v.err != nil:
			e.lastErr = v.err
			e.dueAt = now + int64(retryDelay(t.cfg.interval))
			failed++
			lastErr = v.err
		default:
			t.setValid(r.send)
			e.lastErr = nil
			e.schedule(r.send, r.jitter)
		}
		s.q.requeue(e)
	}
	s.mu.Unlock()
	for _, l := range lost {
		l.t.lose(l.reason, l.err)
	}
	log := s.c.log
	if failed > 0 {
		log.Warn("renewal failed; retrying until the validity deadline",
			slog.Int(attrCount, failed), slog.Any(attrError, lastErr))
	}
	log.Debug("renewal round", slog.Int(attrCount, len(r.es)), slog.Int("failed", failed),
		slog.Duration("took", time.Duration(now-r.send)))
	s.c.observe(Event{Op: OpRenewed, Locks: len(r.es), Failed: failed, Err: lastErr, Took: time.Duration(now - r.send)})
}

// retryDelay is how soon a failed renewal is retried.
func retryDelay(interval time.Duration) time.Duration {
	return min(max(interval/8, 5*time.Millisecond), time.Second)
}

// inFlight returns the renewal round in flight that renews t, or nil.
func (s *scheduler) inFlight(t *tenure) *round {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := &t.sched; e.renewing {
		return e.round
	}
	return nil
}
