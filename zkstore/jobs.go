package zkstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// A scheduled job's records (driver.JobStore) live under Root/jobs (data
// "leash jobs v1"), apart from the locks:
//
//	/leash/jobs/<job>             persistent; data "leash job v1 " and the
//	                              job's latest claim, JSON
//	/leash/jobs/<job>/run-<seq>   persistent; data "leash run v1 " and one
//	                              run record, JSON; seq 19 digits, newest
//	                              highest
//
// Every write is one multi-operation conditioned on the job node's data
// version (a compare-and-set: of two racing claims one wins, the other
// reads again and is told the tick is taken), which every change of the
// job's runs bumps. Times are the server's clock, read by a write to
// Root/clock (its modification time, see now) before the decision: an
// early claim is judged by a time no later than the grant's, so no tick is
// granted early; a late one by a time up to one round trip before it.
// Whether a run's claimer holds the job's lock is whether a hold node of
// its Client exists in the lock's directory: no time is read for it.
const (
	jobDataPrefix = "leash job v1 "
	runDataPrefix = "leash run v1 "
	runPrefix     = "run-"
)

var jobsMarker = []byte("leash jobs v1")

var _ driver.JobStore = (*Store)(nil)

// jobState is a job node's data.
type jobState struct {
	Tick    int64  `json:"tick"`
	Attempt int    `json:"attempt"`
	Outcome string `json:"outcome"`
	Client  string `json:"client"`
	Spec    string `json:"spec"`
	Seq     int64  `json:"seq"`
}

// runJSON is a run node's data.
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
	Fence   int64  `json:"fence"`
	Error   string `json:"error"`
}

func toRun(r driver.RunRecord) runJSON {
	return runJSON{Tick: r.Tick.UnixMilli(), Attempt: r.Attempt, Host: r.Host, PID: r.PID, Client: r.Client, Claim: r.Claim,
		Started: driver.MilliOrZero(r.Started), Ended: driver.MilliOrZero(r.Ended), Outcome: r.Outcome.String(), Fence: r.Fence, Error: r.Error}
}

func (j runJSON) record(job string) driver.RunRecord {
	r := driver.RunRecord{Job: job, Tick: time.UnixMilli(j.Tick), Attempt: j.Attempt, Host: j.Host, PID: j.PID, Client: j.Client, Claim: j.Claim,
		Started: driver.UnixMilliOrZero(j.Started), Ended: driver.UnixMilliOrZero(j.Ended), Fence: j.Fence, Error: j.Error}
	r.Outcome, _ = driver.ParseOutcome(j.Outcome)
	return r
}

func jobData(st jobState) []byte {
	b, _ := json.Marshal(st) // plain fields: cannot fail
	return append([]byte(jobDataPrefix), b...)
}

func runData(r runJSON) []byte {
	b, _ := json.Marshal(r) // plain fields: cannot fail
	return append([]byte(runDataPrefix), b...)
}

// jobPath is job's node; runPath the node of its record seq.
func (s *Store) jobPath(job string) string { return s.root + "/jobs/" + escapeSegment(job) }

func runName(seq int64) string { return fmt.Sprintf("%s%019d", runPrefix, seq) }

// jobView is a job node as one read saw it.
type jobView struct {
	exists  bool
	version int32
	czxid   int64
	state   jobState
	seqs    []int64 // its records, oldest first
}

// ensureJobs creates Root/jobs when it is missing and checks that it is
// leash's.
func (s *Store) ensureJobs(ctx context.Context) error {
	if err := s.ensureRoot(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	done := s.jobsDone
	s.mu.Unlock()
	if done {
		return nil
	}
	dir := s.root + "/jobs"
	if err := s.createIfMissing(ctx, dir, jobsMarker); err != nil {
		return err
	}
	data, _, err := getData(ctx, s, dir)
	if err != nil {
		return fmt.Errorf("zkstore: read %s: %w", dir, err)
	}
	if string(data) != string(jobsMarker) {
		return fmt.Errorf("zkstore: %s holds %s, not leash's %q: choose another Options.Root", dir, describeData(data), jobsMarker)
	}
	s.mu.Lock()
	s.jobsDone = true
	s.mu.Unlock()
	return nil
}

// readJob reads job's node and its children's names, consistently (the
// children's read reports the data version the data's read saw); a node
// or child that is not leash's is refused with a NotALockError.
func (s *Store) readJob(ctx context.Context, job string) (jobView, error) {
	path := s.jobPath(job)
	for range maxAttempts {
		data, st, err := getData(ctx, s, path)
		if errors.Is(err, zk.ErrNoNode) {
			return jobView{}, nil
		}
		if err != nil {
			return jobView{}, wrapErr("read job", job, err)
		}
		var v jobView
		body, ok := strings.CutPrefix(string(data), jobDataPrefix)
		if !ok || json.Unmarshal([]byte(body), &v.state) != nil {
			return jobView{}, &driver.NotALockError{Name: job, Found: fmt.Sprintf("znode %s with %s, not a leash job", path, describeData(data))}
		}
		type got struct {
			children []string
			st       *zk.Stat
		}
		g, err := call(ctx, func() (got, error) { c, st, err := s.conn.Children(path); return got{c, st}, err })
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return jobView{}, wrapErr("read job", job, err)
		}
		if g.st.Version != st.Version || g.st.Czxid != st.Czxid {
			continue // changed between the two reads
		}
		for _, c := range g.children {
			seq, err := strconv.ParseInt(strings.TrimPrefix(c, runPrefix), 10, 64)
			if err != nil || runName(seq) != c {
				return jobView{}, &driver.NotALockError{Name: job, Found: fmt.Sprintf("leash job znode %s with a child %q that is not a run record", path, c)}
			}
			v.seqs = append(v.seqs, seq)
		}
		slices.Sort(v.seqs)
		v.exists, v.version, v.czxid = true, st.Version, st.Czxid
		return v, nil
	}
	return jobView{}, fmt.Errorf("zkstore: read job %q: it changed under every one of %d reads", job, maxAttempts)
}

// readRun reads record seq of job; ok is false when it is gone.
func (s *Store) readRun(ctx context.Context, job string, seq int64) (r runJSON, version int32, ok bool, err error) {
	path := s.jobPath(job) + "/" + runName(seq)
	data, st, err := getData(ctx, s, path)
	if errors.Is(err, zk.ErrNoNode) {
		return runJSON{}, 0, false, nil
	}
	if err != nil {
		return runJSON{}, 0, false, wrapErr("read a run of job", job, err)
	}
	body, found := strings.CutPrefix(string(data), runDataPrefix)
	if !found || json.Unmarshal([]byte(body), &r) != nil {
		return runJSON{}, 0, false, &driver.NotALockError{Name: job, Found: fmt.Sprintf("znode %s with %s, not a leash run record", path, describeData(data))}
	}
	return r, st.Version, true, nil
}

// findRun returns the newest record of tick and attempt, reading from the
// newest; seq is -1 when none is kept.
func (s *Store) findRun(ctx context.Context, job string, v jobView, tick int64, attempt int) (r runJSON, seq int64, version int32, err error) {
	for i := len(v.seqs) - 1; i >= 0; i-- {
		r, version, ok, err := s.readRun(ctx, job, v.seqs[i])
		if err != nil {
			return runJSON{}, -1, 0, err
		}
		if ok && r.Tick == tick && r.Attempt == attempt {
			return r, v.seqs[i], version, nil
		}
	}
	return runJSON{}, -1, 0, nil
}

// jobHolders reports whether client holds a lock or permit on the job's
// name (a hold node of one of its owners exists), and whether anyone does.
func (s *Store) jobHolders(ctx context.Context, job, client string) (mine, held bool, err error) {
	d, err := s.readDir(ctx, job)
	if err != nil {
		var nl *driver.NotALockError
		if errors.As(err, &nl) {
			return false, false, nil // not a lock: no one holds it
		}
		return false, false, err
	}
	for _, n := range d.nodes {
		if n.kind.hold() {
			held = true
			if driver.OwnerClient(n.owner) == client {
				mine = true
			}
		}
	}
	return mine, held, nil
}

// trim returns the deletes that keep the newest keep of seqs, with next
// added.
func (s *Store) trim(job string, seqs []int64, added, keep int) []any {
	var ops []any
	for i := 0; i < len(seqs)+added-keep && i < len(seqs); i++ {
		ops = append(ops, &zk.DeleteRequest{Path: s.jobPath(job) + "/" + runName(seqs[i]), Version: -1})
	}
	return ops
}

// writeJob is the operation that writes the job's node: a create when v
// saw none, else a set at the version v read.
func (s *Store) writeJob(job string, v jobView, st jobState) any {
	if !v.exists {
		return &zk.CreateRequest{Path: s.jobPath(job), Data: jobData(st), Acl: s.acl}
	}
	return &zk.SetDataRequest{Path: s.jobPath(job), Data: jobData(st), Version: v.version}
}

func (s *Store) checkJob(ctx context.Context, job string) error {
	if err := leash.ValidateName(job); err != nil {
		return err
	}
	return s.ensureJobs(ctx)
}

// multi runs ops on the Store's session.
func (s *Store) multi(ctx context.Context, ops []any) error {
	_, err := call(ctx, func() ([]zk.MultiResponse, error) { return s.conn.Multi(ops...) })
	return err
}

// ClaimTick implements [driver.JobStore]: it reads the server's clock (a
// write to Root/clock), then the job, decides, and grants with one
// multi-operation conditioned on the job node's version; a claim that
// loses a race starts over.
func (s *Store) ClaimTick(ctx context.Context, c driver.TickClaim) (driver.TickResult, error) {
	if err := driver.CheckClaim(c); err != nil {
		return driver.TickResult{}, fmt.Errorf("%w: zkstore: %w", leash.ErrInvalidArgument, err)
	}
	if err := s.checkJob(ctx, c.Job); err != nil {
		return driver.TickResult{}, err
	}
	tick := c.Tick.UnixMilli()
	for range maxAttempts {
		now, err := s.now(ctx)
		if err != nil {
			return driver.TickResult{}, err
		}
		v, err := s.readJob(ctx, c.Job)
		if err != nil {
			return driver.TickResult{}, err
		}
		j := v.state
		res := driver.TickResult{Now: time.UnixMilli(now)}
		switch {
		case j.Attempt > 0 && (j.Tick > tick || j.Tick == tick && (c.Attempt != j.Attempt+1 || (j.Outcome != "failed" && j.Outcome != "cancelled")) ||
			tick > j.Tick && c.Attempt != 1):
			res.Status = driver.ClaimTaken
			res.Last = driver.RunRecord{Job: c.Job, Tick: time.UnixMilli(j.Tick), Attempt: j.Attempt, Client: j.Client}
			res.Last.Outcome, _ = driver.ParseOutcome(j.Outcome)
			r, seq, _, err := s.findRun(ctx, c.Job, v, j.Tick, j.Attempt)
			if err != nil {
				return driver.TickResult{}, err
			}
			if seq >= 0 {
				mine, held, err := s.jobHolders(ctx, c.Job, r.Client)
				if err != nil {
					return driver.TickResult{}, err
				}
				res.Last = driver.ReportedRun(r.record(c.Job), mine, held, true)
			}
			return res, nil
		case j.Attempt == 0 && c.Attempt != 1:
			res.Status = driver.ClaimTaken
			return res, nil
		case tick-now > c.Tolerance.Milliseconds():
			res.Status, res.Wait = driver.ClaimEarly, time.Duration(tick-now)*time.Millisecond
			return res, nil
		case driver.UntilMilli(c.Until) > 0 && now > driver.UntilMilli(c.Until):
			res.Status = driver.ClaimLate
			return res, nil
		}
		res.Status, res.PrevSpec = driver.ClaimGranted, j.Spec
		if j.Attempt > 0 {
			res.Prev = time.UnixMilli(j.Tick)
		}
		rec := toRun(c.Run)
		rec.Tick, rec.Attempt, rec.Started, rec.Ended, rec.Outcome, rec.Fence, rec.Error = tick, c.Attempt, now, 0, driver.OutcomeRunning.String(), 0, ""
		next := j
		next.Tick, next.Attempt, next.Outcome, next.Client, next.Seq = tick, c.Attempt, rec.Outcome, c.Run.Client, j.Seq+1
		if c.Spec != "" {
			next.Spec = c.Spec
		}
		ops := []any{s.writeJob(c.Job, v, next),
			&zk.CreateRequest{Path: s.jobPath(c.Job) + "/" + runName(next.Seq), Data: runData(rec), Acl: s.acl}}
		ops = append(ops, s.trim(c.Job, v.seqs, 1, driver.KeepRuns(c.Keep))...)
		if err := s.multi(ctx, ops); changed(err) {
			continue
		} else if err != nil {
			return driver.TickResult{}, wrapErr("claim a tick of job", c.Job, err)
		}
		return res, nil
	}
	return driver.TickResult{}, fmt.Errorf("zkstore: claim a tick of job %q: it changed under every one of %d attempts", c.Job, maxAttempts)
}

// EndRun implements [driver.JobStore]: the run's record and, when the run
// is the latest claim, the job's node, in one multi-operation conditioned
// on both versions.
func (s *Store) EndRun(ctx context.Context, e driver.RunEnd) error {
	if err := driver.CheckEnd(e); err != nil {
		return fmt.Errorf("%w: zkstore: %w", leash.ErrInvalidArgument, err)
	}
	if err := s.checkJob(ctx, e.Job); err != nil {
		return err
	}
	tick := e.Tick.UnixMilli()
	for range maxAttempts {
		now, err := s.now(ctx)
		if err != nil {
			return err
		}
		v, err := s.readJob(ctx, e.Job)
		if err != nil || !v.exists {
			return err
		}
		r, seq, version, err := s.findRun(ctx, e.Job, v, tick, e.Attempt)
		if err != nil {
			return err
		}
		if seq < 0 || r.Client != e.Client {
			return nil
		}
		r.Outcome, r.Fence, r.Error, r.Ended = e.Outcome.String(), e.Fence, e.Error, now
		ops := []any{&zk.SetDataRequest{Path: s.jobPath(e.Job) + "/" + runName(seq), Data: runData(r), Version: version}}
		if j := v.state; j.Tick == tick && j.Attempt == e.Attempt {
			j.Outcome = r.Outcome
			ops = append(ops, s.writeJob(e.Job, v, j))
		} else {
			ops = append(ops, &zk.CheckVersionRequest{Path: s.jobPath(e.Job), Version: v.version})
		}
		if err := s.multi(ctx, ops); changed(err) {
			continue
		} else if err != nil {
			return wrapErr("end a run of job", e.Job, err)
		}
		return nil
	}
	return fmt.Errorf("zkstore: end a run of job %q: it changed under every one of %d attempts", e.Job, maxAttempts)
}

// placed is one of a job's records as AddRuns orders them: a kept one
// (its seq, as read, and its node's version) or a new one (seq 0).
type placed struct {
	seq     int64
	version int32
	run     runJSON
}

// AddRuns implements [driver.JobStore]: the records and the job's node in
// one multi-operation conditioned on its version. Each record goes below
// the kept records of later ticks (the claim that found the ticks missed):
// those are read, newest first, down to the first of a tick not after the
// oldest new one, and move up (a delete at the version read and a create
// of the same data, in the same multi-operation) to make room.
func (s *Store) AddRuns(ctx context.Context, job string, runs []driver.RunRecord, keep int) error {
	if err := driver.CheckRuns(job, runs, keep); err != nil {
		return fmt.Errorf("%w: zkstore: %w", leash.ErrInvalidArgument, err)
	}
	if err := s.checkJob(ctx, job); err != nil {
		return err
	}
	if len(runs) == 0 {
		return nil
	}
	for range maxAttempts {
		ops, err := s.addRunsOps(ctx, job, runs, keep)
		if err != nil {
			return err
		}
		if ops == nil {
			continue // a record went since the job was read
		}
		if err := s.multi(ctx, ops); changed(err) {
			continue
		} else if err != nil {
			return wrapErr("add runs of job", job, err)
		}
		return nil
	}
	return fmt.Errorf("zkstore: add runs of job %q: it changed under every one of %d attempts", job, maxAttempts)
}

// addRunsOps reads the server's clock and the job, and returns AddRuns's
// multi-operation; nil when a record went between the reads.
func (s *Store) addRunsOps(ctx context.Context, job string, runs []driver.RunRecord, keep int) ([]any, error) {
	now, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	v, err := s.readJob(ctx, job)
	if err != nil {
		return nil, err
	}
	news := make([]runJSON, len(runs))
	oldest := runs[0].Tick.UnixMilli()
	for i, r := range runs {
		news[i] = toRun(r)
		if news[i].Started == 0 {
			news[i].Started = now
		}
		if news[i].Ended == 0 {
			news[i].Ended = now
		}
		oldest = min(oldest, news[i].Tick)
	}
	top, ok, err := s.readTop(ctx, job, v, oldest)
	if err != nil || !ok {
		return nil, err
	}
	for _, r := range news {
		i := slices.IndexFunc(top, func(p placed) bool { return p.run.Tick <= r.Tick })
		if i < 0 {
			i = len(top)
		}
		top = slices.Insert(top, i, placed{run: r})
	}
	return append([]any{s.writeJob(job, v, jobStateAfter(v, len(runs)))}, s.placeOps(job, v, top, driver.KeepRuns(keep))...), nil
}

// readTop reads job's newest records, newest first, down to the first of
// a tick not after tick (or all); ok is false when one of them is gone.
func (s *Store) readTop(ctx context.Context, job string, v jobView, tick int64) (top []placed, ok bool, err error) {
	for i := len(v.seqs) - 1; i >= 0; i-- {
		r, version, found, err := s.readRun(ctx, job, v.seqs[i])
		if err != nil || !found {
			return nil, false, err
		}
		top = append(top, placed{seq: v.seqs[i], version: version, run: r})
		if r.Tick <= tick {
			break
		}
	}
	return top, true, nil
}

// jobStateAfter is v's state with added more records: its newest record's
// seq is the one above every kept record's, plus added.
func jobStateAfter(v jobView, added int) jobState {
	st := v.state
	if n := len(v.seqs); n > 0 {
		st.Seq = max(st.Seq, v.seqs[n-1])
	}
	st.Seq += int64(added)
	return st
}

// placeOps returns the operations that give job's records their places:
// top, newest first, are the newest records (read, or new) and take the
// seqs down from the job's newest, over the records of v not in top;
// those beyond keep, oldest first, go. A kept record whose seq changes is
// deleted at the version read and created again at its new seq: every
// delete comes before every create.
func (s *Store) placeOps(job string, v jobView, top []placed, keep int) []any {
	var dels, creates []any
	path := func(seq int64) string { return s.jobPath(job) + "/" + runName(seq) }
	rest := v.seqs[:len(v.seqs)-(len(top)-countNew(top))]
	drop := max(len(rest)+len(top)-keep, 0)
	for _, seq := range rest[:min(drop, len(rest))] {
		dels = append(dels, &zk.DeleteRequest{Path: path(seq), Version: -1})
	}
	drop -= min(drop, len(rest))
	seq := jobStateAfter(v, countNew(top)).Seq
	for i, p := range top {
		gone := i >= len(top)-drop
		switch {
		case p.seq != 0 && gone:
			dels = append(dels, &zk.DeleteRequest{Path: path(p.seq), Version: -1})
		case p.seq != 0 && p.seq != seq:
			dels = append(dels, &zk.DeleteRequest{Path: path(p.seq), Version: p.version})
			creates = append(creates, &zk.CreateRequest{Path: path(seq), Data: runData(p.run), Acl: s.acl})
		case p.seq == 0 && !gone:
			creates = append(creates, &zk.CreateRequest{Path: path(seq), Data: runData(p.run), Acl: s.acl})
		}
		seq--
	}
	return append(dels, creates...)
}

// countNew is how many of top are new records.
func countNew(top []placed) int {
	n := 0
	for _, p := range top {
		if p.seq == 0 {
			n++
		}
	}
	return n
}

// Jobs implements [driver.JobStore]: the children of Root/jobs whose names
// match pattern.
func (s *Store) Jobs(ctx context.Context, pattern string) ([]string, error) {
	re, err := driver.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("zkstore: jobs: %w", err)
	}
	if err := s.ensureJobs(ctx); err != nil {
		return nil, err
	}
	children, err := call(ctx, func() ([]string, error) { c, _, err := s.conn.Children(s.root + "/jobs"); return c, err })
	if err != nil {
		return nil, fmt.Errorf("zkstore: jobs: %w", err)
	}
	var out []string
	for _, c := range children {
		if name, ok := unescapeSegment(c); ok && re.MatchString(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// History implements [driver.JobStore]: the server's clock, the job's
// node, its last n records (read at once) and its lock's holders.
func (s *Store) History(ctx context.Context, job string, n int) (driver.JobState, error) {
	if err := s.checkJob(ctx, job); err != nil {
		return driver.JobState{}, err
	}
	now, err := s.now(ctx)
	if err != nil {
		return driver.JobState{}, err
	}
	st := driver.JobState{Job: job, Now: time.UnixMilli(now)}
	var (
		v      jobView
		runs   []runJSON
		stable bool
	)
	for range maxAttempts {
		if v, err = s.readJob(ctx, job); err != nil || !v.exists {
			return st, err
		}
		if runs, stable, err = s.readRuns(ctx, job, v, n); err != nil {
			return driver.JobState{}, err
		}
		if stable {
			break
		}
	}
	if !stable {
		return driver.JobState{}, fmt.Errorf("zkstore: history of job %q: it changed under every one of %d reads", job, maxAttempts)
	}
	j := v.state
	st.Attempt, st.Spec = j.Attempt, j.Spec
	if j.Attempt > 0 {
		st.Tick = time.UnixMilli(j.Tick)
	}
	holders := map[string][2]bool{} // of each running record's claimer: mine, held
	for _, r := range runs {
		rec := r.record(job)
		if _, ok := holders[r.Client]; !ok && rec.Outcome == driver.OutcomeRunning {
			mine, held, err := s.jobHolders(ctx, job, r.Client)
			if err != nil {
				return driver.JobState{}, err
			}
			holders[r.Client] = [2]bool{mine, held}
		}
		st.Runs = append(st.Runs, rec)
	}
	driver.ReportedRuns(st.Runs, func(i int) (mine, held bool) {
		h := holders[st.Runs[i].Client]
		return h[0], h[1]
	})
	return st, nil
}

// readRuns reads the last n (n <= 0: all) of the records v saw, newest
// first, at once, leaving out those trimmed since; stable says the job's
// node was still at v's version after, so that no record moved (AddRuns)
// between the reads: the records are in their places.
func (s *Store) readRuns(ctx context.Context, job string, v jobView, n int) (runs []runJSON, stable bool, err error) {
	seqs := slices.Clone(v.seqs)
	slices.Reverse(seqs)
	if n > 0 && n < len(seqs) {
		seqs = seqs[:n]
	}
	read := make([]runJSON, len(seqs))
	found := make([]bool, len(seqs))
	errs := make([]error, len(seqs))
	var wg sync.WaitGroup
	for i, seq := range seqs {
		wg.Go(func() { read[i], _, found[i], errs[i] = s.readRun(ctx, job, seq) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, false, err
	}
	st, err := call(ctx, func() (*zk.Stat, error) { _, st, err := s.conn.Exists(s.jobPath(job)); return st, err })
	if err != nil {
		return nil, false, wrapErr("read job", job, err)
	}
	for i, r := range read {
		if found[i] {
			runs = append(runs, r)
		}
	}
	return runs, st != nil && st.Czxid == v.czxid && st.Version == v.version, nil
}
