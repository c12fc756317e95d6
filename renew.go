package leash

import (
	"context"
	"errors"
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
// driver.Store.Renew call; it declares locks lost when their validity deadline,
// MaxHold or liveness deadline passes; and it retries background releases
// (cleanups) of locks whose release or acquire outcome was unknown.
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

	mu       sync.Mutex
	items    []*tenure
	wakeAt   int64 // when the loop's timer fires next (monotonic ns)
	cleanups []*cleanup
	cleaning bool // a cleanup pass is running
	stopped  bool
}

// A round is one driver.Store.Renew call in flight.
type round struct {
	ts     []*tenure
	send   int64
	jitter float64 // fraction of the interval to renew early next time
	res    []driver.RenewResult
}

// A cleanup is a background release of a lock whose state is unknown.
type cleanup struct {
	req     driver.Request
	until   int64 // give up then: the lease has run out on the server
	persist bool  // keep releasing until then, even after a definitive answer
	next    int64 // next attempt
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
	// Owner: the Client. Stops when Close calls stop.
	s.wg.Go(s.loop)
}

// stop ends the scheduler, waits for its goroutines, and returns the tenures
// it was tracking and the pending cleanups.
func (s *scheduler) stop() ([]*tenure, []*cleanup) {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	items, cleanups := s.items, s.cleanups
	for _, t := range items {
		t.idx = -1
	}
	s.items, s.cleanups = nil, nil
	return items, cleanups
}

// add starts tracking a granted tenure. It reports false if the scheduler has
// stopped (the Client is closing).
func (s *scheduler) add(t *tenure) bool {
	iv := int64(t.cfg.interval)
	t.schedule(t.grantAt, rand.Float64()*jitterFrac)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	t.idx = len(s.items)
	s.items = append(s.items, t)
	if iv > 0 && s.wakeAt >= t.dueAt && s.wakeAt <= t.grantAt+iv {
		// The loop already wakes inside this tenure's renewal window (at
		// most one interval after the grant): renew it then, with whatever
		// is due, rather than wake the loop now to reset its timer. Locks
		// taken one after another would otherwise wake it on every Lock.
		t.dueAt = s.wakeAt
	}
	s.wakeLocked(t.nextEvent())
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
	i := t.idx
	if i < 0 {
		return
	}
	last := len(s.items) - 1
	s.items[i] = s.items[last]
	s.items[i].idx = i
	s.items[last] = nil
	s.items = s.items[:last]
	t.idx = -1
}

// renewed records a successful renewal sent at send.
func (s *scheduler) renewed(t *tenure, send int64, jitter float64) {
	t.setValid(send)
	s.mu.Lock()
	defer s.mu.Unlock()
	t.lastErr = nil
	if t.cfg.interval > 0 {
		t.schedule(send, jitter)
	}
	if t.idx >= 0 {
		s.wakeLocked(t.nextEvent())
	}
}

// cleanup queues a background release of req, retried until until.
func (s *scheduler) cleanup(req driver.Request, until int64, persist bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.cleanups = append(s.cleanups, &cleanup{req: req, until: until, persist: persist, next: s.c.now()})
	s.wakeLocked(s.c.now())
}

// wakeLocked makes the loop wake by at (monotonic ns).
func (s *scheduler) wakeLocked(at int64) {
	if at < s.wakeAt {
		s.wakeAt = at
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// schedule sets t's renewal times from base, when its grant or last renewal
// was sent: eligible eligibleFrac of an interval later, due a full interval
// later less jitter (a fraction of the interval). s.mu must be held once t
// is tracked.
func (t *tenure) schedule(base int64, jitter float64) {
	iv := int64(t.cfg.interval)
	t.eligibleAt = base + int64(eligibleFrac*float64(iv))
	t.dueAt = base + iv - int64(jitter*float64(iv))
}

// nextEvent is the next time the scheduler must look at t.
func (t *tenure) nextEvent() int64 {
	next := t.validUntil.Load()
	if t.cfg.maxHold > 0 {
		next = min(next, t.grantAt+int64(t.cfg.maxHold))
	}
	if t.cfg.liveness > 0 {
		next = min(next, t.lastTouch.Load()+int64(t.cfg.liveness))
	}
	if t.cfg.interval > 0 && !t.renewing {
		next = min(next, t.dueAt)
	}
	return next
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
func (s *scheduler) tick() int64 {
	now := s.c.now()
	var (
		lost   []loss
		batch  []*tenure
		anyDue bool
	)
	var (
		want  time.Duration // the longest lease held, for the record
		fresh bool          // a tenure due for renewal is not in the record
	)
	s.mu.Lock()
	for _, t := range s.items {
		want = max(want, t.cfg.lease)
		switch {
		case now >= t.validUntil.Load():
			lost = append(lost, loss{t, expiryReason(t.lastErr), t.lastErr})
			continue
		case t.cfg.maxHold > 0 && now >= t.grantAt+int64(t.cfg.maxHold):
			lost = append(lost, loss{t, ReasonMaxHold, nil})
			continue
		case t.cfg.liveness > 0 && now >= t.lastTouch.Load()+int64(t.cfg.liveness):
			lost = append(lost, loss{t, ReasonStalled, nil})
			continue
		}
		if t.cfg.interval > 0 && !t.renewing && now >= t.eligibleAt {
			batch = append(batch, t)
			anyDue = anyDue || now >= t.dueAt
			fresh = fresh || !t.recorded
		}
	}
	if !anyDue {
		batch, fresh = nil, false
	}
	pub := publication{next: forever}
	if s.c.rec.store != nil {
		pub = s.recordLocked(now, want, fresh)
	}
	var r *round
	if len(batch) > 0 {
		r = &round{ts: batch, send: now, jitter: rand.Float64() * jitterFrac}
		for _, t := range batch {
			t.renewing = true
		}
	}
	var todo []*cleanup
	if !s.cleaning {
		for _, cl := range s.cleanups {
			if now >= cl.next {
				todo = s.cleanups
				s.cleanups = nil
				s.cleaning = true
				break
			}
		}
	}
	next := int64(forever)
	for _, t := range s.items {
		next = min(next, t.nextEvent())
	}
	for _, cl := range s.cleanups {
		next = min(next, cl.next)
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
		s.wg.Go(func() { s.clean(todo) })
	}
	return next
}

// renew runs one round. Its timeout is the shortest remaining validity in the
// batch, capped at the renew interval: an answer after that is useless, and
// a round that hangs must not keep its locks from being retried.
func (s *scheduler) renew(r *round) {
	timeout := time.Duration(forever)
	var reqs []driver.Request
	for _, t := range r.ts {
		reqs = append(reqs, t.requests()...)
		timeout = min(timeout, t.cfg.interval, time.Duration(t.validUntil.Load()-r.send))
	}
	ctx, cancel := context.WithTimeout(s.ctx, max(timeout, time.Millisecond))
	r.res = s.c.renewStore(ctx, reqs)
	cancel()
	if len(r.res) != len(reqs) {
		err := errors.New("leash: store returned a wrong number of renewal results")
		r.res = make([]driver.RenewResult, len(reqs))
		for i := range r.res {
			r.res[i].Err = err
		}
	}
	select {
	case s.done <- r:
	case <-s.ctx.Done():
	}
}

// outcome folds the results of a tenure's parts into one: a part gone or
// taken loses the tenure; otherwise any error makes the outcome unknown. It
// also returns the index of the part the result is about.
func outcome(res []driver.RenewResult) (driver.RenewResult, int) {
	out, at := driver.RenewResult{Status: driver.Renewed}, 0
	for i, r := range res {
		switch {
		case r.Err == nil && (r.Status == driver.RenewGone || r.Status == driver.RenewTaken):
			return r, i
		case r.Err != nil:
			out, at = r, i
		case r.Status != driver.Renewed && out.Err == nil:
			out, at = driver.RenewResult{Err: fmt.Errorf("the store returned an unknown renewal status %d", r.Status)}, i
		}
	}
	return out, at
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
	for _, t := range r.ts {
		res, _ := outcome(r.res[off : off+len(t.parts)])
		off += len(t.parts)
		t.renewing = false
		if t.idx < 0 {
			continue // released or lost meanwhile
		}
		switch {
		case res.Err != nil:
			t.lastErr = res.Err
			t.dueAt = now + int64(retryDelay(t.cfg.interval))
			failed++
			lastErr = res.Err
		case res.Status == driver.Renewed:
			t.setValid(r.send)
			t.lastErr = nil
			t.schedule(r.send, r.jitter)
		case res.Status == driver.RenewGone:
			lost = append(lost, loss{t, ReasonReleasedElsewhere, nil})
		case res.Status == driver.RenewTaken:
			lost = append(lost, loss{t, ReasonTakenOver, nil})
		}
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
	log.Debug("renewal round", slog.Int(attrCount, len(r.ts)), slog.Int("failed", failed),
		slog.Duration("took", time.Duration(now-r.send)))
	s.c.observe(Event{Op: OpRenewed, Locks: len(r.ts), Failed: failed, Err: lastErr, Took: time.Duration(now - r.send)})
}

// retryDelay is how soon a failed renewal is retried.
func retryDelay(interval time.Duration) time.Duration {
	return min(max(interval/8, 5*time.Millisecond), time.Second)
}

// clean makes one pass over cleanups and requeues those still needed.
func (s *scheduler) clean(todo []*cleanup) {
	var keep []*cleanup
	for _, cl := range todo {
		now := s.c.now()
		if now >= cl.until {
			continue
		}
		if now < cl.next {
			keep = append(keep, cl)
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, min(time.Duration(cl.until-now), s.c.cfg.releaseTimeout))
		err := s.c.store.Release(ctx, cl.req)
		cancel()
		if s.ctx.Err() != nil {
			keep = append(keep, cl) // stopping: Close releases what is left
			continue
		}
		definitive := err == nil || errors.Is(err, ErrNotHeld)
		if definitive && !cl.persist {
			continue
		}
		if err != nil && !definitive {
			s.c.log.Warn("background release failed", slog.String(attrLock, cl.req.Name), slog.Any(attrError, err))
		}
		cl.next = s.c.now() + int64(max(cl.req.Lease/10, 100*time.Millisecond))
		keep = append(keep, cl)
	}
	s.mu.Lock()
	s.cleaning = false
	s.cleanups = append(s.cleanups, keep...) // after stop, Close takes them
	if s.stopped {
		s.mu.Unlock()
		return
	}
	for _, cl := range keep {
		s.wakeLocked(cl.next)
	}
	s.mu.Unlock()
	// Make the loop recompute its timer even if nothing moved earlier.
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
