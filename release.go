package leash

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leash-go/leash/driver"
)

// The one release path. Every lock the core gives back — Unlock's, a grant
// that came as the caller gave up (undo), the groups a MultiLock took before
// it gave up, every lock left at Close — goes through release; a release
// whose outcome is unknown, and an acquire whose outcome is unknown, go on
// in the background (retries) until the lease would have run out on the
// server anyway — on a session store, which keeps a lock alive while the
// Client keeps its session, until the store answers.

// releaseInline is how many requests release sends one after another; more
// are sent by up to releaseWorkers goroutines at once.
const (
	releaseInline  = 4
	releaseWorkers = 16
)

// release releases every request in reqs, with a context that keeps ctx's
// values but not its cancellation, bounded by Options.ReleaseTimeout (see releaseContext), so
// that neither a cancelled caller nor a dead server can hold it up. A
// request whose outcome is unknown (an error other than ErrNotHeld) is
// released again in the background until until (monotonic ns), when its
// lease would have run out on the server. It returns nil when every release
// succeeded, and otherwise one error per request: nil where it succeeded,
// one matching ErrNotHeld where the store did not hold the lock.
func (c *Client) release(ctx context.Context, reqs []driver.Request, until int64) []error {
	rctx := c.releaseContext(ctx)
	var errs []error
	if len(reqs) <= releaseInline {
		for i, r := range reqs {
			if err := c.releaseOne(rctx, r, until); err != nil {
				if errs == nil {
					errs = make([]error, len(reqs))
				}
				errs[i] = err
			}
		}
		return errs
	}
	return c.releaseParallel(rctx, reqs, until)
}

// releaseParallel is release's fan-out, for many requests.
func (c *Client) releaseParallel(ctx context.Context, reqs []driver.Request, until int64) []error {
	all := slices.Clone(reqs)       // the workers' own, so that the caller's may live on its stack
	errs := make([]error, len(all)) // each index written by one worker
	var (
		wg     sync.WaitGroup
		next   atomic.Int64
		failed atomic.Bool
	)
	for range min(releaseWorkers, len(all)) {
		// Owner: releaseParallel. Stops when every request has been tried.
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(all) {
					return
				}
				if errs[i] = c.releaseOne(ctx, all[i], until); errs[i] != nil {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	if !failed.Load() {
		return nil
	}
	return errs
}

// releaseOne sends one release; an unknown outcome goes to the background
// until until.
func (c *Client) releaseOne(ctx context.Context, req driver.Request, until int64) error {
	if c.caps.handoff && (req.Kind == driver.KindMutex || req.Kind == driver.KindFair) {
		// Hand the lock to the first queued waiter, if any (see handoff.go).
		req.Wait = handoffLease
	}
	err := c.store.Release(ctx, req)
	if unknown(err) {
		c.retryRelease(req, until, false)
	}
	return err
}

// unknown reports whether a release's error leaves its outcome unknown: the
// lock may still be held. ErrNotHeld is a definite answer.
func unknown(err error) bool { return err != nil && !errors.Is(err, ErrNotHeld) }

// undo releases a lock that was granted but will not be handed to the caller.
func (c *Client) undo(ctx context.Context, t *tenure) {
	t.mu.Lock()
	t.state = stateReleased
	t.mu.Unlock()
	c.release(ctx, t.requests(), t.grantAt+int64(t.cfg.lease))
}

// retries are the Client's background releases of locks whose state is
// unknown. A goroutine the scheduler starts runs them (see scheduler.tick); this
// type owns their state.
type retries struct {
	mu      sync.Mutex
	list    []*retry
	running bool // a pass is running
	stopped bool // the Client is closing: Close releases what is left
}

// A retry is a background release of one lock.
type retry struct {
	req     driver.Request
	until   int64 // give up then: the lease has run out on the server
	persist int64 // keep releasing until then, even after a definitive answer
	next    int64 // next attempt
}

// retryRelease releases req in the background until until. persist keeps
// releasing it until then even after a definite answer: an acquire whose
// answer was lost may yet be applied by the server after the first release.
// On a session store a lock does not run out while the Client keeps its
// session alive, so the release goes on until it has a definite answer.
func (c *Client) retryRelease(req driver.Request, until int64, persist bool) {
	now := c.now()
	r := &retry{req: req, until: until, next: now}
	if persist {
		r.persist = until
	}
	if c.caps.session != nil {
		r.until = forever
	}
	q := &c.retries
	q.mu.Lock()
	ok := !q.stopped
	if ok {
		q.list = append(q.list, r)
	}
	q.mu.Unlock()
	if ok {
		c.sched.wake(now)
	}
}

// take returns every retry when one is due and no pass runs, marking a pass
// running; next is when take must be called again, if nothing is due.
func (q *retries) take(now int64) (todo []*retry, next int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	next = forever
	if q.running {
		return nil, next
	}
	for _, r := range q.list {
		if now >= r.next {
			todo, q.list, q.running = q.list, nil, true
			return todo, forever
		}
		next = min(next, r.next)
	}
	return nil, next
}

// close refuses new retries: the Client is closing.
func (q *retries) close() {
	q.mu.Lock()
	q.stopped = true
	q.mu.Unlock()
}

// rest returns the retries left, for Close to release once no pass runs any
// more.
func (q *retries) rest() []*retry {
	q.mu.Lock()
	defer q.mu.Unlock()
	left := q.list
	q.list = nil
	return left
}

// retryPass makes one attempt at each retry due in todo, within ctx (the
// scheduler's), and requeues those still needed.
func (c *Client) retryPass(ctx context.Context, todo []*retry) {
	var keep []*retry
	for _, r := range todo {
		now := c.now()
		if now >= r.until {
			continue
		}
		if now < r.next {
			keep = append(keep, r)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, min(time.Duration(r.until-now), c.cfg.releaseTimeout))
		err := c.store.Release(rctx, r.req)
		cancel()
		if ctx.Err() != nil {
			keep = append(keep, r) // stopping: Close releases what is left
			continue
		}
		if !unknown(err) && now >= r.persist {
			continue
		}
		if unknown(err) {
			c.log.Warn("background release failed", slog.String(attrLock, r.req.Name), slog.Any(attrError, err))
		}
		r.next = c.now() + int64(max(r.req.Lease/10, 100*time.Millisecond))
		keep = append(keep, r)
	}
	q := &c.retries
	q.mu.Lock()
	q.running = false
	q.list = append(q.list, keep...) // after stop, Close takes them
	q.mu.Unlock()
	// Make the loop look at the retries again.
	c.sched.wake(c.now())
}
