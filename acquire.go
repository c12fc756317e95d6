package leash

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/leash-go/leash/driver"
)

// A plan is how one acquiring call takes its new tenure: every lock type's
// Lock, TryLock and kin, single names and MultiLock alike, run the one loop
// of acquire.
type plan struct {
	t       *tenure
	wait    bool          // wait for the lock, or make one attempt (per group)
	queue   time.Duration // how long a queue place or waiting-writer mark lasts, while waiting
	permits int           // semaphore size, for driver.KindPermit
	many    bool          // a MultiLock: groups go through driver.MultiStore when the store has it
	// starving is set once a waiting Mutex has waited longer than
	// Options.Starvation on a store that keeps starving marks: its
	// attempts then carry a mark that lasts queue.
	starving bool
}

// acquire runs the acquire loop for a new single-name tenure.
func (l locker) acquire(ctx context.Context, t *tenure, wait bool) (*Hold, error) {
	return l.c.acquire(ctx, &plan{t: t, wait: wait, queue: l.wait, permits: l.permits})
}

// request is the store request for part i. Only a waiting acquire takes a
// queue place or a waiting-writer mark: TryLock never does.
func (p *plan) request(i int) driver.Request {
	r := p.t.request(i)
	switch r.Kind {
	case driver.KindFair, driver.KindWrite:
		if p.wait {
			r.Wait = p.queue
		}
	case driver.KindMutex:
		if p.starving {
			r.Wait = p.queue
		}
	case driver.KindPermit:
		r.Permits = p.permits
	}
	return r
}

// groups splits a MultiLock tenure's parts into what the store can take in
// one step, in the order they must be taken, as part indexes: the store's
// partition, or one name at a time in name order.
func (c *Client) groups(p *plan) [][]int {
	t := p.t
	names := make([]string, len(t.parts))
	index := make(map[string]int, len(t.parts))
	for i, pt := range t.parts {
		names[i] = pt.name
		index[pt.name] = i
	}
	if c.caps.multi == nil {
		out := make([][]int, len(names))
		for i := range names {
			out[i] = []int{i}
		}
		return out
	}
	var out [][]int
	for _, g := range c.caps.multi.Partition(names) {
		idx := make([]int, len(g))
		for i, n := range g {
			idx[i] = index[n]
		}
		out = append(out, idx)
	}
	return out
}

// take makes one attempt at a group of parts (idx), and records the fencing
// tokens when it is granted. req is the group's request when the group is
// one name taken alone; reqs are its requests for a driver.MultiStore. The
// result's Fence is not set for a group of several names.
func (c *Client) take(ctx context.Context, t *tenure, req driver.Request, reqs []driver.Request, idx []int) (driver.Grant, error) {
	if reqs == nil {
		g, err := c.store.Acquire(ctx, req)
		if err == nil && g.Acquired {
			t.parts[idx[0]].fence = g.Fence
		}
		return g, err
	}
	mg, err := c.caps.multi.AcquireMany(ctx, reqs)
	if err == nil && mg.Acquired {
		for i, pt := range idx {
			t.parts[pt].fence = mg.Fences[i]
		}
	}
	return driver.Grant{Acquired: mg.Acquired, Remaining: mg.Remaining, Grace: mg.Grace}, err
}

// acquire is the acquire loop: it takes the tenure's groups in order,
// waiting (if the plan waits) for each, and holding and renewing the groups
// already taken while it waits for the next; then it turns the grant into
// the tenure's first hold. A call that gives up releases what it took, and
// leaves to the background the release of what it may have been granted.
func (c *Client) acquire(ctx context.Context, p *plan) (h *Hold, err error) {
	t := p.t
	var start int64 // for the observer
	if c.cfg.observer != nil {
		start = c.now()
		defer func() { c.observeNotAcquired(t, start, err) }()
	}
	what := "lock"
	if p.many {
		what = "multilock"
	}
	var (
		one    [1]int
		single = [1][]int{one[:]}
		groups = single[:] // a single name: one group, no allocation
	)
	if p.many {
		groups = c.groups(p)
	}
	every := t.cfg.interval // how often the groups taken are renewed while waiting
	if every == 0 {
		every = t.cfg.lease / 3
	}
	var (
		held     []driver.Request // parts taken so far, in groups before gi
		heldIdx  []int            // their part indexes
		sent     []int64          // per part: send time of its last grant or renewal
		sent1    [1]int64
		renewAt  int64 = -1 // when to renew the groups taken; -1 with none
		w        *waiter
		nap      sleeper
		placed   bool // the store may hold a queue place or writer mark for place
		place    driver.Request
		finished bool
		one1     [1]driver.Request
		starveAt int64 = -1 // when a waiting Mutex starts starving; -1: it never does
		reported bool       // OpStarving was observed
		hotStart bool       // the first attempt marks the name: it is hot (see warm)
		// placeSent is the send time of the first attempt that could take
		// a queue place (Wait > 0), -1 before: every place a release can
		// hand the lock to was taken by a request sent no earlier.
		placeSent int64 = -1
		// short is the lease of a handed-off grant taken from a wake-up; 0: none.
		short time.Duration
	)
	if p.wait && !p.many && t.kind == driver.KindMutex && c.cfg.starve > 0 && c.caps.starve {
		starveAt = 0 // set from the first attempt's send time
	}
	if len(t.parts) == 1 {
		sent = sent1[:]
	} else {
		sent = make([]int64, len(t.parts))
	}
	if p.wait && !p.many && c.caps.watch != nil {
		// A watch of the name is established already (it lingers after a
		// wait, see waiters): joined before the first attempt, it hears
		// every release from then on, and the attempt after subscribing is
		// saved.
		name := t.parts[0].name
		w = c.waiters.warm(t.kind, name, t.owner)
		if w != nil && starveAt == 0 && c.waiters.joinWarm(w, watchKeyOf(driver.KindFair, name), true) {
			// A Lock of this Client started starving on the name less
			// than watchLinger ago: the name is hot, and a waiter that
			// finds others queued marks it at once anyway. The first
			// attempt marks it, instead of an attempt to barge in first.
			// (Such a start is not itself a starvation: only a Lock that
			// waited, or found marks queued, keeps the name hot.)
			p.starving, p.queue = true, DefaultQueueLease
			hotStart = true
		}
	}
	defer func() {
		if w != nil {
			c.waiters.leave(w)
		}
		nap.stop()
		if placed {
			c.withdraw(ctx, place)
		}
		if !finished && len(held) > 0 {
			c.release(ctx, held, c.now()+int64(t.cfg.lease))
		}
	}()
	for gi := 0; gi < len(groups); {
		idx := groups[gi]
		// reqs are the group's requests. A group taken by Acquire uses
		// one1, which stays on the stack since only its value goes to the
		// store; many, for AcquireMany, goes to the store itself.
		var reqs, many []driver.Request
		if p.many && c.caps.multi != nil {
			many = make([]driver.Request, 0, len(idx))
			for _, pt := range idx {
				many = append(many, p.request(pt))
			}
			reqs = many
		} else {
			reqs = append(one1[:0], p.request(idx[0]))
		}
		if err := ctx.Err(); err != nil {
			// Not sent: nothing to give back but the groups taken so far.
			return nil, &NotAcquiredError{Name: reqs[0].Name, Remaining: -1, Err: err}
		}
		send := c.now()
		if starveAt == 0 {
			starveAt = send + int64(c.cfg.starve)
		}
		if placeSent < 0 && reqs[0].Wait > 0 {
			placeSent = send
		}
		g, err := c.take(ctx, t, reqs[0], many, idx)
		remaining, grace := g.Remaining, g.Grace
		if err != nil {
			if refused(err) {
				// The store refused: nothing of this group was granted;
				// the groups taken so far are released on the way out.
				return nil, fmt.Errorf("leash: %s %q: %w", what, reqs[0].Name, err)
			}
			// The outcome is unknown: the server may have granted the lock.
			// Keep releasing it in the background until its lease would end.
			for _, r := range reqs {
				c.retryRelease(r, send+int64(r.Lease), true)
			}
			if reqs[0].Wait > 0 {
				// It may also have taken a place in the queue (or a
				// writer's mark) that no answer reported: withdrawn on the
				// way out, as a refused attempt's is, or it would stand
				// first in line for its whole QueueLease.
				placed, place = true, reqs[0]
			}
			if ctx.Err() != nil {
				return nil, &NotAcquiredError{Name: reqs[0].Name, Remaining: -1, Err: ctx.Err()}
			}
			return nil, fmt.Errorf("leash: %s %q: %w", what, reqs[0].Name, err)
		}
		if p.starving && !reported && !(hotStart && g.Acquired) {
			reported = true
			c.observeStarving(t, start)
		}
		hotStart = false
		if !g.Acquired && w != nil {
			w.waited = true
			// A grant announced before this attempt's answer is not this
			// waiter's to use: the attempt found the lock held, so the
			// grant was picked up and given back (the store undoes a grant
			// made on a server process it had not read), or lapsed. One
			// given back and announced after, the store delivers as a
			// plain wake-up (driver.HandoffStore).
			c.waiters.handed(w)
		}
		if g.Acquired {
			placed = false
			for _, pt := range idx {
				sent[pt] = send
			}
			gi++
			if gi == len(groups) {
				first := slices.Min(sent)
				if c.now() < t.validAfter(first) {
					break
				}
				// The grant came back after its validity had ended (the
				// server or the network stalled past the lease): a hold
				// made of it would be lost from its first moment, and
				// another owner may already hold the lock. Give it back,
				// then try again, or tell a TryLock why.
				err := c.lateGrant(ctx, t, append(held, reqs...), first)
				held, heldIdx, gi, renewAt = nil, nil, 0, -1
				if _, retry := err.(*NotAcquiredError); !retry || !p.wait {
					return nil, err
				}
				if w != nil {
					c.waiters.leave(w)
					w = nil
				}
				continue
			}
			held = append(held, reqs...)
			heldIdx = append(heldIdx, idx...)
			if renewAt < 0 {
				renewAt = send + int64(every)
			}
			if w != nil {
				c.waiters.leave(w)
				w = nil
			}
			continue
		}
		if reqs[0].Wait > 0 {
			placed, place = true, reqs[0]
		}
		if c.debugOn() {
			c.log.Debug("lock busy", slog.String(attrLock, reqs[0].Name), slog.String(attrKind, t.kind.String()),
				slog.Duration("remaining", remaining))
		}
		if !p.wait {
			return nil, &NotAcquiredError{Name: reqs[0].Name, Remaining: remaining, Grace: grace}
		}
		if w == nil {
			// Subscribe, then try again before waiting: a release between the
			// first attempt and the subscription is not missed.
			names := make([]string, len(reqs))
			for i, r := range reqs {
				names[i] = r.Name
			}
			if w, err = c.watchFor(ctx, t.kind, names, t.owner); err != nil {
				return nil, c.waitEnded(reqs[0].Name, remaining, grace, err)
			}
			if starveAt > 0 && (g.Queued || p.starving) {
				// Others are queued: the try after subscribing marks the
				// name at once (see below). A Lock already starving (its
				// late grant given back, see lateGrant) watches for its
				// turn again.
				if err := c.starving(ctx, p, w, reqs[0].Name); err != nil {
					return nil, c.waitEnded(reqs[0].Name, remaining, grace, err)
				}
			}
			continue
		}
		// Sleep until a release, the holder's expiry, the renewal of the
		// groups already taken, or starvation, whichever comes first.
		d := p.fallback(remaining, w)
		if renewAt >= 0 {
			d = min(d, max(time.Duration(renewAt-c.now()), 0))
		}
		if starveAt > 0 && !p.starving {
			// A waiter that finds others queued will be served after them
			// whatever it does: it marks the name at once, as a newcomer
			// to Go's sync.Mutex in starvation mode queues at once.
			if now := c.now(); now < starveAt && !g.Queued {
				d = min(d, time.Duration(starveAt-now))
			} else {
				if err := c.starving(ctx, p, w, reqs[0].Name); err != nil {
					return nil, c.waitEnded(reqs[0].Name, remaining, grace, err)
				}
				continue // mark the name at once
			}
		}
		if err := c.sleep(ctx, w, &nap, d); err != nil {
			return nil, c.waitEnded(reqs[0].Name, remaining, grace, err)
		}
		// A grant is used untold only on a store that hands off itself: a
		// Client whose store does not (the replication guard is on) may
		// still hear another Client's release hand it a grant, which no
		// replica acknowledged; its next attempt picks that up through
		// Acquire, with the store's own checks (WAIT).
		if h, ok := c.waiters.handed(w); ok && c.caps.handoff && !p.many && len(held) == 0 {
			if lease, from, ok := c.handoffUsable(t, h, placeSent); ok {
				// The release granted the lock to this waiter's place:
				// taken without another round trip (see handoff.go).
				t.parts[idx[0]].fence = h.Fence
				sent[idx[0]] = from
				placed, short = false, lease
				break
			}
			// Too little validity is left to use it untold: the next
			// attempt picks the grant up and confirms it, with the full
			// lease from its own send time.
		}
		if renewAt >= 0 && c.now() >= renewAt {
			next, err := c.renewHeld(ctx, t, held, heldIdx, sent, every)
			if err != nil {
				// A group taken earlier was lost while waiting: start over,
				// watching the first group again — unless giving the rest
				// back had an unknown outcome. Its background release names
				// this tenure's owner, which the retakes use too, and would
				// free them behind the holder's back.
				errs := c.release(ctx, held, c.now()+int64(t.cfg.lease))
				held, heldIdx, gi, renewAt = nil, nil, 0, -1
				for _, rerr := range errs {
					if unknown(rerr) {
						return nil, fmt.Errorf("%w; giving back the names taken failed, and they are released in the background: %w", err, rerr)
					}
				}
				c.waiters.leave(w)
				w = nil
				continue
			}
			renewAt = next
		}
	}
	finished = true
	return c.granted(ctx, t, slices.Min(sent), start, short)
}

// lateGrant gives back a grant whose validity had ended when its answer
// came (sent at send, monotonic ns) and returns why it cannot be used: a
// *NotAcquiredError, or the release's error when its outcome is unknown (its
// background retry names the tenure's owner, which a retake would use too,
// and would free a retake behind the holder's back). A caller that waits
// tries again when it returns a *NotAcquiredError.
func (c *Client) lateGrant(ctx context.Context, t *tenure, reqs []driver.Request, send int64) error {
	took := time.Duration(c.now() - send)
	if c.debugOn() {
		c.log.Debug("lock granted after its validity ended; given back", slog.String(attrLock, reqs[0].Name),
			slog.Duration("took", took), slog.Duration("lease", t.cfg.lease))
	}
	late := &NotAcquiredError{Name: reqs[0].Name, Remaining: -1, Err: &LateGrantError{Took: took, Lease: t.cfg.lease, Margin: t.cfg.margin}}
	for _, err := range c.release(ctx, reqs, c.now()+int64(t.cfg.lease)) {
		if unknown(err) {
			return fmt.Errorf("%w; giving it back failed, and it is released in the background: %w", late, err)
		}
	}
	return late
}

// renewHeld renews the parts a MultiLock took while it waits for the rest
// (held, at part indexes heldIdx), recording the send time of those renewed.
// It returns when to renew them next, or an error if a part is gone or its
// validity passed. A part not renewed this time (an unknown outcome) is
// retried soon, as the watchdog retries.
func (c *Client) renewHeld(ctx context.Context, t *tenure, held []driver.Request, heldIdx []int, sent []int64, every time.Duration) (int64, error) {
	send := c.now()
	res := c.renewAll(ctx, held)
	for i, r := range res {
		if r.Err == nil && r.Status == driver.Renewed {
			sent[heldIdx[i]] = send
		}
	}
	v := fold(res)
	switch {
	case v.lost != 0:
		return 0, fmt.Errorf("leash: multilock: %q lost while waiting (%s)", held[v.part].Name, v.lost)
	case v.err != nil:
		// A part not renewed this time is still valid until its last
		// renewal's validity ends.
		for _, pt := range heldIdx {
			if send-sent[pt] >= int64(t.cfg.lease-t.cfg.margin) {
				return 0, errors.Join(fmt.Errorf("leash: multilock: %q expired while waiting", t.parts[pt].name), v.err)
			}
		}
		return c.now() + int64(retryDelay(every)), nil
	}
	return send + int64(every), nil
}

// starving turns a waiting Mutex call into a starving one: its attempts
// from now on carry a mark (see Options.Starvation), and it watches the
// fair channel too, where a release wakes the first mark's waiter. The
// error is ctx's or ErrClosed; a watch that cannot be made is logged, and
// the waiter then learns of its turn from the mark's renewal attempts.
func (c *Client) starving(ctx context.Context, p *plan, w *waiter, name string) error {
	p.starving, p.queue = true, DefaultQueueLease
	if w.poll {
		return nil
	}
	key := watchKeyOf(driver.KindFair, name)
	err := c.waiters.joinOne(ctx, w, key)
	switch {
	case err == nil:
		c.waiters.starvedOn(key)
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case c.closed.Load():
		return ErrClosed
	}
	c.log.Warn("cannot watch for a starving waiter's turn; polling", slog.String(attrLock, name), slog.Any(attrError, err))
	return nil
}

// refused reports whether an Acquire error is the store's definite refusal,
// after which nothing was granted and nothing needs releasing: the lock kind
// is unsupported, the request is an upgrade, or the name is not a lock.
func refused(err error) bool {
	return errors.Is(err, ErrNotALock) || errors.Is(err, ErrUpgrade) || errors.Is(err, ErrUnsupported)
}

// waitEnded is the error of a wait that ctx or Close ended.
func (c *Client) waitEnded(name string, remaining time.Duration, grace bool, err error) error {
	if errors.Is(err, ErrClosed) {
		return ErrClosed
	}
	return &NotAcquiredError{Name: name, Remaining: remaining, Grace: grace, Err: err}
}

// fallback is how long a waiter sleeps when no notification comes: until the
// holder's lease runs out, but no longer than a third of a queue place's life
// (the attempt refreshes it), nor than a second when polling. A place a
// release may hand the lock to (a FairMutex's, a starving Mutex's mark, on a
// store that hands off) is tried again within half the hand-off's lease, so
// that a waiter whose wake-up was lost picks the grant up before it lapses,
// and with it, its turn: the release ends the place with the grant.
func (p *plan) fallback(remaining time.Duration, w *waiter) time.Duration {
	d := remaining
	if d < 0 || d > p.t.cfg.lease {
		d = p.t.cfg.lease
	}
	if p.queue > 0 {
		d = min(d, p.queue/3)
		if p.t.c.caps.handoff && (p.t.kind == driver.KindFair || p.starving) {
			d = min(d, handoffLease/2)
		}
	}
	if w.poll {
		d = min(d, time.Second)
	}
	// A little slack past the holder's expiry, spread so that waiting
	// clients do not retry in lock-step.
	return d + time.Millisecond + rand.N(d/50+time.Millisecond)
}

// withdraw removes a waiter's queue place or writer mark, in the background
// of a bounded, detached context.
func (c *Client) withdraw(ctx context.Context, req driver.Request) {
	rctx := c.releaseContext(ctx)
	if err := c.caps.withdraw.Withdraw(rctx, req); err != nil {
		c.log.Warn("withdraw from queue failed; the place expires on its own",
			slog.String(attrLock, req.Name), slog.Duration("within", req.Wait), slog.Any(attrError, err))
	}
}

// granted turns a successful acquire into the tenure's first hold, unless ctx
// ended meanwhile or the Client closed, in which case it releases the lock
// before returning. send is when the (first) granting request was sent,
// start when the acquire call began (for the observer). short is, for a
// lock a release handed over (see handoff.go), the lease it was granted
// with, counted from send; zero for a grant of the tenure's own lease.
//
// The hold begins at send, for MaxHold and Liveness as for the validity;
// but a handed-over lock's send is the waiter's first place-taking request,
// before its wait: its hold begins now, when the wake-up brought the grant,
// and only its validity counts from send. (Counted from send, a Liveness
// shorter than the wait would find the holder stalled the moment Lock
// returned, before it could touch the hold.)
func (c *Client) granted(ctx context.Context, t *tenure, send, start int64, short time.Duration) (*Hold, error) {
	t.grantAt = send
	if short > 0 {
		t.grantAt = c.now()
	}
	t.lastTouch.Store(t.grantAt)
	var due int64 // when to renew first; 0: after an interval
	if short > 0 {
		// Renewed to the full lease halfway through what is left of the
		// short validity: a hold shorter than that costs no renewal.
		v := send + int64(short-t.cfg.margin)
		t.validUntil.Store(v)
		now := c.now()
		due = now + max(v-now, 0)/2
	} else {
		t.setValid(send)
	}
	t.mu.Lock()
	t.state = stateHeld
	h := t.newHold(ctx, &t.first)
	t.mu.Unlock()
	if err := ctx.Err(); err != nil {
		c.undo(ctx, t)
		return nil, &NotAcquiredError{Name: t.name(), Remaining: -1, Err: err}
	}
	// Observed before the watchdog may lose it, so an observer sees the
	// grant before the tenure's end.
	c.observeGrant(t, start)
	if !c.sched.add(t, due) {
		c.undo(ctx, t)
		c.observeEnd(t, OpLost, ReasonClosed, ErrClosed)
		return nil, ErrClosed
	}
	c.listenRevokes()
	if c.debugOn() {
		c.log.Debug("lock acquired", slog.String(attrLock, t.name()), slog.String(attrKind, t.kind.String()),
			slog.String(attrOwner, t.owner), slog.Int64(attrToken, t.fence()))
	}
	return h, nil
}
