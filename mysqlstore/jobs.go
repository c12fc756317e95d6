package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

var _ driver.JobStore = (*Store)(nil)

// A scheduled job's records (driver.JobStore) are rows of two tables of
// their own, <table>_jobs (a job's latest claim) and <table>_runs (its last
// records). Each operation is one CALL of a procedure of schema.sql, which
// locks the job's row, judges by UTC_TIMESTAMP(6) read once at its start,
// and only reads the lock tables (whether a run's claimer holds the job's
// lock); History is one consistent read.

// invalid wraps a driver check's error for a caller to match
// leash.ErrInvalidArgument.
func invalid(err error) error {
	return fmt.Errorf("%w: mysqlstore: %w", leash.ErrInvalidArgument, err)
}

// runRow is a record as the procedures return it (the r_* columns), NULL
// when there is none.
type runRow struct {
	tick, started, ended, fence sql.NullInt64
	attempt, pid, held          sql.NullInt64
	host, client, claim         []byte
	outcome, err                []byte
}

func (r *runRow) dest() []any {
	return []any{&r.tick, &r.attempt, &r.host, &r.pid, &r.client, &r.claim, &r.started, &r.ended, &r.outcome, &r.fence, &r.err, &r.held}
}

// record is the row's record of job, as the table keeps it; History and
// ClaimTick report it with driver.ReportedRuns and driver.ReportedRun
// (see holds).
func (r *runRow) record(job string) driver.RunRecord {
	rec := driver.RunRecord{Job: job, Tick: driver.UnixMilliOrZero(r.tick.Int64), Attempt: int(r.attempt.Int64), Host: string(r.host),
		PID: int(r.pid.Int64), Client: string(r.client), Claim: string(r.claim), Started: driver.UnixMilliOrZero(r.started.Int64), Ended: driver.UnixMilliOrZero(r.ended.Int64),
		Fence: r.fence.Int64, Error: string(r.err)}
	rec.Outcome, _ = driver.ParseOutcome(string(r.outcome))
	return rec
}

// holds is what the row says of a running record's claimer (2: it holds a
// lock or permit on the job's name; 1: someone else does; 0: no one does):
// whether it holds one (mine), and whether anyone does.
func (r *runRow) holds() (mine, held bool) {
	h := r.held.Int64
	return h == 2, h > 0
}

// checkJob checks a job's name as the core checks a lock's, and that the
// table holds it.
func (s *Store) checkJob(name string) error {
	if s.err != nil {
		return s.err
	}
	if err := leash.ValidateName(name); err != nil {
		return err
	}
	if err := s.CheckName(name); err != nil {
		return fmt.Errorf("%w: mysqlstore: job %q %w", leash.ErrInvalidName, name, err)
	}
	return nil
}

// checkRun refuses, before any round trip, a record's fields longer than
// the runs table holds.
func checkRun(job, host, client, claim string) error {
	if len(host) > MaxOwnerLen || len(client) > MaxOwnerLen || len(claim) > MaxOwnerLen {
		return invalid(fmt.Errorf("job %q: host of %d bytes, client of %d, claim id of %d: want at most %d each", job, len(host), len(client), len(claim), MaxOwnerLen))
	}
	return nil
}

// ClaimTick implements [driver.JobStore]: one CALL of <table>_claim_tick.
func (s *Store) ClaimTick(ctx context.Context, c driver.TickClaim) (driver.TickResult, error) {
	if err := s.checkJob(c.Job); err != nil {
		return driver.TickResult{}, err
	}
	if err := driver.CheckClaim(c); err != nil {
		return driver.TickResult{}, invalid(err)
	}
	if err := checkRun(c.Job, c.Run.Host, c.Run.Client, c.Run.Claim); err != nil {
		return driver.TickResult{}, err
	}
	st, err := s.ready(ctx)
	if err != nil {
		return driver.TickResult{}, err
	}
	var (
		status   string
		now, n   int64
		prevSpec []byte
		row      runRow
	)
	err = st.claimTick.QueryRowContext(ctx, []byte(c.Job), c.Tick.UnixMilli(), c.Attempt, c.Tolerance.Milliseconds(), driver.UntilMilli(c.Until),
		[]byte(c.Run.Host), c.Run.PID, []byte(c.Run.Client), []byte(c.Run.Claim), driver.KeepRuns(c.Keep), []byte(c.Spec)).Scan(append([]any{&status, &now, &n, &prevSpec}, row.dest()...)...)
	if err != nil {
		return driver.TickResult{}, fmt.Errorf("mysqlstore: claim tick of job %q: %w", c.Job, err)
	}
	res, ok := driver.ClaimVerdict(status, now, n)
	if !ok {
		return driver.TickResult{}, fmt.Errorf("mysqlstore: claim tick of job %q: unexpected status %q", c.Job, status)
	}
	res.PrevSpec = string(prevSpec)
	if res.Status == driver.ClaimTaken && row.tick.Valid {
		mine, held := row.holds()
		res.Last = driver.ReportedRun(row.record(c.Job), mine, held, true) // the latest claim
	}
	return res, nil
}

// EndRun implements [driver.JobStore]: one CALL of <table>_end_run.
func (s *Store) EndRun(ctx context.Context, e driver.RunEnd) error {
	if err := s.checkJob(e.Job); err != nil {
		return err
	}
	if err := driver.CheckEnd(e); err != nil {
		return invalid(err)
	}
	if err := checkRun(e.Job, "", e.Client, ""); err != nil {
		return err
	}
	st, err := s.ready(ctx)
	if err != nil {
		return err
	}
	var updated bool
	if err := st.endRun.QueryRowContext(ctx, []byte(e.Job), e.Tick.UnixMilli(), e.Attempt, []byte(e.Client), e.Outcome.String(),
		e.Fence, []byte(e.Error)).Scan(&updated); err != nil {
		return fmt.Errorf("mysqlstore: end run of job %q: %w", e.Job, err)
	}
	return nil
}

// AddRuns implements [driver.JobStore]: one CALL of <table>_add_runs (which
// puts each record below the records of later ticks), the records a JSON
// array (texts in hex, so that any bytes pass).
func (s *Store) AddRuns(ctx context.Context, job string, runs []driver.RunRecord, keep int) error {
	if err := s.checkJob(job); err != nil {
		return err
	}
	if err := driver.CheckRuns(job, runs, keep); err != nil {
		return invalid(err)
	}
	for _, r := range runs {
		if err := checkRun(job, r.Host, r.Client, r.Claim); err != nil {
			return err
		}
	}
	if len(runs) == 0 {
		return nil
	}
	st, err := s.ready(ctx)
	if err != nil {
		return err
	}
	recs := make([][]any, len(runs))
	for i, r := range runs {
		recs[i] = []any{r.Tick.UnixMilli(), r.Attempt, hex.EncodeToString([]byte(r.Host)), r.PID, hex.EncodeToString([]byte(r.Client)),
			driver.MilliOrZero(r.Started), driver.MilliOrZero(r.Ended), r.Outcome.String(), r.Fence, hex.EncodeToString([]byte(r.Error)),
			hex.EncodeToString([]byte(r.Claim))}
	}
	doc, err := json.Marshal(recs)
	if err != nil {
		return fmt.Errorf("mysqlstore: add runs of job %q: %w", job, err)
	}
	if _, err := st.addRuns.ExecContext(ctx, []byte(job), driver.KeepRuns(keep), doc); err != nil {
		return fmt.Errorf("mysqlstore: add runs of job %q: %w", job, err)
	}
	return nil
}

// Jobs implements [driver.JobStore]: one consistent read, the pattern
// turned into a LIKE pattern for the server and checked again with
// driver.Glob.
func (s *Store) Jobs(ctx context.Context, pattern string) ([]string, error) {
	return s.matching(ctx, "jobs", func(st *statements) *sql.Stmt { return st.jobList }, pattern)
}

// History implements [driver.JobStore]: one CALL of <table>_job_history,
// whose one SELECT reads the job's rows and its lock's holders in one
// consistent snapshot.
func (s *Store) History(ctx context.Context, job string, n int) (driver.JobState, error) {
	if err := s.checkJob(job); err != nil {
		return driver.JobState{}, err
	}
	st, err := s.ready(ctx)
	if err != nil {
		return driver.JobState{}, err
	}
	rows, err := st.jobHistory.QueryContext(ctx, []byte(job), min(max(n, 0), driver.MaxKeepRuns))
	if err != nil {
		return driver.JobState{}, fmt.Errorf("mysqlstore: history of job %q: %w", job, err)
	}
	defer rows.Close()
	js := driver.JobState{Job: job}
	var holds [][2]bool // of each record, as row.holds says
	for rows.Next() {
		var (
			now, tick int64
			attempt   int
			spec      []byte
			row       runRow
		)
		if err := rows.Scan(append([]any{&now, &tick, &attempt, &spec}, row.dest()...)...); err != nil {
			return driver.JobState{}, fmt.Errorf("mysqlstore: history of job %q: %w", job, err)
		}
		js.Now, js.Tick, js.Attempt, js.Spec = time.UnixMilli(now), driver.UnixMilliOrZero(tick), attempt, string(spec)
		if row.tick.Valid {
			js.Runs = append(js.Runs, row.record(job))
			mine, held := row.holds()
			holds = append(holds, [2]bool{mine, held})
		}
	}
	if err := rows.Err(); err != nil {
		return driver.JobState{}, fmt.Errorf("mysqlstore: history of job %q: %w", job, err)
	}
	driver.ReportedRuns(js.Runs, func(i int) (mine, held bool) { return holds[i][0], holds[i][1] })
	return js, nil
}
