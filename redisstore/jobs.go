package redisstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/redis/go-redis/v9"
)

// A scheduled job's keys (driver.JobStore). The job named N, whose run lock
// is the key K = Options.KeyPrefix+N, keeps beside it, in K's hash slot:
//
//   - leash_job:{K}, a hash: job (N), tick (its latest claim, Unix ms),
//     attempt, outcome (of that claim's run: running, ok, failed, …),
//     client (the claimer's Client id) and spec (the job's schedule);
//   - leash_job_runs:{K}, a list of the job's last runs, newest first, each a
//     JSON object: tick, attempt, host, pid, client, started and ended (Unix
//     ms by the server's clock, ended 0 while running), outcome, fence (a
//     decimal string) and error.
//
// Neither key expires. The scripts refuse, with a NotALockError saying what
// they found, a job whose keys hold anything else, and leave them alone.
const (
	jobPrefix     = "leash_job"
	jobRunsPrefix = "leash_job_runs"
)

func jobKey(k string) string     { return prefixName(jobPrefix, k) }
func jobRunsKey(k string) string { return prefixName(jobRunsPrefix, k) }

var (
	//go:embed lua/claim_tick.lua
	claimTickLua string
	//go:embed lua/end_run.lua
	endRunLua string
	//go:embed lua/add_runs.lua
	addRunsLua string
	//go:embed lua/job_history.lua
	jobHistoryLua string

	claimTickScript  = withLib(claimTickLua)
	endRunScript     = withLib(endRunLua)
	addRunsScript    = withLib(addRunsLua)
	jobHistoryScript = withLib(jobHistoryLua)
)

var _ driver.JobStore = (*Store)(nil)

// runJSON is a driver.RunRecord as the runs list keeps it.
type runJSON struct {
	Tick    int64  `json:"tick"`
	Attempt int    `json:"attempt"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Client  string `json:"client"`
	Claim   string `json:"claim,omitempty"`
	Started int64  `json:"started"`
	Ended   int64  `json:"ended"`
	Outcome string `json:"outcome"`
	Fence   string `json:"fence"`
	Error   string `json:"error"`
}

func toJSON(r driver.RunRecord) runJSON {
	j := runJSON{Tick: r.Tick.UnixMilli(), Attempt: r.Attempt, Host: r.Host, PID: r.PID, Client: r.Client, Claim: r.Claim,
		Fence: strconv.FormatInt(r.Fence, 10), Error: r.Error}
	if !r.Started.IsZero() {
		j.Started = r.Started.UnixMilli()
	}
	if !r.Ended.IsZero() {
		j.Ended = r.Ended.UnixMilli()
	}
	if r.Outcome != 0 {
		j.Outcome = r.Outcome.String()
	}
	return j
}

func (j runJSON) record(job string) driver.RunRecord {
	r := driver.RunRecord{Job: job, Tick: time.UnixMilli(j.Tick), Attempt: j.Attempt, Host: j.Host, PID: j.PID,
		Client: j.Client, Claim: j.Claim, Error: j.Error}
	r.Started, r.Ended = unixMilli(strconv.FormatInt(j.Started, 10)), unixMilli(strconv.FormatInt(j.Ended, 10))
	r.Outcome, _ = driver.ParseOutcome(j.Outcome)
	r.Fence, _ = strconv.ParseInt(j.Fence, 10, 64)
	return r
}

// parseRun decodes one record of the runs list.
func parseRun(job string, v any) (driver.RunRecord, error) {
	s, ok := v.(string)
	if !ok {
		return driver.RunRecord{}, fmt.Errorf("unexpected run record %#v", v)
	}
	var j runJSON
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return driver.RunRecord{}, fmt.Errorf("run record %q: %w", s, err)
	}
	return j.record(job), nil
}

// jobKeys are the keys of job name's scripts: its state, its runs, its lock.
func (s *Store) jobKeys(name string) []string {
	k := s.key(name)
	return []string{jobKey(k), jobRunsKey(k), k}
}

// checkJob checks a job's name as the core checks a lock's.
func (s *Store) checkJob(name string) error {
	if s.err != nil {
		return s.err
	}
	if err := leash.ValidateName(name); err != nil {
		return err
	}
	if err := s.CheckName(name); err != nil {
		return fmt.Errorf("%w: redisstore: job %q %w", leash.ErrInvalidName, name, err)
	}
	return nil
}

func keepRuns(n int) int {
	if n <= 0 {
		return driver.DefaultKeepRuns
	}
	return min(n, driver.MaxKeepRuns)
}

// ClaimTick implements [driver.JobStore] with one script (claim_tick.lua),
// sent through the Store's pipeliner as acquires are: when many jobs are due
// at once, their claims share round trips.
func (s *Store) ClaimTick(ctx context.Context, c driver.TickClaim) (driver.TickResult, error) {
	if err := s.checkJob(c.Job); err != nil {
		return driver.TickResult{}, err
	}
	if err := driver.CheckClaim(c); err != nil {
		return driver.TickResult{}, fmt.Errorf("%w: redisstore: %w", leash.ErrInvalidArgument, err)
	}
	rec, err := json.Marshal(toJSON(c.Run))
	if err != nil {
		return driver.TickResult{}, err
	}
	var until int64
	if !c.Until.IsZero() {
		until = max(c.Until.UnixMilli(), 1)
	}
	v, err := s.pipe.run(ctx, claimTickScript, s.jobKeys(c.Job), c.Tick.UnixMilli(), c.Attempt, c.Tolerance.Milliseconds(),
		until, rec, keepRuns(c.Keep), c.Job, c.Spec)
	if err != nil {
		return driver.TickResult{}, fmt.Errorf("redisstore: claim tick of job %q: %w", c.Job, err)
	}
	if e := notALock(c.Job, v); e != nil {
		return driver.TickResult{}, fmt.Errorf("redisstore: claim tick: %w", e)
	}
	res, err := parseClaim(c.Job, v)
	if err != nil {
		return driver.TickResult{}, fmt.Errorf("redisstore: claim tick of job %q: %w", c.Job, err)
	}
	return res, nil
}

// parseClaim decodes claim_tick.lua's reply.
func parseClaim(job string, v any) (driver.TickResult, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 2 {
		return driver.TickResult{}, fmt.Errorf("unexpected claim reply %#v", v)
	}
	status, _ := a[0].(string)
	ints := func(i int) int64 {
		if i < len(a) {
			n, _ := a[i].(int64)
			return n
		}
		return 0
	}
	res := driver.TickResult{Now: time.UnixMilli(ints(1))}
	switch status {
	case "granted":
		res.Status = driver.ClaimGranted
		if p := ints(2); p > 0 {
			res.Prev = time.UnixMilli(p)
		}
		if len(a) > 3 {
			res.PrevSpec, _ = a[3].(string)
		}
	case "early":
		res.Status, res.Wait = driver.ClaimEarly, time.Duration(ints(2))*time.Millisecond
	case "late":
		res.Status = driver.ClaimLate
	case "taken":
		res.Status = driver.ClaimTaken
		if len(a) != 6 {
			return driver.TickResult{}, fmt.Errorf("unexpected claim reply %#v", v)
		}
		res.Last = driver.RunRecord{Job: job, Attempt: int(ints(3))}
		if t := ints(2); t > 0 {
			res.Last.Tick = time.UnixMilli(t)
		}
		if js, _ := a[4].(string); js != "" {
			rec, err := parseRun(job, js)
			if err != nil {
				return driver.TickResult{}, err
			}
			res.Last = driver.ReportedRun(rec, ints(5) == 2, ints(5) > 0, true) // the latest claim: waiting, if not holding
		}
	default:
		return driver.TickResult{}, fmt.Errorf("unexpected claim reply %#v", v)
	}
	return res, nil
}

// EndRun implements [driver.JobStore] with one script (end_run.lua),
// through the pipeliner, as ClaimTick.
func (s *Store) EndRun(ctx context.Context, e driver.RunEnd) error {
	if err := s.checkJob(e.Job); err != nil {
		return err
	}
	if err := driver.CheckEnd(e); err != nil {
		return fmt.Errorf("%w: redisstore: %w", leash.ErrInvalidArgument, err)
	}
	v, err := s.pipe.run(ctx, endRunScript, s.jobKeys(e.Job)[:2], e.Tick.UnixMilli(), e.Attempt, e.Client,
		e.Outcome.String(), strconv.FormatInt(e.Fence, 10), e.Error)
	if err != nil {
		return fmt.Errorf("redisstore: end run of job %q: %w", e.Job, err)
	}
	if ne := notALock(e.Job, v); ne != nil {
		return fmt.Errorf("redisstore: end run: %w", ne)
	}
	return nil
}

// AddRuns implements [driver.JobStore] with one script (add_runs.lua).
func (s *Store) AddRuns(ctx context.Context, job string, runs []driver.RunRecord, keep int) error {
	if err := s.checkJob(job); err != nil {
		return err
	}
	if err := driver.CheckRuns(job, runs, keep); err != nil {
		return fmt.Errorf("%w: redisstore: %w", leash.ErrInvalidArgument, err)
	}
	if len(runs) == 0 {
		return nil
	}
	args := []any{keepRuns(keep), job}
	for _, r := range runs {
		b, err := json.Marshal(toJSON(r))
		if err != nil {
			return err
		}
		args = append(args, b)
	}
	v, err := addRunsScript.Run(ctx, s.rdb, s.jobKeys(job)[:2], args...).Result()
	if err != nil {
		return fmt.Errorf("redisstore: add runs of job %q: %w", job, err)
	}
	if ne := notALock(job, v); ne != nil {
		return fmt.Errorf("redisstore: add runs: %w", ne)
	}
	return nil
}

// History implements [driver.JobStore] with one read-only script
// (job_history.lua).
func (s *Store) History(ctx context.Context, job string, n int) (driver.JobState, error) {
	if err := s.checkJob(job); err != nil {
		return driver.JobState{}, err
	}
	v, err := jobHistoryScript.Run(ctx, s.rdb, s.jobKeys(job), max(n, 0)).Result()
	if err != nil {
		return driver.JobState{}, fmt.Errorf("redisstore: history of job %q: %w", job, err)
	}
	if ne := notALock(job, v); ne != nil {
		return driver.JobState{}, fmt.Errorf("redisstore: history: %w", ne)
	}
	st, err := parseHistory(job, v)
	if err != nil {
		return driver.JobState{}, fmt.Errorf("redisstore: history of job %q: %w", job, err)
	}
	return st, nil
}

// parseHistory decodes job_history.lua's reply.
func parseHistory(job string, v any) (driver.JobState, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 6 {
		return driver.JobState{}, fmt.Errorf("unexpected history reply %#v", v)
	}
	tick, _ := a[0].(int64)
	attempt, _ := a[1].(int64)
	now, _ := a[2].(int64)
	recs, _ := a[3].([]any)
	held, _ := a[4].([]any)
	if len(recs) != len(held) {
		return driver.JobState{}, fmt.Errorf("unexpected history reply %#v", v)
	}
	spec, _ := a[5].(string)
	st := driver.JobState{Job: job, Attempt: int(attempt), Now: time.UnixMilli(now), Spec: spec}
	if tick > 0 {
		st.Tick = time.UnixMilli(tick)
	}
	for _, r := range recs {
		rec, err := parseRun(job, r)
		if err != nil {
			return driver.JobState{}, err
		}
		st.Runs = append(st.Runs, rec)
	}
	driver.ReportedRuns(st.Runs, func(i int) (mine, anyone bool) {
		h, _ := held[i].(int64)
		return h == 2, h > 0
	})
	return st, nil
}

// Jobs implements [driver.JobStore]: it walks the keyspace with SCAN (every
// master, on Cluster) for job state hashes, reads each one's job name, and
// keeps those under Options.KeyPrefix whose names match pattern.
func (s *Store) Jobs(ctx context.Context, pattern string) ([]string, error) {
	if s.err != nil {
		return nil, s.err
	}
	re, err := driver.Glob(pattern)
	if err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		names []string
	)
	walk := func(ctx context.Context, rdb redis.UniversalClient) error {
		var cursor uint64
		for {
			keys, next, err := rdb.ScanType(ctx, cursor, jobPrefix+":*", listScanCount, "hash").Result()
			if err != nil {
				return err
			}
			found, err := s.jobNames(ctx, rdb, keys)
			if err != nil {
				return err
			}
			mu.Lock()
			for _, n := range found {
				if re.MatchString(n) {
					names = append(names, n)
				}
			}
			mu.Unlock()
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	if c, ok := s.rdb.(*redis.ClusterClient); ok {
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return walk(ctx, node) })
	} else {
		err = walk(ctx, s.rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: jobs %q: %w", pattern, err)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// jobNames returns the names of the jobs whose state hashes are among keys:
// those whose job field names a job whose state key it is (which also
// leaves out other KeyPrefixes' jobs and hashes that only look like one).
func (s *Store) jobNames(ctx context.Context, rdb redis.UniversalClient, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HGet(ctx, k, "job")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return nil, err
	}
	var names []string
	for i, c := range cmds {
		n, err := c.Result()
		if err != nil || !strings.HasPrefix(keys[i], jobPrefix+":") || jobKey(s.key(n)) != keys[i] {
			continue
		}
		names = append(names, n)
	}
	return names, nil
}
