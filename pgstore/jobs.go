package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

var _ driver.JobStore = (*Store)(nil)

// A scheduled job's records (driver.JobStore) are rows of two tables of
// their own, Table+"_jobs" (a job's latest claim) and Table+"_runs" (its
// last records); each operation is one statement calling one function of
// schema.sql, which locks the job's row, judges by clock_timestamp() read
// once, and only reads the lock tables (whether a run's claimer holds the
// job's lock). See the functions' comments in schema.sql.

// invalid wraps a driver check's error for a caller to match
// leash.ErrInvalidArgument.
func invalid(err error) error { return fmt.Errorf("%w: pgstore: %w", leash.ErrInvalidArgument, err) }

// runRow is a record as the functions return it (o_r_* columns); the
// pointers are nil for a row with no record.
type runRow struct {
	tick            *int64
	attempt         *int32
	host, client    *string
	claim           *string
	pid             *int32
	started, ended  *int64
	outcome, errTxt *string
	fence           *int64
	held            *int32
}

func (r *runRow) dest() []any {
	return []any{&r.tick, &r.attempt, &r.host, &r.pid, &r.client, &r.claim, &r.started, &r.ended, &r.outcome, &r.fence, &r.errTxt, &r.held}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// record is the row's record of job, as the table keeps it; History and
// ClaimTick report it with driver.ReportedRuns and driver.ReportedRun
// (see holds).
func (r *runRow) record(job string) driver.RunRecord {
	rec := driver.RunRecord{Job: job, Tick: driver.UnixMilliOrZero(deref(r.tick)), Attempt: int(deref(r.attempt)), Host: deref(r.host),
		PID: int(deref(r.pid)), Client: deref(r.client), Claim: deref(r.claim), Started: driver.UnixMilliOrZero(deref(r.started)), Ended: driver.UnixMilliOrZero(deref(r.ended)),
		Fence: deref(r.fence), Error: deref(r.errTxt)}
	rec.Outcome, _ = driver.ParseOutcome(deref(r.outcome))
	return rec
}

// holds is what the row says of a running record's claimer (2: it holds a
// lock or permit on the job's name; 1: someone else does; 0: no one does):
// whether it holds one (mine), and whether anyone does.
func (r *runRow) holds() (mine, held bool) {
	h := deref(r.held)
	return h == 2, h > 0
}

// checkJob checks a job's name as the core checks a lock's, and the schema.
func (s *Store) checkJob(ctx context.Context, name string) error {
	if s.err != nil {
		return s.err
	}
	if err := leash.ValidateName(name); err != nil {
		return err
	}
	return s.ready(ctx)
}

// ClaimTick implements [driver.JobStore]: one statement (the claim_tick
// function).
func (s *Store) ClaimTick(ctx context.Context, c driver.TickClaim) (driver.TickResult, error) {
	if err := driver.CheckClaim(c); err != nil {
		return driver.TickResult{}, invalid(err)
	}
	if err := s.checkJob(ctx, c.Job); err != nil {
		return driver.TickResult{}, err
	}
	var (
		status   string
		now, n   int64
		prevSpec *string
		row      runRow
	)
	err := s.pool.QueryRow(ctx, s.sql.claimTick, c.Job, c.Tick.UnixMilli(), int32(c.Attempt), c.Tolerance.Milliseconds(), driver.UntilMilli(c.Until),
		c.Run.Host, int32(c.Run.PID), c.Run.Client, c.Run.Claim, int32(driver.KeepRuns(c.Keep)), c.Spec).Scan(append([]any{&status, &now, &n, &prevSpec}, row.dest()...)...)
	if err != nil {
		return driver.TickResult{}, fmt.Errorf("pgstore: claim tick of job %q: %w", c.Job, explain(err))
	}
	res, ok := driver.ClaimVerdict(status, now, n)
	if !ok {
		return driver.TickResult{}, fmt.Errorf("pgstore: claim tick of job %q: unexpected status %q", c.Job, status)
	}
	res.PrevSpec = deref(prevSpec)
	if res.Status == driver.ClaimTaken && row.tick != nil {
		mine, held := row.holds()
		res.Last = driver.ReportedRun(row.record(c.Job), mine, held, true) // the latest claim
	}
	return res, nil
}

// EndRun implements [driver.JobStore]: one statement (the end_run
// function).
func (s *Store) EndRun(ctx context.Context, e driver.RunEnd) error {
	if err := driver.CheckEnd(e); err != nil {
		return invalid(err)
	}
	if err := s.checkJob(ctx, e.Job); err != nil {
		return err
	}
	var updated bool
	err := s.pool.QueryRow(ctx, s.sql.endRun, e.Job, e.Tick.UnixMilli(), int32(e.Attempt), e.Client, e.Outcome.String(),
		e.Fence, e.Error).Scan(&updated)
	if err != nil {
		return fmt.Errorf("pgstore: end run of job %q: %w", e.Job, explain(err))
	}
	return nil
}

// AddRuns implements [driver.JobStore]: one statement (the add_runs
// function, which puts each record below the records of later ticks), the
// records' fields as arrays.
func (s *Store) AddRuns(ctx context.Context, job string, runs []driver.RunRecord, keep int) error {
	if err := driver.CheckRuns(job, runs, keep); err != nil {
		return invalid(err)
	}
	if err := s.checkJob(ctx, job); err != nil {
		return err
	}
	if len(runs) == 0 {
		return nil
	}
	var (
		ticks, starteds, endeds, fences []int64
		attempts, pids                  []int32
		hosts, clients, claims          []string
		outcomes, errs                  []string
	)
	for _, r := range runs {
		ticks, starteds, endeds, fences = append(ticks, r.Tick.UnixMilli()), append(starteds, driver.MilliOrZero(r.Started)), append(endeds, driver.MilliOrZero(r.Ended)), append(fences, r.Fence)
		attempts, pids = append(attempts, int32(r.Attempt)), append(pids, int32(r.PID))
		hosts, clients, claims = append(hosts, r.Host), append(clients, r.Client), append(claims, r.Claim)
		outcomes, errs = append(outcomes, r.Outcome.String()), append(errs, r.Error)
	}
	if _, err := s.pool.Exec(ctx, s.sql.addRuns, job, int32(driver.KeepRuns(keep)), ticks, attempts, hosts, pids, clients, claims, starteds, endeds,
		outcomes, fences, errs); err != nil {
		return fmt.Errorf("pgstore: add runs of job %q: %w", job, explain(err))
	}
	return nil
}

// Jobs implements [driver.JobStore]: one statement, the pattern turned into
// a LIKE pattern for the server and checked again with driver.Glob.
func (s *Store) Jobs(ctx context.Context, pattern string) ([]string, error) {
	return s.matching(ctx, "jobs", s.sql.jobList, pattern)
}

// History implements [driver.JobStore]: one statement (the job_history
// function), which reads the job's rows and the lock's holds in one
// snapshot.
func (s *Store) History(ctx context.Context, job string, n int) (driver.JobState, error) {
	if err := s.checkJob(ctx, job); err != nil {
		return driver.JobState{}, err
	}
	rows, err := s.pool.Query(ctx, s.sql.jobHistory, job, int32(min(max(n, 0), driver.MaxKeepRuns)))
	if err != nil {
		return driver.JobState{}, fmt.Errorf("pgstore: history of job %q: %w", job, explain(err))
	}
	defer rows.Close()
	st := driver.JobState{Job: job}
	var holds [][2]bool // of each record, as row.holds says
	for rows.Next() {
		var (
			now, tick int64
			attempt   int32
			row       runRow
		)
		if err := rows.Scan(append([]any{&now, &tick, &attempt, &st.Spec}, row.dest()...)...); err != nil {
			return driver.JobState{}, fmt.Errorf("pgstore: history of job %q: %w", job, err)
		}
		st.Now, st.Tick, st.Attempt = time.UnixMilli(now), driver.UnixMilliOrZero(tick), int(attempt)
		if row.tick != nil {
			st.Runs = append(st.Runs, row.record(job))
			mine, held := row.holds()
			holds = append(holds, [2]bool{mine, held})
		}
	}
	if err := rows.Err(); err != nil {
		return driver.JobState{}, fmt.Errorf("pgstore: history of job %q: %w", job, explain(err))
	}
	driver.ReportedRuns(st.Runs, func(i int) (mine, held bool) { return holds[i][0], holds[i][1] })
	return st, nil
}
