// Package gocronleash lets gocron v2 schedulers on many instances share
// their jobs through leash: a [Locker] (gocron.WithDistributedLocker) that
// runs each job on one instance at a time, and, for jobs given their
// schedule, on one instance per tick; and an [Elector]
// (gocron.WithDistributedElector) that runs every job on the one instance
// that holds a leadership lock.
//
// # What gocron's Locker can and cannot give
//
// gocron calls Locker.Lock(ctx, name) when a job fires on an instance, by
// that instance's clock, and Lock.Unlock after the job's function returns.
// The lock is a leash lock named after the job (Options.Prefix + name),
// renewed by the Client's watchdog while the job runs, so the job runs on
// one instance at a time, and a dead instance's lock frees itself within
// a lease.
//
// That is all a lock can give, because gocron tells the Locker the job's
// name and nothing about which tick fired: an instance whose clock runs
// behind fires the same tick later, finds the lock free (the first run has
// ended), and runs the tick again. ShedLock's lockAtLeastFor only narrows
// that window to a guess. For a job named in Options.Schedules, with the
// same schedule the gocron job has, the Locker closes it: Lock names the
// tick from the schedule (the latest tick at or before the instance's
// clock) and claims it through the store's job records (driver.JobStore:
// redisstore, pgstore, mysqlstore, zkstore and memstore keep them;
// etcdstore does not), judged by the store's clock, as package schedule
// does. A tick already claimed, or a later one, is refused
// ([ErrTickTaken]) and gocron skips the run; an instance whose clock runs
// ahead waits in Lock until the store's clock reaches the tick. Each claim
// is recorded, with the run's outcome, in the history 'leash jobs' shows,
// and so are the ticks between two claims that no instance claimed
// (missed).
//
// # Schedules must read the same in both places
//
// A gocron cron job (gocron.CronJob) is read by robfig/cron, in the
// scheduler's location: gocron puts "CRON_TZ=<location> " in front of a
// spec that names no zone (no CRON_TZ= or TZ= prefix), and that location
// is time.Local unless the scheduler was made with gocron.WithLocation.
// Options.Schedules are read by schedule.Parse in UTC. So make the gocron
// scheduler with gocron.WithLocation(time.UTC), or begin each spec with
// the same "CRON_TZ=<zone> " (an IANA name such as Europe/Berlin) in both
// places; otherwise, on a host whose local zone is not UTC, the Locker
// names and claims a tick other than the one gocron fired for, and
// [Run.Tick] is off by the zone's offset. ("@every" specs tick the same in
// every zone.) robfig/cron also runs a spec that restricts both the day of
// the month and the day of the week on a day that matches either, where
// schedule.Parse needs both to match; NewLocker refuses such a spec. An
// "@every" spec ticks at the multiples of its interval since the Unix
// epoch, the same on every instance, where a gocron.DurationJob fires at
// intervals from when its scheduler started: each firing claims the latest
// such tick, which may be up to one interval before it ([Run.Tick] says
// which), and instances started at different times still run each tick
// once.
//
// Two gaps remain, both gocron's: its job function is not given the lock's
// context (cancelled when the lock is lost: the lease ran out while the
// instance paused, or the store could not be reached), and Unlock is not
// told whether the function failed. Wrap the function with [Locker.Task]
// to close both: the wrapped function runs with a context that ends when
// gocron's ends or the lock is lost, can read the run's tick and fencing
// token with [RunOf], and its error is recorded in the job's history. A
// function not wrapped runs on past a lost lock, unaware of it; Unlock
// still checks the lock and records the run lost, but a failure of such a
// function goes unseen and the run is recorded ok.
//
// Prefer package schedule where you can: it has all of this without the
// gaps, plus retries, misfire and overlap policies.
package gocronleash

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/schedule"
)

// ErrTickTaken is returned by Locker.Lock when the tick the job fired for
// was already claimed (by an instance whose clock is ahead, or that fired
// sooner), or a later one was, or the tick's window has passed: the run is
// not this instance's, and gocron skips it.
var ErrTickTaken = errors.New("gocronleash: tick already claimed")

// Options configure a [Locker]. A nil *Options means all defaults.
type Options struct {
	// Prefix is put before each gocron job name to make its lock name.
	// Default: none.
	Prefix string
	// Lock are the run lock's options (Lease, MaxHold, …); nil: the
	// Client's. AckRevokeOnUnlock is always set: a run whose lock is
	// force-unlocked keeps its name from other instances until gocron's
	// Unlock, after the job's function returned.
	Lock *leash.LockOptions
	// Schedules maps gocron job names to their schedules, as
	// schedule.Parse reads them ("@every 1m", "0 30 2 * * *",
	// "CRON_TZ=Europe/Berlin 0 9 * * *"): the same ticks the gocron job
	// has. A job named here runs once per tick, claimed through the
	// store's job records; the store must keep them (driver.JobStore).
	//
	// A spec without CRON_TZ= is read in UTC, while gocron reads it in
	// its scheduler's location, time.Local by default: make the scheduler
	// with gocron.WithLocation(time.UTC), or give the spec the same
	// "CRON_TZ=<zone> " prefix here and in gocron.CronJob, or the ticks
	// claimed are off by the local zone's offset. A cron spec that
	// restricts both day fields (day of month and day of week, neither
	// "*" nor "?") is refused: gocron runs it on a day either matches,
	// schedule.Parse only on one both match.
	Schedules map[string]string
	// Tolerance is how long before a tick, by the store's clock, it may be
	// claimed. Default schedule.DefaultTolerance.
	Tolerance time.Duration
	// Keep is how many records of each job the store keeps. Default
	// driver.DefaultKeepRuns.
	Keep int
	// Now is the instance's clock, by which Lock names the tick that
	// fired; gocron fires by the same clock. Default time.Now.
	Now func() time.Time
}

// Locker is a gocron.Locker on a leash Client. Its methods are safe for
// concurrent use.
type Locker struct {
	c      *leash.Client
	opts   Options
	scheds map[string]schedule.Schedule
	specs  map[string]string // the schedules as the store keeps them
	jobs   driver.JobStore   // nil when no job is named in Schedules
	base   driver.RunRecord

	mu   sync.Mutex
	runs map[string]*lock // by lock name: the run in progress on this Locker
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a Locker on c. It makes no round trip. Bad options,
// and Schedules on a store that keeps no job records, return an error
// matching leash.ErrInvalidArgument or leash.ErrUnsupported.
func NewLocker(c *leash.Client, opts *Options) (*Locker, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: gocronleash: nil Client", leash.ErrInvalidArgument)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Tolerance < 0 || o.Keep < 0 || o.Keep > driver.MaxKeepRuns {
		return nil, fmt.Errorf("%w: gocronleash: Options.Tolerance must not be negative, Options.Keep must be 0 to %d",
			leash.ErrInvalidArgument, driver.MaxKeepRuns)
	}
	if o.Tolerance == 0 {
		o.Tolerance = schedule.DefaultTolerance
	}
	if o.Keep == 0 {
		o.Keep = driver.DefaultKeepRuns
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var lo leash.LockOptions
	if o.Lock != nil {
		lo = *o.Lock
	}
	lo.AckRevokeOnUnlock = true
	o.Lock = &lo
	host, _ := os.Hostname()
	l := &Locker{c: c, opts: o, scheds: map[string]schedule.Schedule{}, specs: map[string]string{}, runs: map[string]*lock{},
		base: driver.RunRecord{Host: host, PID: os.Getpid(), Client: c.ID()}}
	for name, spec := range o.Schedules {
		if err := leash.ValidateName(o.Prefix + name); err != nil {
			return nil, fmt.Errorf("gocronleash: job %q: %w", name, err)
		}
		s, err := schedule.Parse(spec, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: gocronleash: job %q: %w", leash.ErrInvalidArgument, name, err)
		}
		if bothDays(spec) {
			return nil, fmt.Errorf("%w: gocronleash: job %q: schedule %q restricts both the day of the month and the day of "+
				"the week: gocron (robfig/cron) runs it on a day either matches, schedule.Parse only on a day both match; "+
				"restrict one day field (\"*\" or \"?\" in the other), or use package schedule", leash.ErrInvalidArgument, name, spec)
		}
		l.scheds[name] = s
		if text := schedule.SpecText(spec, nil); len(text) <= driver.MaxSpecLen {
			l.specs[name] = text
		}
	}
	if len(l.scheds) > 0 {
		js, ok := c.Store().(driver.JobStore)
		if !ok {
			return nil, fmt.Errorf("gocronleash: Options.Schedules: %w", driver.Unsupported(c.Store(), "job records (driver.JobStore)"))
		}
		l.jobs = js
	}
	return l, nil
}

// bothDays reports whether spec, a cron expression of five or six fields
// (optionally after CRON_TZ= or TZ=), restricts both its day-of-month and
// its day-of-week field, which robfig/cron ORs and schedule.Parse ANDs.
// Descriptors and "@every" restrict neither.
func bothDays(spec string) bool {
	f := strings.Fields(spec)
	if len(f) > 0 && (strings.HasPrefix(f[0], "CRON_TZ=") || strings.HasPrefix(f[0], "TZ=")) {
		f = f[1:]
	}
	if len(f) != 5 && len(f) != 6 {
		return false
	}
	f = f[len(f)-5:] // minute hour day-of-month month day-of-week
	return restricts(f[2]) && restricts(f[4])
}

// restricts reports whether a day field restricts the day as robfig/cron
// reads it: unless one of its comma-separated parts starts with "*" or "?"
// and has no step above 1 (robfig's star bit, which makes it AND the day
// fields).
func restricts(field string) bool {
	for part := range strings.SplitSeq(field, ",") {
		r, step, stepped := strings.Cut(part, "/")
		lo, _, _ := strings.Cut(r, "-")
		n, err := strconv.Atoi(step)
		if (lo == "*" || lo == "?") && (!stepped || err == nil && n <= 1) {
			return false
		}
	}
	return true
}

// Run is what a job's function, wrapped by [Locker.Task], can learn of its
// run with [RunOf].
type Run struct {
	// Name is the lock's name: Options.Prefix and the gocron job's name.
	Name string
	// Tick is the tick the run was claimed for; zero for a job not named
	// in Options.Schedules.
	Tick time.Time
	// Fence is the run lock's fencing token: greater than every earlier
	// run's. Pass it to what the job writes.
	Fence int64
}

// lock is one run's lock, a gocron.Lock.
type lock struct {
	l       *Locker
	run     Run
	hold    *leash.Hold
	claimed bool // the tick was claimed: its end is recorded

	mu     sync.Mutex
	err    error // the wrapped function's error
	ranFn  bool
	closed bool
}

// Lock claims the job's tick (for a job named in Options.Schedules) and
// takes its run lock without waiting. It returns ErrTickTaken when the
// tick is not this instance's, and an error matching leash.ErrNotAcquired
// when the lock is held (the job's previous run still runs somewhere);
// gocron then skips the run. It waits for the store's clock to reach a
// tick this instance fired early for, and sends a claim whose round trip
// failed again (the store may have granted it and lost the answer); once
// the tick is claimed, it tries the run lock again when the store could
// not be reached or was in its restart grace. Both go on until the tick's
// window (up to the next tick) passes or ctx ends; then it returns an
// error saying so (and a claimed tick's run is recorded failed).
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	name := l.opts.Prefix + key
	lk := &lock{l: l, run: Run{Name: name}}
	var until time.Time // the claimed tick's window
	if s := l.scheds[key]; s != nil {
		tick := s.Prev(l.opts.Now())
		until = s.Next(tick)
		res, err := l.claim(ctx, name, l.specs[key], tick, until)
		if err != nil {
			return nil, err
		}
		if res.PrevSpec == "" || res.PrevSpec == l.specs[key] {
			// Under another schedule (changed since Prev was claimed),
			// the ticks between were never the job's: none was missed.
			l.missed(ctx, name, s, res.Prev, tick)
		}
		lk.run.Tick, lk.claimed = tick, true
	}
	hold, err := l.take(ctx, l.c.Mutex(name, l.opts.Lock), lk.claimed, until)
	if err != nil {
		if lk.claimed {
			outcome, text := driver.OutcomeFailed, "taking the job's lock: "+err.Error()
			var na *leash.NotAcquiredError
			if errors.As(err, &na) && na.Err == nil && !na.Grace {
				outcome, text = driver.OutcomeSkipped, "the previous run still holds the job's lock"
			}
			l.end(ctx, lk, outcome, text)
		}
		return nil, err
	}
	lk.hold, lk.run.Fence = hold, hold.Fence()
	l.mu.Lock()
	l.runs[name] = lk
	l.mu.Unlock()
	return lk, nil
}

// take takes the run lock m without waiting for its holder. For a claimed
// tick (claimed), whose run is this instance's alone, a try that failed
// for a reason that may pass (the store could not be reached, or is in its
// restart grace) is tried again after a backoff, or when the grace ends,
// while the tick's window lasts (until, by the instance's clock) and ctx
// does: otherwise the tick would run nowhere. A lock held by another
// owner (the job's previous run), and errors that trying again cannot
// change, end it at once; but once a try's outcome was unknown, the lock
// found held may be that try's own grant, which the Client gives back in
// the background (the next try is a tenure of its own), so it is tried
// again too.
func (l *Locker) take(ctx context.Context, m *leash.Mutex, claimed bool, until time.Time) (*leash.Hold, error) {
	backoff := 50 * time.Millisecond
	unknown := false // a try failed with its outcome unknown
	for {
		hold, err := m.TryLock(ctx)
		if err == nil || !claimed {
			return hold, err
		}
		wait := backoff
		var na *leash.NotAcquiredError
		switch {
		case errors.As(err, &na) && na.Grace && na.Err == nil:
			if na.Remaining > 0 {
				wait = na.Remaining
			}
		case errors.As(err, &na) && na.Err == nil && unknown:
			// Held, after a try whose outcome was unknown: maybe by that
			// try's own grant, which the Client is giving back (or which
			// lapses within its lease). Try again.
		case errors.As(err, &na), ctx.Err() != nil, errors.Is(err, leash.ErrClosed), errors.Is(err, leash.ErrInvalidArgument),
			errors.Is(err, leash.ErrNotALock), errors.Is(err, leash.ErrUnsupported):
			return nil, err
		default:
			unknown = true
		}
		if !l.opts.Now().Add(wait).Before(until) {
			return nil, err
		}
		backoff = min(2*backoff, time.Second)
		if !sleep(ctx, wait) {
			return nil, errors.Join(err, ctx.Err())
		}
	}
}

// claim claims tick of the job name, attempt 1, until the store grants
// or refuses it, or ctx ends. An early claim waits as long as the store
// says (an instance whose clock runs ahead waits for the store's); a
// failed round trip is sent again after a backoff, with the same claim id,
// while the tick's window lasts (until, by the instance's clock), as
// package schedule does: a ClaimTaken answer that names our id for this
// tick means an earlier send was granted and its answer lost.
func (l *Locker) claim(ctx context.Context, name, spec string, tick, until time.Time) (driver.TickResult, error) {
	c := driver.TickClaim{Job: name, Tick: tick, Attempt: 1, Tolerance: l.opts.Tolerance, Until: until, Run: l.base, Keep: l.opts.Keep,
		Spec: spec}
	c.Run.Claim = rand.Text()
	at := tick.UTC().Format(time.RFC3339Nano)
	backoff := 50 * time.Millisecond
	var unknown error // the last failed round trip: that claim may have been granted
	for {
		res, err := l.jobs.ClaimTick(ctx, c)
		var wait time.Duration
		switch {
		case err != nil && (errors.Is(err, driver.ErrNotALock) || errors.Is(err, leash.ErrInvalidArgument)):
			return res, fmt.Errorf("gocronleash: claiming tick %s of %q: %w", at, name, err) // asking again changes nothing
		case err != nil && ctx.Err() == nil && !l.opts.Now().Before(until):
			return res, fmt.Errorf("gocronleash: tick %s of %q not claimed before its window ended at %s: %w", at, name,
				until.UTC().Format(time.RFC3339Nano), err)
		case err != nil:
			unknown, wait, backoff = err, backoff, min(2*backoff, time.Second)
		case res.Status == driver.ClaimGranted:
			return res, nil
		case res.Status == driver.ClaimEarly:
			wait = max(res.Wait, time.Millisecond)
		case res.GrantedEarlier(c):
			// An earlier send of this claim was granted: its answer was
			// lost (an error here), or the store's client sent it again by
			// itself after a lost reply (go-redis resends a script on a
			// dropped connection). The tick is ours. (Prev is unknown:
			// missed ticks before it go unrecorded.)
			res.Status, res.Prev = driver.ClaimGranted, time.Time{}
			return res, nil
		default:
			return res, fmt.Errorf("%w: %q tick %s (%s; latest claim %s)", ErrTickTaken, name, at, res.Status,
				res.Last.Tick.UTC().Format(time.RFC3339Nano))
		}
		if !sleep(ctx, wait) {
			return res, fmt.Errorf("gocronleash: tick %s of %q not claimed: %w", at, name, errors.Join(ctx.Err(), unknown))
		}
	}
}

// sleep waits d, and reports false when ctx ends first.
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

// maxMissed bounds how many missed ticks one claim records.
const maxMissed = 1000

// missed records the ticks of s strictly between prev (the claim before)
// and tick, which no instance claimed: the newest maxMissed of them.
func (l *Locker) missed(ctx context.Context, name string, s schedule.Schedule, prev, tick time.Time) {
	if prev.IsZero() {
		return
	}
	var runs []driver.RunRecord
	for t, n := s.Next(prev), 0; !t.IsZero() && t.Before(tick) && n < 100*maxMissed; t, n = s.Next(t), n+1 {
		runs = append(runs, driver.RunRecord{Tick: t, Outcome: driver.OutcomeMissed, Error: "no instance claimed the tick in time"})
		if len(runs) > maxMissed {
			runs = runs[1:]
		}
	}
	if len(runs) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = l.jobs.AddRuns(rctx, name, runs, l.opts.Keep)
}

// end records how a claimed run ended.
func (l *Locker) end(ctx context.Context, lk *lock, outcome driver.Outcome, text string) {
	text = driver.TruncateRunError(text)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = l.jobs.EndRun(rctx, driver.RunEnd{Job: lk.run.Name, Tick: lk.run.Tick, Attempt: 1, Client: l.base.Client,
		Outcome: outcome, Fence: lk.run.Fence, Error: text})
}

// Unlock records, for a claimed tick, how the run ended, and then releases
// the run lock: ok, failed (the error of a function wrapped by Task) or
// lost (the lock was lost while it ran, or the release finds it was).
func (lk *lock) Unlock(ctx context.Context) error {
	l := lk.l
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		return nil
	}
	lk.closed = true
	ferr := lk.err
	lk.mu.Unlock()
	l.mu.Lock()
	if l.runs[lk.run.Name] == lk {
		delete(l.runs, lk.run.Name)
	}
	l.mu.Unlock()
	var lost *leash.LostError
	outcome, text := driver.OutcomeOK, ""
	switch {
	case errors.As(lk.hold.Err(), &lost):
		outcome, text = driver.OutcomeLost, lost.Error()
	case ferr != nil:
		outcome, text = driver.OutcomeFailed, ferr.Error()
	}
	// The end is recorded before the lock is released: a reader never sees
	// a run that ended well, lock free and end not yet told, as lost.
	if lk.claimed {
		l.end(ctx, lk, outcome, text)
	}
	uerr := lk.hold.Unlock(context.WithoutCancel(ctx))
	if lk.claimed && outcome != driver.OutcomeLost && errors.As(uerr, &lost) {
		// The store had lost the lock before the run ended (freed by
		// force, say) and the Client had not noticed yet.
		l.end(ctx, lk, driver.OutcomeLost, lost.Error())
	}
	return uerr
}

// runKey is the context key of a run's Run.
type runKey struct{}

// RunOf returns the run of a function wrapped by [Locker.Task], from the
// context it was given, and false for any other context.
func RunOf(ctx context.Context) (Run, bool) {
	r, ok := ctx.Value(runKey{}).(Run)
	return r, ok
}

// Task wraps a gocron job function for the job named key, so that it runs
// with the lock's context: pass the result to gocron.NewTask, and give the
// gocron job the name key (gocron.WithName). The context given to fn ends
// when gocron's does or when the run's lock is lost (context.Cause says
// which: a *leash.LostError for the lock), carries the run ([RunOf]), and
// fn's error is recorded in the job's history for a job named in
// Options.Schedules. Called without a lock (gocron runs the job without the
// Locker), fn gets gocron's context.
func (l *Locker) Task(key string, fn func(ctx context.Context) error) func(ctx context.Context) error {
	name := l.opts.Prefix + key
	return func(ctx context.Context) error {
		l.mu.Lock()
		lk := l.runs[name]
		l.mu.Unlock()
		if lk == nil {
			return fn(ctx)
		}
		rctx, cancel := context.WithCancelCause(context.WithValue(ctx, runKey{}, lk.run))
		defer cancel(nil)
		stop := context.AfterFunc(lk.hold.Context(), func() { cancel(context.Cause(lk.hold.Context())) })
		defer stop()
		err := fn(rctx)
		lk.mu.Lock()
		lk.err, lk.ranFn = err, true
		lk.mu.Unlock()
		return err
	}
}

// ErrNotLeader is returned by Elector.IsLeader on an instance that is not
// the leader.
var ErrNotLeader = errors.New("gocronleash: not the leader")

// Elector is a gocron.Elector on a leash Client: the instance that holds
// the leadership lock (a leash lock, renewed by the Client's watchdog)
// runs every job. Leadership is taken when IsLeader finds the lock free,
// and kept until the lock is lost or Close releases it; another instance
// takes it over within a lease after the leader dies.
//
// gocron asks IsLeader before each run and does not stop a run when
// leadership is lost during it: a leader that pauses past its lease runs
// on beside the new leader until it looks. Jobs can watch [Elector.Context]
// and use [Elector.Fence] where that matters.
type Elector struct {
	m *leash.Mutex

	mu   sync.Mutex
	hold *leash.Hold
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector returns an Elector whose leadership is the lock name on c,
// with opts (nil: the Client's). It makes no round trip.
func NewElector(c *leash.Client, name string, opts *leash.LockOptions) (*Elector, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: gocronleash: nil Client", leash.ErrInvalidArgument)
	}
	if err := leash.ValidateName(name); err != nil {
		return nil, fmt.Errorf("gocronleash: %w", err)
	}
	return &Elector{m: c.Mutex(name, opts)}, nil
}

// IsLeader returns nil when this instance holds the leadership lock, or
// took it now, and an error matching ErrNotLeader (or the store's error)
// when not.
func (e *Elector) IsLeader(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hold != nil && e.hold.Err() == nil {
		return nil
	}
	e.hold = nil
	h, err := e.m.TryLock(ctx)
	if errors.Is(err, leash.ErrNotAcquired) {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	if err != nil {
		return err
	}
	e.hold = h
	return nil
}

// Context returns a context that ends when this instance's leadership ends
// (lost, or given up by Close), and one already ended when it is not the
// leader.
func (e *Elector) Context() context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hold == nil {
		return canceled
	}
	return e.hold.Context()
}

// Fence returns the leadership's fencing token, greater than every earlier
// leader's; 0 when this instance is not the leader.
func (e *Elector) Fence() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hold == nil || e.hold.Err() != nil {
		return 0
	}
	return e.hold.Fence()
}

// Close gives up leadership, if this instance has it.
func (e *Elector) Close(ctx context.Context) error {
	e.mu.Lock()
	h := e.hold
	e.hold = nil
	e.mu.Unlock()
	if h == nil {
		return nil
	}
	return h.Unlock(ctx)
}

var canceled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()
