package schedule

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// A job is one added job: its schedule, function and resolved options.
// Set by Add and never changed, but for ctx and stop, set when it starts.
type job struct {
	name  string
	spec  string // as the store keeps it (SpecText; empty when too long)
	sched Schedule
	fn    Func
	opts  JobOptions
	lock  *leash.LockOptions

	// ctx is the job's life under Run, ended by Remove (stop) or Run's
	// end; nil before the job starts. The Scheduler's mutex guards both.
	ctx  context.Context
	stop context.CancelFunc
}

func (s *Scheduler) newJob(name, spec string, fn Func, opts *JobOptions) (*job, error) {
	var o JobOptions
	if opts != nil {
		o = *opts
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: schedule: job %q: %s", leash.ErrInvalidArgument, name, fmt.Sprintf(format, args...))
	}
	switch {
	case o.Overlap > OverlapLimit:
		return nil, bad("JobOptions.Overlap %d is not a policy", o.Overlap)
	case o.Overlap == OverlapLimit && o.Limit < 1:
		return nil, bad("JobOptions.Limit %d: OverlapLimit needs at least 1", o.Limit)
	case o.Overlap != OverlapLimit && o.Limit != 0:
		return nil, bad("JobOptions.Limit %d is only for OverlapLimit", o.Limit)
	case o.Misfire > MisfireRunLatest:
		return nil, bad("JobOptions.Misfire %d is not a policy", o.Misfire)
	case o.MaxRun < 0, o.Liveness < 0, o.Lease < 0, o.Lateness < 0, o.RetryDelay < 0:
		return nil, bad("JobOptions durations must not be negative")
	case o.Retries < 0:
		return nil, bad("JobOptions.Retries %d is negative", o.Retries)
	case o.Location == time.Local:
		return nil, bad("%s", localZone("JobOptions.Location"))
	}
	if o.RetryDelay == 0 {
		o.RetryDelay = DefaultRetryDelay
	}
	loc := o.Location
	if loc == nil {
		loc = s.opts.Location
	}
	sched, err := Parse(spec, loc)
	if err != nil {
		return nil, fmt.Errorf("schedule: job %q: %w", name, err)
	}
	// A force-unlocked run keeps its name from other runs until its
	// function returns (see the package doc).
	lock := &leash.LockOptions{Lease: o.Lease, MaxHold: o.MaxRun, Liveness: o.Liveness, AckRevokeOnUnlock: true}
	// The Client checks lock options when a lock is taken; check them now,
	// so that a bad job fails Add, not its first tick.
	if o.Overlap == OverlapLimit {
		_, err = s.c.Semaphore(name, o.Limit, lock).TryAcquire(canceled)
	} else {
		_, err = s.c.Mutex(name, lock).TryLock(canceled)
	}
	if errors.Is(err, leash.ErrInvalidArgument) {
		return nil, fmt.Errorf("schedule: job %q: %w", name, err)
	}
	text := SpecText(spec, loc)
	if len(text) > driver.MaxSpecLen {
		text = "" // too long to keep: the claims leave the kept one as it is
	}
	return &job{name: name, spec: text, sched: sched, fn: fn, opts: o, lock: lock}, nil
}

// canceled is a context that has ended: a lock taken with it checks its
// arguments and returns before any round trip.
var canceled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// fire starts the claim and run of tick in a goroutine of its own.
func (s *Scheduler) fire(ctx context.Context, j *job, tick time.Time, catchUp bool) {
	s.wg.Add(1)
	// Owned by the Scheduler: one tick's claims and runs, until the tick
	// is taken elsewhere, late, run (with its retries) or ctx ends; Run
	// waits for it (s.wg).
	go func() {
		defer s.wg.Done()
		s.tick(ctx, j, tick, catchUp)
	}()
}

// tick claims and runs one tick, attempt after attempt.
func (s *Scheduler) tick(ctx context.Context, j *job, tick time.Time, catchUp bool) {
	window := j.sched.Next(tick) // the tick's window ends at the next tick
	until := window
	if j.opts.Lateness > 0 {
		until = tick.Add(j.opts.Lateness)
	}
	if catchUp {
		until = time.Time{}
	}
	for attempt := 1; ; attempt++ {
		res, ok := s.claim(ctx, j, tick, attempt, until)
		if !ok {
			// An attempt of this tick that failed elsewhere, with retries
			// left: this instance claims the next attempt too, so that the
			// retry does not hang on the one instance that failed. The
			// store grants it to one of them.
			last := res.Last
			if res.Status != driver.ClaimTaken || !last.Tick.Equal(tick) || !last.Outcome.Retryable() ||
				last.Attempt < attempt || last.Attempt > j.opts.Retries || !sleep(ctx, j.opts.RetryDelay) {
				return
			}
			attempt, until = last.Attempt, window
			continue
		}
		if attempt == 1 && !res.Prev.IsZero() && (res.PrevSpec == "" || res.PrevSpec == j.spec) {
			// Under another schedule (changed since Prev was claimed), the
			// ticks between were never the job's: none was missed.
			s.reportMissed(ctx, j, res.Prev, tick)
		}
		outcome := s.runOnce(ctx, j, tick, attempt, window, res.Now)
		if !outcome.Retryable() || attempt > j.opts.Retries || !sleep(ctx, j.opts.RetryDelay) {
			return
		}
		until = window // a retry, catch-up or not, stays within the tick's window
	}
}

// claim claims tick's attempt until the store grants it (true), or says it
// is taken or late, or ctx ends (false). An early claim waits as long as the
// store says; a failed round trip is retried while the tick's window lasts
// by the instance's clock.
func (s *Scheduler) claim(ctx context.Context, j *job, tick time.Time, attempt int, until time.Time) (driver.TickResult, bool) {
	c := driver.TickClaim{Job: j.name, Tick: tick, Attempt: attempt, Tolerance: s.opts.Tolerance, Until: until,
		Run: s.base, Keep: s.opts.Keep, Spec: j.spec}
	// The claim's own id, the same each time it is sent: a claim found
	// taken by this Client but another claim (of a job removed and added
	// again, of another Scheduler on the Client) is not this one.
	c.Run.Claim = rand.Text()
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil && s.slot(ctx) {
		rctx, cancel := s.bounded(ctx)
		res, err := s.store.ClaimTick(rctx, c)
		cancel()
		s.unslot()
		switch {
		case err != nil:
			if errors.Is(err, driver.ErrNotALock) || errors.Is(err, leash.ErrInvalidArgument) {
				// A definite refusal: asking again changes nothing.
				s.log.Error("job not claimed", slog.String("job", j.name), slog.Any("error", err))
				return res, false
			}
			if !until.IsZero() && s.now().After(until) {
				s.log.Warn("job tick not claimed: the store could not be reached in its window", slog.String("job", j.name),
					slog.Time("tick", tick), slog.Any("error", err))
				return res, false
			}
			s.log.Warn("job claim failed; retrying", slog.String("job", j.name), slog.Time("tick", tick), slog.Any("error", err))
			if !sleep(ctx, backoff) {
				return res, false
			}
			backoff = min(2*backoff, time.Second)
		case res.Status == driver.ClaimEarly:
			s.log.Debug("job tick early by the store's clock; waiting", slog.String("job", j.name), slog.Time("tick", tick),
				slog.Duration("wait", res.Wait))
			if !sleep(ctx, max(res.Wait, time.Millisecond)) {
				return res, false
			}
		case res.Status == driver.ClaimGranted:
			s.log.Debug("job tick claimed", slog.String("job", j.name), slog.Time("tick", tick), slog.Int("attempt", attempt))
			return res, true
		case res.GrantedEarlier(c):
			// An earlier send of this claim was granted: its answer was
			// lost (an error here), or the store's client sent the claim
			// again by itself after a lost reply (go-redis resends a script
			// on a dropped connection), so that this answer is the
			// resend's. The tick is ours. (Prev is unknown: missed ticks
			// before it go unreported.)
			s.log.Debug("job tick claimed by an earlier attempt", slog.String("job", j.name), slog.Time("tick", tick))
			res.Status, res.Prev = driver.ClaimGranted, time.Time{}
			return res, true
		default:
			s.log.Debug("job tick not claimed", slog.String("job", j.name), slog.Time("tick", tick), slog.Int("attempt", attempt),
				slog.String("status", res.Status.String()), slog.Time("last", res.Last.Tick))
			return res, false
		}
	}
	return driver.TickResult{}, false
}

// maxMissed bounds how many missed ticks one claim looks for.
const maxMissed = 100_000

// reportMissed records the ticks of j's schedule strictly between prev and
// tick, which no one claimed: the last Options.Keep of them, the oldest kept
// saying how many more there were.
func (s *Scheduler) reportMissed(ctx context.Context, j *job, prev, tick time.Time) {
	var missed []driver.RunRecord
	n := 0
	for t := j.sched.Next(prev); !t.IsZero() && t.Before(tick) && n < maxMissed; t = j.sched.Next(t) {
		n++
		missed = append(missed, driver.RunRecord{Tick: t, Outcome: driver.OutcomeMissed, Error: "no instance claimed the tick in time"})
		if len(missed) > s.opts.Keep {
			missed = missed[1:]
		}
	}
	if len(missed) == 0 {
		return
	}
	if n > len(missed) {
		missed[0].Error = fmt.Sprintf("no instance claimed the tick in time; %d earlier ticks since %s were missed too",
			n-len(missed), prev.UTC().Format(time.RFC3339Nano))
	}
	s.slot(context.WithoutCancel(ctx)) // seen through on shutdown, as the round trip is
	defer s.unslot()
	rctx, cancel := s.bounded(ctx)
	defer cancel()
	if err := s.store.AddRuns(rctx, j.name, missed, s.opts.Keep); err != nil {
		s.log.Warn("missed ticks not recorded", slog.String("job", j.name), slog.Int("missed", n), slog.Any("error", err))
	}
}

// runOnce runs a granted attempt: it takes the run lock by the overlap
// policy, calls the job's function, records the end and releases the lock.
// window is when the tick's window ends, storeNow the store's clock at the
// claim.
func (s *Scheduler) runOnce(ctx context.Context, j *job, tick time.Time, attempt int, window, storeNow time.Time) driver.Outcome {
	end := driver.RunEnd{Job: j.name, Tick: tick, Attempt: attempt, Client: s.base.Client}
	hold, err := s.lockRun(ctx, j, attempt > 1, window.Sub(storeNow))
	if err != nil {
		var na *leash.NotAcquiredError
		switch {
		case ctx.Err() != nil:
			end.Outcome, end.Error = driver.OutcomeCancelled, "the scheduler shut down, or the job was removed, before the run started"
		case errors.As(err, &na) && na.Grace:
			end.Outcome, end.Error = driver.OutcomeSkipped, "the store restarted and grants no lock in its restart grace"
		case errors.As(err, &na) && na.Err == nil:
			end.Outcome, end.Error = driver.OutcomeSkipped, "the previous run still holds the job's lock"
		case errors.As(err, &na) && errors.Is(na.Err, context.DeadlineExceeded):
			end.Outcome, end.Error = driver.OutcomeSkipped, "the previous run held the job's lock until the next tick"
		default:
			end.Outcome, end.Error = driver.OutcomeFailed, driver.TruncateRunError("taking the job's lock: "+err.Error())
		}
		s.record(ctx, j, end)
		return end.Outcome
	}
	end.Fence = hold.Fence()
	rctx, cancel := context.WithCancelCause(hold.Context())
	stop := context.AfterFunc(s.hard, func() { cancel(context.Cause(s.hard)) })
	ferr := call(&runContext{rctx, hold}, j.fn, Run{Job: j.name, Tick: tick, Attempt: attempt, Fence: end.Fence, hold: hold})
	stop()
	cause := context.Cause(rctx)
	cancel(nil)
	// A function that returned nil did its work (see Func), whatever ended
	// its context: its run is never recorded retryable, or the tick would
	// run twice.
	var lost *leash.LostError
	switch {
	case errors.As(hold.Err(), &lost) && lost.Reason == leash.ReasonMaxHold && ferr == nil:
		end.Outcome, end.Error = driver.OutcomeLost, fmt.Sprintf(
			"MaxRun (%v) passed and the run's lock was released before the function returned nil: not retried", j.opts.MaxRun)
	case errors.As(hold.Err(), &lost) && lost.Reason == leash.ReasonMaxHold:
		end.Outcome, end.Error = driver.OutcomeCancelled, fmt.Sprintf("MaxRun (%v) passed", j.opts.MaxRun)
	case errors.As(hold.Err(), &lost):
		end.Outcome, end.Error = driver.OutcomeLost, lost.Error()
	case errors.Is(cause, ErrShutdown) && ferr != nil:
		end.Outcome, end.Error = driver.OutcomeCancelled, ErrShutdown.Error()
	case ferr != nil:
		end.Outcome, end.Error = driver.OutcomeFailed, driver.TruncateRunError(ferr.Error())
	default:
		end.Outcome = driver.OutcomeOK
	}
	if ferr != nil && end.Outcome != driver.OutcomeFailed {
		end.Error = driver.TruncateRunError(end.Error + ": " + ferr.Error())
	}
	// The end is recorded before the lock is released: a reader never sees
	// a run that ended well, lock free and end not yet told, as lost.
	s.record(ctx, j, end)
	if err := hold.Unlock(context.WithoutCancel(ctx)); errors.As(err, &lost) && end.Outcome != driver.OutcomeLost &&
		end.Outcome != driver.OutcomeCancelled {
		// The store had lost the lock before the run ended (freed by
		// force, say) and the Client had not noticed yet.
		end.Outcome, end.Error = driver.OutcomeLost, driver.TruncateRunError(lost.Error())
		s.record(ctx, j, end)
	}
	if end.Outcome == driver.OutcomeLost {
		s.log.Error("job run lost its lock", slog.String("job", j.name), slog.Time("tick", tick), slog.String("error", end.Error))
	}
	return end.Outcome
}

// A runContext is a run's context: cancelled with the hold's, and on
// shutdown. Its Err looks at the hold's validity first, as the hold's own
// context does, so that a run that wakes from a pause past its lease learns
// of the loss on its first look, before the Client's watchdog has run.
type runContext struct {
	context.Context
	hold *leash.Hold
}

func (c *runContext) Err() error {
	_ = c.hold.Err() // declares the hold lost, cancelling c, if its validity passed
	return c.Context.Err()
}

// lockRun takes j's run lock by its overlap policy; wait is how long
// OverlapQueue, and a retry, may wait for it. A retry waits whatever the
// policy: the lock it finds held is most likely its failed attempt's, being
// handed back on another instance, and a retry refused it would end the
// tick's retries.
func (s *Scheduler) lockRun(ctx context.Context, j *job, retry bool, wait time.Duration) (*leash.Hold, error) {
	queue := retry || j.opts.Overlap == OverlapQueue
	if queue {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, max(wait, 0))
		defer cancel()
	}
	switch {
	case j.opts.Overlap == OverlapLimit && queue:
		return s.c.Semaphore(j.name, j.opts.Limit, j.lock).Acquire(ctx)
	case j.opts.Overlap == OverlapLimit:
		return s.c.Semaphore(j.name, j.opts.Limit, j.lock).TryAcquire(ctx)
	case queue:
		return s.c.Mutex(j.name, j.lock).Lock(ctx)
	}
	return s.c.Mutex(j.name, j.lock).TryLock(ctx)
}

// record tells the store how a run ended, trying again (EndRun sets the
// same fields each time) until Options.Timeout has passed: a run whose end
// is not recorded reads lost once its lock is free.
func (s *Scheduler) record(ctx context.Context, j *job, end driver.RunEnd) {
	s.slot(context.WithoutCancel(ctx)) // a run's end is recorded on shutdown too
	defer s.unslot()
	rctx, cancel := s.bounded(ctx)
	defer cancel()
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		err := s.store.EndRun(rctx, end)
		if err == nil {
			return
		}
		if errors.Is(err, leash.ErrInvalidArgument) || errors.Is(err, driver.ErrNotALock) || !sleep(rctx, backoff) {
			s.log.Warn("job run's end not recorded", slog.String("job", j.name), slog.Time("tick", end.Tick),
				slog.String("outcome", end.Outcome.String()), slog.Any("error", err))
			return
		}
	}
}

// call runs fn, turning a panic into an error.
func call(ctx context.Context, fn Func, run Run) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("schedule: job %q panicked: %v\n%s", run.Job, p, debug.Stack())
		}
	}()
	return fn(ctx, run)
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
