package driver

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// JobStore is implemented by a store that keeps the ticks and the run
// history of scheduled jobs beside the locks: what package schedule needs
// so that each tick of a job runs once across many instances, whatever
// their clocks say. A job's name is also the name of its run lock (the
// lock, or semaphore, a run holds while it runs), and a store keeps the
// job's records where that lock lives (on Redis, in its hash slot).
//
// Every decision is made by the store's clock, in one atomic step, so that
// instances whose clocks disagree still agree on which tick ran:
//
//   - a tick is claimed, not a time window locked: tick T (the instant the
//     schedule names) is granted once, and only while no later tick of the
//     job was claimed, so a late instance finds it taken;
//   - an early instance is told to wait until the store's clock reaches T
//     (less the claim's tolerance);
//   - a failed run of T may be claimed again as attempt n+1, until a later
//     tick is claimed.
//
// The store keeps the last TickClaim.Keep records of each job, newest
// first, and never any other state that a lock's layout does not already
// have. A name whose job keys hold something else (another application's
// data) is refused with a [*NotALockError] that says what was found, and
// left unchanged.
type JobStore interface {
	// ClaimTick judges a claim of c.Tick (attempt c.Attempt) of job c.Job
	// by the store's clock, in one atomic step, in this order:
	//
	//   - ClaimTaken when a later tick was claimed, or this tick with an
	//     attempt at least c.Attempt, or when c.Attempt is not the next
	//     attempt of a failed or cancelled run of this tick (the first
	//     attempt of a tick no one claimed is attempt 1); Last is then the
	//     record of the job's latest claim;
	//   - ClaimEarly when c.Tick is more than c.Tolerance after the store's
	//     now; Wait is then c.Tick minus now;
	//   - ClaimLate when c.Until is set and the store's now is after it;
	//   - otherwise ClaimGranted: the tick and attempt are recorded as the
	//     job's latest claim, with a record of the run (c.Run, with Job,
	//     Tick, Attempt and Started set by the store, Outcome
	//     OutcomeRunning), Prev is the tick claimed before (zero for a
	//     job's first claim) and PrevSpec the schedule kept before.
	//
	// Now is the store's clock when it judged. An error means the outcome
	// is unknown, except an error matching ErrNotALock, after which nothing
	// changed.
	ClaimTick(ctx context.Context, c TickClaim) (TickResult, error)

	// EndRun records how a granted run ended: the record of e's tick and
	// attempt, when e.Client claimed it and it is still kept, gets e's
	// Outcome, Fence and Error, and Ended set to the store's now; the
	// job's latest claim learns the outcome too, which ClaimTick reads to
	// allow a retry. A record no longer kept, or another client's, is left
	// as it is, and EndRun returns nil: the outcome was the claimer's to
	// tell.
	EndRun(ctx context.Context, e RunEnd) error

	// AddRuns adds records of runs that were never claimed (ticks missed
	// while no instance could claim them: OutcomeMissed) to job's history,
	// oldest first, each below the records of later ticks (the claim that
	// found them missed is recorded before), keeping its last keep
	// records: the history stays newest tick first, and trimming drops the
	// oldest ticks, never that claim. The store sets Job and,
	// when zero, Started and Ended to its now.
	AddRuns(ctx context.Context, job string, runs []RunRecord, keep int) error

	// Jobs returns, sorted, the names of the jobs with a claim or a record
	// whose names match pattern, a glob as [Admin.List] takes ("" matches
	// every job).
	Jobs(ctx context.Context, pattern string) ([]string, error)

	// History returns job's latest claim and its last n records, newest
	// first (n <= 0: every record kept). A record still OutcomeRunning is
	// reported as OutcomeLost unless its claimer (its Client) holds a lock
	// or permit on the job's name, or someone holds one and no newer record
	// has ended (the run may be waiting for it, queued: see
	// [ReportedRuns]): the claimer stopped without saying how the run ended
	// (killed, cut off past its lease). A run read in the round trip
	// between its claim and its lock reads lost too. A job with no claim and no record returns a zero
	// JobState with the job's name, and no error.
	History(ctx context.Context, job string, n int) (JobState, error)
}

// Limits and defaults of the records a [JobStore] keeps.
const (
	// DefaultKeepRuns is how many records of a job are kept when a claim
	// does not say.
	DefaultKeepRuns = 100
	// MaxKeepRuns is the most records of a job a claim may ask to keep.
	MaxKeepRuns = 10000
	// MaxRunError is the longest RunRecord.Error kept, in bytes; callers
	// truncate longer texts before they reach the store.
	MaxRunError = 1024
	// MaxSpecLen is the longest TickClaim.Spec, in bytes.
	MaxSpecLen = 256
)

// TickClaim is one claim of a job's tick; see [JobStore.ClaimTick].
type TickClaim struct {
	// Job is the job's name, which is also its run lock's name.
	Job string
	// Tick is the scheduled instant claimed, kept to the millisecond.
	Tick time.Time
	// Attempt is 1 for the first run of a tick, n+1 for a retry of a
	// failed attempt n.
	Attempt int
	// Tolerance is how far before Tick, by the store's clock, the claim
	// may be granted.
	Tolerance time.Duration
	// Until, when not zero, is the latest store time at which the claim may
	// be granted (the misfire threshold); zero means no limit.
	Until time.Time
	// Run is the claimer's record of the run: Host, PID, Client (the
	// leash Client's id), Claim (an id of this claim, unique to it) and
	// any other field the claimer sets; the store
	// sets Job, Tick, Attempt, Started and Outcome.
	Run RunRecord
	// Keep is how many records of the job to keep, at most MaxKeepRuns;
	// zero means DefaultKeepRuns.
	Keep int
	// Spec is the job's schedule as text, kept with the claim for operators
	// (a CLI computes the next tick from it); empty leaves the kept one. At
	// most MaxSpecLen bytes.
	Spec string
}

// ClaimStatus is the verdict on a [TickClaim].
type ClaimStatus uint8

// Verdicts on a claim.
const (
	// ClaimGranted: the tick (attempt) is the caller's to run.
	ClaimGranted ClaimStatus = iota + 1
	// ClaimEarly: the store's clock has not reached the tick (within the
	// tolerance); try again after TickResult.Wait.
	ClaimEarly
	// ClaimTaken: this tick (attempt) or a later one was claimed already.
	ClaimTaken
	// ClaimLate: the store's clock passed the claim's Until.
	ClaimLate
)

var claimText = [...]string{ClaimGranted: "granted", ClaimEarly: "early", ClaimTaken: "taken", ClaimLate: "late"}

// String returns the verdict's name.
func (s ClaimStatus) String() string {
	if int(s) < len(claimText) && claimText[s] != "" {
		return claimText[s]
	}
	return "claim(" + strconv.Itoa(int(s)) + ")"
}

// TickResult is the outcome of a [JobStore.ClaimTick].
type TickResult struct {
	// Status is the verdict.
	Status ClaimStatus
	// Wait is, for ClaimEarly, the tick minus the store's now.
	Wait time.Duration
	// Prev is, for ClaimGranted, the tick of the job's claim before this
	// one (this tick, for a retry); zero for the job's first claim. The
	// ticks of the schedule between Prev and this one were claimed by no
	// one: the caller reports them missed, when PrevSpec says Prev was
	// claimed under the same schedule.
	Prev time.Time
	// PrevSpec is, for ClaimGranted, the schedule kept before this claim
	// (see TickClaim.Spec): the one Prev was claimed under; empty when none
	// was kept. When it differs from the claim's, the job's schedule
	// changed, and the new schedule's ticks before this one were never the
	// job's to miss.
	PrevSpec string
	// Last is, for ClaimTaken, the record of the job's latest claim (as
	// far as the store still keeps it; at least its Tick and Attempt).
	Last RunRecord
	// Now is the store's clock when it judged the claim.
	Now time.Time
}

// GrantedEarlier reports whether r, a ClaimTaken answer to c, names c
// itself as the job's latest claim (the same claim id, tick and attempt):
// an earlier send of c, whose answer was lost, was granted. A caller that
// sends a claim again after a failed round trip takes the tick then.
func (r TickResult) GrantedEarlier(c TickClaim) bool {
	return r.Status == ClaimTaken && c.Run.Claim != "" && r.Last.Claim == c.Run.Claim &&
		r.Last.Tick.Equal(c.Tick) && r.Last.Attempt == c.Attempt
}

// Outcome is how a run of a job ended, in a [RunRecord].
type Outcome uint8

// Outcomes of a run.
const (
	// OutcomeRunning: claimed and not ended yet.
	OutcomeRunning Outcome = iota + 1
	// OutcomeOK: the job's function returned nil.
	OutcomeOK
	// OutcomeFailed: the job's function returned an error (or panicked).
	OutcomeFailed
	// OutcomeSkipped: the tick was claimed but not run, because the run
	// lock was busy (the previous run still ran; overlap policy).
	OutcomeSkipped
	// OutcomeMissed: no instance claimed the tick in time.
	OutcomeMissed
	// OutcomeCancelled: the run was cancelled: its MaxRun passed, or the
	// scheduler shut down before it ended, and its function returned an
	// error (one that returned nil did its work: ok, or lost when its
	// lock had gone).
	OutcomeCancelled
	// OutcomeLost: the run lost its lock while it ran (its lease ran out,
	// it stalled), or its claimer stopped without telling how it ended.
	OutcomeLost
)

var outcomeText = [...]string{OutcomeRunning: "running", OutcomeOK: "ok", OutcomeFailed: "failed", OutcomeSkipped: "skipped",
	OutcomeMissed: "missed", OutcomeCancelled: "cancelled", OutcomeLost: "lost"}

// String returns the outcome's name: "running", "ok", "failed", "skipped",
// "missed", "cancelled" or "lost".
func (o Outcome) String() string {
	if int(o) < len(outcomeText) && outcomeText[o] != "" {
		return outcomeText[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// ParseOutcome returns the outcome named s (as String returns it), and
// false for any other text.
func ParseOutcome(s string) (Outcome, bool) {
	for o, t := range outcomeText {
		if t != "" && t == s {
			return Outcome(o), true
		}
	}
	return 0, false
}

// Retryable reports whether a run that ended so may be attempted again:
// OutcomeFailed and OutcomeCancelled.
func (o Outcome) Retryable() bool { return o == OutcomeFailed || o == OutcomeCancelled }

// RunRecord is one run of a job in its history.
type RunRecord struct {
	// Job is the job's name.
	Job string
	// Tick is the scheduled instant the run was for.
	Tick time.Time
	// Attempt is 1 for a tick's first run, n for its nth.
	Attempt int
	// Host and PID are the claimer's host name and process id.
	Host string
	PID  int
	// Client is the claimer's leash Client id.
	Client string
	// Claim is the id the claimer gave its claim (TickClaim.Run.Claim), kept
	// as it was; empty when it gave none. One Client may claim one tick in
	// more than one place (a job removed and added again, two schedulers on
	// one Client), so a claimer that sends a claim again after its answer
	// was lost knows the tick is its own only when Last carries its id.
	Claim string
	// Started is the store's clock when the tick was claimed.
	Started time.Time
	// Ended is the store's clock when the end was recorded; zero while
	// running.
	Ended time.Time
	// Outcome is how the run ended.
	Outcome Outcome
	// Fence is the fencing token of the run's lock; 0 when it took none.
	Fence int64
	// Error is the run's error text, at most MaxRunError bytes; empty when
	// none.
	Error string
}

// Duration is how long the run took, by the store's clock; zero while
// running.
func (r RunRecord) Duration() time.Duration {
	if r.Ended.IsZero() || r.Started.IsZero() {
		return 0
	}
	return r.Ended.Sub(r.Started)
}

// RunEnd reports how a granted run ended; see [JobStore.EndRun].
type RunEnd struct {
	// Job, Tick and Attempt name the run.
	Job     string
	Tick    time.Time
	Attempt int
	// Client is the claimer's leash Client id, as in its claim.
	Client string
	// Outcome is how the run ended: any but OutcomeRunning.
	Outcome Outcome
	// Fence is the fencing token of the run's lock; 0 when it took none.
	Fence int64
	// Error is the run's error text, at most MaxRunError bytes.
	Error string
}

// JobState is a job's latest claim and history; see [JobStore.History].
type JobState struct {
	// Job is the job's name.
	Job string
	// Tick and Attempt are the job's latest claim; zero when none.
	Tick    time.Time
	Attempt int
	// Spec is the schedule the latest claim that gave one said the job has.
	Spec string
	// Runs are the job's last records, newest first.
	Runs []RunRecord
	// Now is the store's clock when it answered.
	Now time.Time
}

// CheckClaim returns an error saying what is wrong with a claim that no
// store may grant (an attempt below 1, a negative tolerance, a keep beyond
// MaxKeepRuns, a record's error text longer than MaxRunError), or nil. A
// JobStore calls it before any round trip and wraps its error with
// leash.ErrInvalidArgument.
func CheckClaim(c TickClaim) error {
	switch {
	case c.Attempt < 1:
		return fmt.Errorf("job %q: attempt %d: attempts count from 1", c.Job, c.Attempt)
	case c.Tolerance < 0:
		return fmt.Errorf("job %q: negative tolerance %v", c.Job, c.Tolerance)
	case c.Keep < 0 || c.Keep > MaxKeepRuns:
		return fmt.Errorf("job %q: keep %d: want 0 (the default) to %d", c.Job, c.Keep, MaxKeepRuns)
	case len(c.Run.Error) > MaxRunError:
		return fmt.Errorf("job %q: error text of %d bytes, more than MaxRunError (%d)", c.Job, len(c.Run.Error), MaxRunError)
	case len(c.Spec) > MaxSpecLen:
		return fmt.Errorf("job %q: spec of %d bytes, more than MaxSpecLen (%d)", c.Job, len(c.Spec), MaxSpecLen)
	}
	return nil
}

// CheckEnd returns an error saying what is wrong with a run's end that no
// store may record (an outcome that is not an end, an attempt below 1, an
// error text longer than MaxRunError), or nil; see [CheckClaim].
func CheckEnd(e RunEnd) error {
	switch {
	case e.Outcome == OutcomeRunning || e.Outcome < OutcomeRunning || e.Outcome > OutcomeLost:
		return fmt.Errorf("job %q: %v is not how a run ends", e.Job, e.Outcome)
	case e.Attempt < 1:
		return fmt.Errorf("job %q: attempt %d: attempts count from 1", e.Job, e.Attempt)
	case len(e.Error) > MaxRunError:
		return fmt.Errorf("job %q: error text of %d bytes, more than MaxRunError (%d)", e.Job, len(e.Error), MaxRunError)
	}
	return nil
}

// CheckRuns returns an error saying what is wrong with records AddRuns may
// not add (an outcome that is not an end, an error text longer than
// MaxRunError, a keep beyond MaxKeepRuns), or nil; see [CheckClaim].
func CheckRuns(job string, runs []RunRecord, keep int) error {
	if keep < 0 || keep > MaxKeepRuns {
		return fmt.Errorf("job %q: keep %d: want 0 (the default) to %d", job, keep, MaxKeepRuns)
	}
	for _, r := range runs {
		if err := CheckEnd(RunEnd{Job: job, Attempt: max(r.Attempt, 1), Outcome: r.Outcome, Error: r.Error}); err != nil {
			return err
		}
	}
	return nil
}
