package memstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

var _ driver.JobStore = (*Store)(nil)

// job is a scheduled job's latest claim and history. The Store keeps it
// apart from the lock of the same name, whose state it only reads.
type job struct {
	tick    time.Time
	attempt int
	outcome driver.Outcome // of the latest claim's run, as EndRun told it
	spec    string
	runs    []driver.RunRecord
}

// invalid wraps a driver check's error for a caller to match
// leash.ErrInvalidArgument.
func invalid(err error) error { return fmt.Errorf("%w: memstore: %w", leash.ErrInvalidArgument, err) }

// ms keeps a time to the millisecond, the precision every store keeps.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }

// keep resolves TickClaim.Keep and AddRuns's keep.
func keep(n int) int {
	if n <= 0 {
		return driver.DefaultKeepRuns
	}
	return min(n, driver.MaxKeepRuns)
}

// push adds rec as the job's newest record and drops the oldest beyond n.
func (j *job) push(rec driver.RunRecord, n int) { j.insert(0, rec, n) }

// below adds rec below the records of later ticks (see AddRuns) and drops
// the oldest beyond n.
func (j *job) below(rec driver.RunRecord, n int) {
	i := 0
	for i < len(j.runs) && j.runs[i].Tick.After(rec.Tick) {
		i++
	}
	j.insert(i, rec, n)
}

// insert adds rec at index i of the records and drops the oldest beyond n.
func (j *job) insert(i int, rec driver.RunRecord, n int) {
	j.runs = slices.Insert(j.runs, i, rec)
	if len(j.runs) > n {
		clear(j.runs[n:])
		j.runs = j.runs[:n]
	}
}

// find returns the index of the record of tick and attempt, or -1.
func (j *job) find(tick time.Time, attempt int) int {
	return slices.IndexFunc(j.runs, func(r driver.RunRecord) bool { return r.Tick.Equal(tick) && r.Attempt == attempt })
}

// ClaimTick implements [driver.JobStore].
func (s *Store) ClaimTick(ctx context.Context, c driver.TickClaim) (driver.TickResult, error) {
	if err := driver.CheckClaim(c); err != nil {
		return driver.TickResult{}, invalid(err)
	}
	if err := ctx.Err(); err != nil {
		return driver.TickResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	res := driver.TickResult{Now: ms(now)}
	tick := ms(c.Tick)
	j := s.jobs[c.Job]
	if j == nil {
		j = &job{}
	}
	switch {
	case j.attempt > 0 && (j.tick.After(tick) ||
		j.tick.Equal(tick) && (c.Attempt != j.attempt+1 || !j.outcome.Retryable()) ||
		tick.After(j.tick) && c.Attempt != 1):
		res.Status = driver.ClaimTaken
		res.Last = driver.RunRecord{Job: c.Job, Tick: j.tick, Attempt: j.attempt, Outcome: j.outcome}
		if i := j.find(j.tick, j.attempt); i >= 0 {
			res.Last = s.reported(c.Job, j.runs[i], now)
		}
		return res, nil
	case j.attempt == 0 && c.Attempt != 1:
		res.Status = driver.ClaimTaken
		return res, nil
	case tick.Sub(now) > c.Tolerance:
		res.Status, res.Wait = driver.ClaimEarly, tick.Sub(now)
		return res, nil
	case !c.Until.IsZero() && now.After(c.Until):
		res.Status = driver.ClaimLate
		return res, nil
	}
	res.Status, res.Prev, res.PrevSpec = driver.ClaimGranted, j.tick, j.spec
	rec := c.Run
	rec.Job, rec.Tick, rec.Attempt, rec.Started, rec.Ended, rec.Outcome = c.Job, tick, c.Attempt, res.Now, time.Time{}, driver.OutcomeRunning
	j.tick, j.attempt, j.outcome = tick, c.Attempt, driver.OutcomeRunning
	if c.Spec != "" {
		j.spec = c.Spec
	}
	j.push(rec, keep(c.Keep))
	s.jobs[c.Job] = j
	return res, nil
}

// EndRun implements [driver.JobStore].
func (s *Store) EndRun(ctx context.Context, e driver.RunEnd) error {
	if err := driver.CheckEnd(e); err != nil {
		return invalid(err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[e.Job]
	if j == nil {
		return nil
	}
	tick := ms(e.Tick)
	i := j.find(tick, e.Attempt)
	if i < 0 || j.runs[i].Client != e.Client {
		return nil
	}
	r := &j.runs[i]
	r.Outcome, r.Fence, r.Error, r.Ended = e.Outcome, e.Fence, e.Error, ms(time.Now())
	if j.tick.Equal(tick) && j.attempt == e.Attempt {
		j.outcome = e.Outcome
	}
	return nil
}

// AddRuns implements [driver.JobStore].
func (s *Store) AddRuns(ctx context.Context, name string, runs []driver.RunRecord, n int) error {
	if err := driver.CheckRuns(name, runs, n); err != nil {
		return invalid(err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(runs) == 0 {
		return nil // no job made of nothing, as the other stores do
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[name]
	if j == nil {
		j = &job{}
		s.jobs[name] = j
	}
	now := ms(time.Now())
	for _, r := range runs {
		r.Job, r.Tick = name, ms(r.Tick)
		if r.Started.IsZero() {
			r.Started = now
		}
		if r.Ended.IsZero() {
			r.Ended = now
		}
		j.below(r, keep(n))
	}
	return nil
}

// Jobs implements [driver.JobStore].
func (s *Store) Jobs(ctx context.Context, pattern string) ([]string, error) {
	re, err := driver.Glob(pattern)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.jobs {
		if re.MatchString(n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// History implements [driver.JobStore].
func (s *Store) History(ctx context.Context, name string, n int) (driver.JobState, error) {
	if err := ctx.Err(); err != nil {
		return driver.JobState{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	st := driver.JobState{Job: name, Now: ms(now)}
	j := s.jobs[name]
	if j == nil {
		return st, nil
	}
	st.Tick, st.Attempt, st.Spec = j.tick, j.attempt, j.spec
	runs := j.runs
	if n > 0 && n < len(runs) {
		runs = runs[:n]
	}
	st.Runs = append(st.Runs, runs...)
	driver.ReportedRuns(st.Runs, func(i int) (mine, held bool) { return s.holdersLocked(name, st.Runs[i].Client, now) })
	return st, nil
}

// reported is rec, the job's latest claim, as a taken claim's Last reports
// it (driver.ReportedRun). The caller holds s.mu.
func (s *Store) reported(name string, rec driver.RunRecord, now time.Time) driver.RunRecord {
	mine, held := s.holdersLocked(name, rec.Client, now)
	return driver.ReportedRun(rec, mine, held, true)
}

// holdersLocked reports whether the client with id holds a lock or a permit
// on name, and whether anyone does. The caller holds s.mu.
func (s *Store) holdersLocked(name, id string, now time.Time) (mine, any bool) {
	if s.names[name] == nil {
		return false, false
	}
	st := s.get(name, now)
	var owners []string
	if st.excl != nil {
		owners = append(owners, st.excl.owner)
	}
	if st.sem != nil {
		for o := range st.sem.permits {
			owners = append(owners, o)
		}
	}
	for _, o := range owners {
		if driver.OwnerClient(o) == id {
			return true, true
		}
	}
	return false, len(owners) > 0
}
