package leash

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leash-go/leash/driver"
)

// Longest Options.Label and Options.Command, in bytes.
const (
	MaxLabelLen   = 256
	MaxCommandLen = 1024
)

// recorder publishes the Client's record in a store that implements
// driver.ClientRecorder. It owns the fields below its mutex; the scheduler decides
// when to publish (in tick, which sees the held tenures) and runs each
// publication in its goroutine group.
type recorder struct {
	store driver.ClientRecorder // nil: the store keeps no records
	base  driver.ClientRecord   // fixed at New; Locks is empty

	// until is when the last published record expires, estimated from
	// its send time (monotonic ns); 0 before the first publication. add
	// reads it without a lock.
	until atomic.Int64
	// check is when the scheduler must next look at the record because a
	// lock was granted that it may not cover (monotonic ns); 0: no need.
	check atomic.Int64

	mu    sync.Mutex
	busy  bool   // a publication is in flight
	retry int64  // after a failed publication: not before this
	dirty bool   // a lock was left to expire since the last publication
	tails []tail // locks left to expire, until their lease ends
}

// A tail is a lock left to expire by UnlockAfter.
type tail struct {
	rec   driver.LockRecord
	until int64 // monotonic ns: when its lease ends
}

func (r *recorder) init(c *Client, opts *Options) {
	r.store, _ = c.store.(driver.ClientRecorder)
	host, _ := os.Hostname()
	r.base = driver.ClientRecord{ID: c.id, Host: host, PID: os.Getpid(), Started: c.epoch}
	if opts != nil {
		r.base.Label, r.base.Command = opts.Label, opts.Command
	}
}

// recordDelay is how long after a grant that the record may not cover the
// scheduler looks at it: a lock released sooner needs no record, so a
// Lock+Unlock loop costs no publication and no scheduler wake-up per Lock.
func recordDelay(lease time.Duration) time.Duration { return min(lease/10, time.Second) }

// checkBy makes the record be looked at by at (monotonic ns) and returns
// when it will be.
func (r *recorder) checkBy(at int64) int64 {
	for {
		old := r.check.Load()
		if old != 0 && old <= at {
			return old
		}
		if r.check.CompareAndSwap(old, at) {
			return at
		}
	}
}

// wall converts the Client's monotonic clock to a wall-clock time.
func (c *Client) wall(mono int64) time.Time { return c.epoch.Add(time.Duration(mono)) }

// leftToExpire records that t was left to expire by UnlockAfter for d, and
// makes the scheduler publish it.
func (r *recorder) leftToExpire(c *Client, t *tenure, d time.Duration) {
	if r.store == nil {
		return
	}
	now := c.now()
	r.mu.Lock()
	r.tails = append(r.tails, tail{driver.LockRecord{Owner: t.owner, Acquired: c.wall(t.grantAt), TailSince: c.wall(now)}, now + int64(d)})
	r.dirty = true
	r.mu.Unlock()
	c.sched.wake(now)
}

// due reports, under the scheduler's lock, whether the record must be
// published now; want is the longest lease of the held tenures and fresh
// whether a tenure being renewed is not in the record yet. It returns the
// time to live to publish with, and the tails to list, and marks a
// publication in flight. next is when tick must look again.
func (r *recorder) due(now int64, held bool, want time.Duration, fresh bool) (ttl time.Duration, tails []driver.LockRecord, ok bool, next int64) {
	next = forever
	r.mu.Lock()
	defer r.mu.Unlock()
	live := r.tails[:0]
	for _, tl := range r.tails {
		if tl.until > now {
			live = append(live, tl)
			want = max(want, time.Duration(tl.until-now))
		}
	}
	clear(r.tails[len(live):])
	r.tails = live
	if !held && len(live) == 0 || r.busy {
		return 0, nil, false, next
	}
	until := r.until.Load()
	if now < r.retry {
		return 0, nil, false, r.retry
	}
	if !fresh && !r.dirty && until-now > int64(want) {
		return 0, nil, false, until - int64(want)
	}
	r.busy, r.dirty = true, false
	for _, tl := range live {
		tails = append(tails, tl.rec)
	}
	return 2 * want, tails, true, next
}

// published records the outcome of a publication sent at send.
func (r *recorder) published(c *Client, send int64, ttl time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.busy = false
	if err != nil {
		r.retry = c.now() + int64(max(ttl/6, time.Second))
		c.log.Warn("holder record not published; retrying", slog.Any(attrError, err))
		return
	}
	r.retry = 0
	r.until.Store(send + int64(ttl))
}

// close ends the record when the Client closes: it is deleted, unless locks
// left to expire still run, in which case it is published with only those,
// to expire with them.
func (r *recorder) close(ctx context.Context, c *Client) {
	if r.store == nil {
		return
	}
	now := c.now()
	r.mu.Lock()
	var (
		rec  = r.base
		last int64
	)
	for _, tl := range r.tails {
		if tl.until > now {
			rec.Locks = append(rec.Locks, tl.rec)
			last = max(last, tl.until)
		}
	}
	r.mu.Unlock()
	var err error
	if len(rec.Locks) == 0 {
		err = r.store.DeleteClient(ctx, rec.ID)
	} else {
		err = r.store.PutClient(ctx, rec, time.Duration(last-now)+time.Second)
	}
	if err != nil {
		c.log.Warn("holder record not removed on close; it expires on its own", slog.Any(attrError, err))
	}
}

// A publication is the scheduler's decision about the record in one tick:
// whether to publish it now (ok), and when to look again (next).
type publication struct {
	ok   bool
	rec  driver.ClientRecord
	ttl  time.Duration
	send int64
	next int64
}

// recordLocked decides, with s.mu held, whether to publish the record now
// (see recorder.due); when it does, it lists the held tenures in the record,
// at most driver.MaxRecordLocks of them, and marks every one recorded.
func (s *scheduler) recordLocked(now int64, want time.Duration, fresh bool) publication {
	r := &s.c.rec
	fired := false
	if check := r.check.Load(); check != 0 && now >= check {
		r.check.CompareAndSwap(check, 0) // looked at now
		fired = true
	}
	// A record not yet published is due only once a lock has been held for
	// its record delay (the check fired) or is being renewed: a tick that
	// happens to run while a short lock is held (woken by another lock's
	// release, say) publishes nothing.
	held := s.q.len() > 0 && (fired || fresh || r.until.Load() != 0)
	ttl, tails, ok, next := r.due(now, held, want, fresh)
	if check := r.check.Load(); check != 0 {
		next = min(next, check)
	}
	p := publication{ok: ok, next: next}
	if !ok {
		return p
	}
	p.rec, p.ttl, p.send = r.base, ttl, now
	p.rec.Locks = make([]driver.LockRecord, 0, min(s.q.len()+len(tails), driver.MaxRecordLocks))
	s.q.each(func(e *entry) {
		if len(p.rec.Locks) < driver.MaxRecordLocks {
			p.rec.Locks = append(p.rec.Locks, driver.LockRecord{Owner: e.t.owner, Acquired: s.c.wall(e.t.grantAt)})
		}
		e.recorded = true
	})
	for _, l := range tails {
		if len(p.rec.Locks) < driver.MaxRecordLocks {
			p.rec.Locks = append(p.rec.Locks, l)
		}
	}
	return p
}

// startPublish runs publish in the scheduler's goroutine group. It is apart
// from tick so that only a publication that happens escapes to the heap.
func (s *scheduler) startPublish(p publication) {
	// Owner: the scheduler. Stops when PutClient returns, which the
	// release timeout and stop's cancellation bound.
	s.wg.Go(func() { s.publish(p) })
}

// publish writes the record decided on by recordLocked.
func (s *scheduler) publish(p publication) {
	ctx, cancel := context.WithTimeout(s.ctx, s.c.cfg.releaseTimeout)
	err := s.c.rec.store.PutClient(ctx, p.rec, p.ttl)
	cancel()
	if s.ctx.Err() != nil {
		err = nil // stopping: Close writes or deletes the record itself
	}
	s.c.rec.published(s.c, p.send, p.ttl, err)
	// Make the loop look at the record again (a retry, the next refresh).
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
