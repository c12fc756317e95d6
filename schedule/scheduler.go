package schedule

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// Defaults of [Options] and [JobOptions].
const (
	// DefaultTolerance is how early, by the store's clock, a tick may be
	// claimed: an instance whose clock runs ahead waits for the store's.
	DefaultTolerance = 10 * time.Millisecond
	// DefaultGrace is how long Run, once its ctx ends, lets running jobs
	// finish before it cancels them.
	DefaultGrace = 30 * time.Second
	// DefaultTimeout bounds each round trip of the scheduler's own (a
	// claim, a record); the run lock's round trips are the Client's.
	DefaultTimeout = 5 * time.Second
	// DefaultRetryDelay is the pause before a failed run is attempted
	// again.
	DefaultRetryDelay = time.Second
)

// NoGrace, as Options.Grace, cancels running jobs as soon as Run's ctx
// ends.
const NoGrace time.Duration = -1

// Errors of the package. Bad arguments also match leash.ErrInvalidArgument.
var (
	// ErrRunning is returned by a second call of Run.
	ErrRunning = errors.New("schedule: Run already called")
	// ErrJobExists is returned by Add for a name already added.
	ErrJobExists = errors.New("schedule: job already added")
	// ErrShutdown is the cause of a run's context cancelled because Run's
	// ctx ended and the grace passed.
	ErrShutdown = errors.New("schedule: scheduler shut down")
)

// Options configures a [Scheduler]. A nil *Options means all defaults, and a
// zero field means that field's default. New copies the struct.
type Options struct {
	// Location is the time zone of cron expressions that name none with
	// CRON_TZ. Default UTC: instances of one service may run with
	// different local zones, and a job must tick at the same instants on
	// all of them; for that reason time.Local is refused (name the zone).
	Location *time.Location
	// Tolerance is how long before a tick, by the store's clock, it may be
	// claimed. An instance whose clock runs ahead of the store's is told to
	// wait until the store's clock reaches the tick; this only saves that
	// instance a second round trip when it is early by less than
	// Tolerance. Default DefaultTolerance (10ms).
	Tolerance time.Duration
	// Grace is how long Run, once its ctx ends, waits for running jobs
	// before it cancels their context (cause ErrShutdown) and then releases
	// their locks. Default DefaultGrace (30s); NoGrace cancels at once.
	Grace time.Duration
	// Keep is how many records of each job the store keeps. Default
	// driver.DefaultKeepRuns (100); at most driver.MaxKeepRuns.
	Keep int
	// Timeout bounds each claim and record round trip, counted from when
	// it is sent: at most MaxInFlight are in flight at once, and the others
	// wait for their turn first. Default DefaultTimeout (5s).
	Timeout time.Duration
	// Now is the instance's wall clock, from which it computes when its
	// ticks are due. Default time.Now. Tests set it to run instances whose
	// clocks disagree; the store's clock still judges every claim.
	Now func() time.Time
	// Logger receives the scheduler's logs: Debug per claim, Warn when a
	// store round trip fails, Error when a run's lock is lost. Default:
	// discard.
	Logger *slog.Logger
}

// Overlap says what happens to a tick that comes while the job's previous
// run still runs (on any instance).
type Overlap uint8

// Overlap policies.
const (
	// OverlapSkip (the default): the tick is claimed and recorded skipped.
	OverlapSkip Overlap = iota
	// OverlapQueue: the tick waits for the run lock until its window ends
	// (the next tick, by the store's clock as read at the claim), then is
	// recorded skipped if it never got it.
	OverlapQueue
	// OverlapLimit: up to JobOptions.Limit runs at once (the run lock is a
	// semaphore of Limit permits); a tick beyond is recorded skipped.
	OverlapLimit
)

// Misfire says what happens to ticks no instance claimed in time.
type Misfire uint8

// Misfire policies.
const (
	// MisfireSkip (the default): a tick is run only while it is not late
	// (see JobOptions.Lateness); ticks missed while no instance ran are
	// recorded missed.
	MisfireSkip Misfire = iota
	// MisfireRunLatest: in addition, when the job starts on an instance
	// (Run, or Add while running) and its latest tick was not claimed, that
	// tick is run once, however late; the ticks before it are recorded
	// missed.
	MisfireRunLatest
)

// JobOptions are one job's policies. A nil *JobOptions means all defaults;
// a zero field means that field's default. Every instance must add a job
// with the same schedule and options: the store judges ticks, not options.
type JobOptions struct {
	// Overlap is the overlap policy. Default OverlapSkip.
	Overlap Overlap
	// Limit is, for OverlapLimit, how many runs may run at once (at least
	// 1). Every instance must use the same.
	Limit int
	// MaxRun bounds a run: when it passes, the run's context is cancelled
	// (its lock's MaxHold: the hold is lost with leash.ReasonMaxHold), the
	// lock stops being renewed, and the run is recorded cancelled (and
	// retried, see Retries) when the function then returns an error, or
	// lost (not retried) when it returns nil: its work went on without
	// the lock. Default 0: no bound.
	MaxRun time.Duration
	// Liveness opts into the core's fake-alive detection: the job must call
	// Run.Touch at least this often, or its lock is given up and its
	// context cancelled (leash.ReasonStalled). Default 0: off.
	Liveness time.Duration
	// Lease is the run lock's lease, renewed by the Client's watchdog.
	// Default: the Client's.
	Lease time.Duration
	// Misfire is the misfire policy. Default MisfireSkip.
	Misfire Misfire
	// Lateness is how late, by the store's clock, a tick may still be
	// claimed. Default: until the next tick. An instance whose clock runs
	// behind the store's by more than Lateness cannot claim a tick (others
	// can).
	Lateness time.Duration
	// Retries is how many more attempts a run whose function returned an
	// error gets (recorded failed, or cancelled when MaxRun passed or the
	// scheduler shut down first; a function that returned nil did its
	// work and is never retried) while its tick's window lasts (until
	// the next tick, by the store's clock). The instance whose attempt
	// failed claims the next one after RetryDelay, and so does any
	// instance that finds the failed attempt when it claims the tick (one
	// whose clock runs behind); the store grants each attempt once. A retry waits for the run lock until the
	// window ends, whatever the Overlap policy: the failed attempt may
	// still be handing it back. Default 0.
	Retries int
	// RetryDelay is the pause before each retry. Default DefaultRetryDelay
	// (1s).
	RetryDelay time.Duration
	// Location overrides Options.Location for this job; time.Local is
	// refused, as there.
	Location *time.Location
}

// Func is a job's function. ctx is cancelled when the run's lock is lost
// (its lease ran out, its store could not be reached, it stalled past
// Liveness), when MaxRun passes, and when the scheduler shuts down and its
// grace passed; context.Cause says which (a *leash.LostError, or
// ErrShutdown). ctx.Err looks at the lock's validity itself, as
// leash.Hold.Err does: a function that wakes from a pause past its lease
// sees the loss on its first look, so it should check ctx.Err before it
// commits its work (and pass Run.Fence to what it writes). An error (or a
// panic) records the run failed (cancelled, when its context was ended by
// MaxRun or shutdown), and a retry follows if the job has retries left.
// Return nil only when the run's work is done: a run whose function
// returned nil is never retried, even after its context ended; one that
// stops early returns an error, such as context.Cause(ctx).
type Func func(ctx context.Context, run Run) error

// Run describes one run of a job, given to its Func.
type Run struct {
	// Job is the job's name.
	Job string
	// Tick is the scheduled instant this run is for: the same on every
	// instance, whatever its clock says.
	Tick time.Time
	// Attempt is 1 for the tick's first run, n for its nth (a retry).
	Attempt int
	// Fence is the fencing token of the run's lock: greater than every
	// earlier run's. Pass it to what the job writes, so that a run that
	// lost its lock (paused past its lease) is refused there.
	Fence int64

	hold *leash.Hold
}

// Touch tells the Client the run is alive, for JobOptions.Liveness.
func (r Run) Touch() {
	if r.hold != nil {
		r.hold.Touch()
	}
}

// Scheduler runs jobs on a schedule so that each tick of a job runs once
// across every instance that runs the same jobs on the same store. Create it
// with New, add jobs with Add, and call Run. Its methods are safe for
// concurrent use.
type Scheduler struct {
	c     *leash.Client
	store driver.JobStore
	opts  Options
	log   *slog.Logger
	base  driver.RunRecord // who this instance is, in its records

	// hard ends when the shutdown grace has passed: running jobs' contexts
	// are cancelled with ErrShutdown.
	hard     context.Context
	hardStop context.CancelCauseFunc

	mu   sync.Mutex
	jobs map[string]*job
	run  context.Context // Run's ctx while it runs; nil before
	done bool            // Run returned
	due  dueHeap         // each started job's next tick (dispatch.go)
	wake chan struct{}   // tells the dispatcher the earliest tick may have changed
	// inFlight holds a token per round trip of the Scheduler's own in
	// flight (slot, unslot); it needs no lock.
	inFlight chan struct{}
	wg       sync.WaitGroup // the dispatcher and the ticks it fired
}

// New returns a Scheduler on c's store, which must keep job records (a
// driver.JobStore: memstore, redisstore, pgstore, mysqlstore and
// zkstore do). It makes no round trip.
// It returns an error matching leash.ErrUnsupported for a store that keeps
// none, and one matching leash.ErrInvalidArgument for bad options.
func New(c *leash.Client, opts *Options) (*Scheduler, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: schedule.New: the leash Client is nil", leash.ErrInvalidArgument)
	}
	js, ok := c.Store().(driver.JobStore)
	if !ok {
		return nil, fmt.Errorf("schedule.New: %w", driver.Unsupported(c.Store(), "scheduled jobs (driver.JobStore)"))
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Tolerance < 0:
		return nil, badOption("Options.Tolerance", o.Tolerance)
	case o.Grace < 0 && o.Grace != NoGrace:
		return nil, badOption("Options.Grace", o.Grace)
	case o.Keep < 0 || o.Keep > driver.MaxKeepRuns:
		return nil, fmt.Errorf("%w: schedule.New: Options.Keep %d: want 0 (the default) to %d", leash.ErrInvalidArgument, o.Keep, driver.MaxKeepRuns)
	case o.Timeout < 0:
		return nil, badOption("Options.Timeout", o.Timeout)
	case o.Location == time.Local:
		return nil, fmt.Errorf("%w: schedule.New: %s", leash.ErrInvalidArgument, localZone("Options.Location"))
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
	if o.Tolerance == 0 {
		o.Tolerance = DefaultTolerance
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if o.Keep == 0 {
		o.Keep = driver.DefaultKeepRuns
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	host, _ := os.Hostname()
	s := &Scheduler{c: c, store: js, opts: o, log: log, jobs: map[string]*job{}, wake: make(chan struct{}, 1),
		inFlight: make(chan struct{}, MaxInFlight),
		base:     driver.RunRecord{Host: host, PID: os.Getpid(), Client: c.ID()}}
	s.hard, s.hardStop = context.WithCancelCause(context.Background())
	return s, nil
}

// localZone says why a Location of time.Local is refused.
func localZone(field string) string {
	return field + " is time.Local: name the zone (such as Europe/Berlin or UTC): the instances' local zones may differ"
}

func badOption(field string, d time.Duration) error {
	return fmt.Errorf("%w: schedule: %s %v is negative", leash.ErrInvalidArgument, field, d)
}

// Add adds the job name, run on spec (see Parse) by fn, with opts. The
// job's name is also the name of its run lock (a mutex, or for
// OverlapLimit a semaphore) and of its records in the store. Add may be
// called before Run or while it runs: the job starts with its next tick (or
// its latest one, with MisfireRunLatest). It makes no round trip. It returns
// an error matching ErrJobExists for a name already added, ErrBadSpec for a
// bad spec, and leash.ErrInvalidArgument for a bad name, a nil fn or bad
// options.
func (s *Scheduler) Add(name, spec string, fn Func, opts *JobOptions) error {
	if err := leash.ValidateName(name); err != nil {
		return fmt.Errorf("schedule: job %q: %w", name, err)
	}
	if fn == nil {
		return fmt.Errorf("%w: schedule: job %q: nil function", leash.ErrInvalidArgument, name)
	}
	j, err := s.newJob(name, spec, fn, opts)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return fmt.Errorf("schedule: job %q: %w", name, ErrShutdown)
	}
	if _, ok := s.jobs[name]; ok {
		return fmt.Errorf("schedule: job %q: %w", name, ErrJobExists)
	}
	s.jobs[name] = j
	if s.run != nil {
		s.startLocked(j)
	}
	return nil
}

// Remove removes the job name, and reports whether there was one. Its
// future ticks are not claimed by this instance; a run in progress goes on
// to its end.
func (s *Scheduler) Remove(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[name]
	if !ok {
		return false
	}
	delete(s.jobs, name)
	if j.stop != nil {
		j.stop()
	}
	return true
}

// Jobs returns the names of the jobs added, sorted.
func (s *Scheduler) Jobs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.jobs))
	for n := range s.jobs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Next returns the job's next tick after t, by its schedule, and false
// when no job name was added.
func (s *Scheduler) Next(name string, t time.Time) (time.Time, bool) {
	s.mu.Lock()
	j, ok := s.jobs[name]
	s.mu.Unlock()
	if !ok {
		return time.Time{}, false
	}
	return j.sched.Next(t), true
}

// History returns job's latest claim and its last n records (n <= 0: all
// kept), newest first, as the store keeps them for every instance (see
// driver.JobStore.History). The job need not be added to this Scheduler.
func (s *Scheduler) History(ctx context.Context, job string, n int) (driver.JobState, error) {
	return s.store.History(ctx, job, n)
}

// Run runs the jobs until ctx ends, then shuts down: no tick is claimed any
// more, runs in progress get Options.Grace to finish, after which their
// context is cancelled (cause ErrShutdown), and Run returns once every run
// has returned and its lock was released and its end recorded. A job whose
// function ignores its context keeps Run waiting. Run returns nil after a
// shutdown, and ErrRunning when called a second time.
func (s *Scheduler) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.run != nil || s.done {
		s.mu.Unlock()
		return ErrRunning
	}
	s.run = ctx
	for _, j := range s.jobs {
		s.startLocked(j)
	}
	s.wg.Add(1)
	// Owned by Run: the dispatcher, until ctx ends; Run waits for it (s.wg).
	go func() {
		defer s.wg.Done()
		s.dispatch(ctx)
	}()
	s.mu.Unlock()

	<-ctx.Done()
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	idle := make(chan struct{})
	// Owned by Run: closes idle when every job loop and run has returned,
	// which ctx's end makes happen (runs: after the grace at the latest).
	go func() {
		s.wg.Wait()
		close(idle)
	}()
	if s.opts.Grace == NoGrace {
		s.hardStop(ErrShutdown)
	} else {
		grace := time.NewTimer(s.opts.Grace)
		defer grace.Stop()
		select {
		case <-idle:
		case <-grace.C:
			s.hardStop(ErrShutdown)
		}
	}
	<-idle
	s.hardStop(ErrShutdown)
	return nil
}

// startLocked starts j under Run's ctx: its latest tick fired now if its
// misfire policy says so, its next tick queued for the dispatcher. The
// caller holds s.mu.
func (s *Scheduler) startLocked(j *job) {
	j.ctx, j.stop = context.WithCancel(s.run)
	now := s.now()
	if j.opts.Misfire == MisfireRunLatest {
		if latest := j.sched.Prev(now); !latest.IsZero() {
			s.fire(j.ctx, j, latest, true)
		}
	}
	if next := j.sched.Next(now); !next.IsZero() {
		heap.Push(&s.due, dueTick{next, j})
		s.poke()
	}
}

// now is the instance's clock.
func (s *Scheduler) now() time.Time { return s.opts.Now() }

// bounded returns a context for one round trip of the scheduler's own:
// detached from ctx's cancellation (a claim or a record in flight is seen
// through) and bounded by Options.Timeout.
func (s *Scheduler) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
}

// MaxInFlight is how many round trips of its own (claims, records of a
// run's end, of missed ticks) a Scheduler has in flight at once; the others
// wait for their turn before Options.Timeout starts to count. Without it,
// the 10,000 claims of 10,000 jobs due at once queue in the store client's
// connection pool, each with its clock running, and past the Timeout a
// run's end goes unrecorded (the run reads lost) on a store that is merely
// busy.
const MaxInFlight = 256

// slot waits until fewer than MaxInFlight round trips are in flight and
// reports true, or until ctx ends (false). The caller gives the slot back
// with unslot once its round trip (and its retries) ended.
func (s *Scheduler) slot(ctx context.Context) bool {
	select {
	case s.inFlight <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Scheduler) unslot() { <-s.inFlight }
