package scenario_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/leash-go/leash/internal/faultproxy"
	"github.com/leash-go/leash/internal/leakcheck"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/reliability/check"
	"github.com/leash-go/leash/reliability/history"
)

// Environment variables.
const (
	// childEnv, when set, makes the test binary run a worker (its value is
	// the workerConfig as JSON) instead of the tests.
	childEnv = "LEASH_RELIABILITY_WORKER"
	// scaleEnv multiplies every scenario's size (runs and durations).
	scaleEnv = "LEASH_RELIABILITY_SCALE"
	// seedEnv fixes the seed of every scenario, to replay a failure.
	seedEnv = "LEASH_RELIABILITY_SEED"
	// reportEnv names a file to which each scenario appends its figures.
	reportEnv = "LEASH_RELIABILITY_REPORT"
	// artifactsEnv names the directory for failing histories (default: the
	// system temp directory).
	artifactsEnv = "LEASH_RELIABILITY_ARTIFACTS"
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(childMain(cfg))
	}
	code := m.Run()
	if resource.srv != nil {
		resource.srv.Close()
	}
	os.Exit(leakcheck.Check(code))
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// scale is LEASH_RELIABILITY_SCALE, at least 1.
func scale() int {
	n, err := strconv.Atoi(os.Getenv(scaleEnv))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// resource is the package's fenced-resource server: never faulted, shared
// by the scenarios (each uses its own lock names).
var resource struct {
	once sync.Once
	srv  *testserver.Redis
	err  error
}

// env is one scenario run: its backend, seed, servers, processes and
// history.
type env struct {
	t     *testing.T
	b     backend
	seed  uint64
	rng   *rand.Rand
	start time.Time

	mu    sync.Mutex
	recs  []*history.Recorder
	files []string
	nem   *history.Recorder // faults: pauses and kills of processes
}

// newEnv returns a scenario run on Redis.
func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, redisBackend)
}

// newEnvOn returns a scenario run on b.
func newEnvOn(t *testing.T, b backend) *env {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(seedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay the fault schedule with %s=%d)", seed, seedEnv, seed)
	e := &env{t: t, b: b, seed: seed, rng: rand.New(rand.NewPCG(seed, 0)), start: time.Now(), nem: history.NewRecorder("nemesis", nil)}
	e.recs = append(e.recs, e.nem)
	return e
}

// redis starts a redis-server for this scenario, killed at cleanup
// (SIGCONT first): the lock server of a Redis-only scenario.
func (e *env) redis(opts testserver.RedisOptions) *testserver.Redis {
	return testserver.NewRedis(e.t, opts)
}

// server starts a lock server of the scenario's backend, stopped at
// cleanup.
func (e *env) server() server {
	e.t.Helper()
	return e.b.start(e.t)
}

// resourceAddr returns the fenced resource's address.
func (e *env) resourceAddr() string {
	e.t.Helper()
	resource.once.Do(func() { resource.srv, resource.err = testserver.StartRedis(testserver.RedisOptions{}) })
	if resource.err != nil {
		e.t.Fatalf("resource server: %v", resource.err)
	}
	return resource.srv.Addr
}

// proxy starts a fault proxy to addr, healed and closed at cleanup.
func (e *env) proxy(addr string) *faultproxy.Proxy {
	e.t.Helper()
	p, err := faultproxy.New(addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { p.Heal(); p.Close() })
	return p
}

// config returns a worker configuration with this scenario's defaults: the
// worker starts holds for d from when it is ready.
func (e *env) config(proc, addr string, locks []string, lease time.Duration, d time.Duration) workerConfig {
	return workerConfig{
		Proc: proc, Backend: e.b.name, Addr: addr, Resource: e.resourceAddr(), Locks: locks,
		Lease: lease, HoldMin: lease / 20, HoldMax: lease / 4, Writes: 2,
		LockWait: 3 * lease, For: d, Seed: e.rng.Uint64(),
	}
}

// oneHold returns a configuration for a worker that takes exactly one hold,
// however long it waits for the lock (a minute at most, so that a broken
// lock ends the test rather than hangs it).
func (e *env) oneHold(proc, addr string, locks []string, lease time.Duration) workerConfig {
	cfg := e.config(proc, addr, locks, lease, time.Minute)
	cfg.Holds = 1
	return cfg
}

// lockNames returns n lock names unique to this test.
func (e *env) lockNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s/%d/%d", e.t.Name(), e.seed, i)
	}
	return out
}

// goWorker runs cfg in this process; the returned wait blocks until it ends.
func (e *env) goWorker(cfg workerConfig) (wait func()) {
	return e.goRun(cfg, func(rec *history.Recorder) error { return runWorker(cfg, rec, nil) })
}

// goRun runs a worker for cfg in this process with run, which records into
// rec; the returned wait blocks until it ends.
func (e *env) goRun(cfg workerConfig, run func(rec *history.Recorder) error) (wait func()) {
	rec := history.NewRecorder(cfg.Proc, nil)
	e.mu.Lock()
	e.recs = append(e.recs, rec)
	e.mu.Unlock()
	done := make(chan struct{})
	started := time.Now()
	// Owner: the scenario. Stops at the end of cfg's window or holds.
	go func() {
		defer close(done)
		if err := run(rec); err != nil {
			e.t.Errorf("worker %s: %v", cfg.Proc, err)
		}
	}()
	return func() {
		// A worker ends within seconds of its window: its last Lock waits
		// cfg.LockWait at most, its last hold and Unlock a few leases. One
		// still running minutes later is stuck; its stack says where,
		// which a test timeout's dump of every goroutine (cut short by CI
		// logs) may not.
		stuck := started.Add(readyWithin + cfg.For + stuckAfter)
		select {
		case <-done:
			return
		case <-time.After(time.Until(stuck)):
		}
		e.t.Errorf("worker %s still running %v after its window ended: stuck; its goroutines:\n%s\n%s",
			cfg.Proc, stuckAfter, goroutines("scenario_test.runOn", "scenario_test.(*worker)"), e.dumpGoroutines())
	}
}

// stuckAfter is how long after its window an in-process worker may still
// run before the scenario calls it stuck (see goRun).
const stuckAfter = 3 * time.Minute

// goroutines returns the stacks of this process's goroutines that have a
// frame whose function name contains one of funcs.
func goroutines(funcs ...string) string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	var out []string
	for _, g := range strings.Split(b.String(), "\n\n") {
		for _, f := range funcs {
			if strings.Contains(g, f) {
				out = append(out, g)
				break
			}
		}
	}
	return strings.Join(out, "\n\n")
}

// dumpGoroutines writes every goroutine's stack to a file next to the
// failing histories (see save) and returns a sentence naming it.
func (e *env) dumpGoroutines() string {
	base, err := e.artifact()
	if err != nil {
		return fmt.Sprintf("(every goroutine's stack not saved: %v)", err)
	}
	path := base + "-goroutines.txt"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err == nil {
		err = pprof.Lookup("goroutine").WriteTo(f, 2)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Sprintf("(every goroutine's stack not saved: %v)", err)
	}
	return "every goroutine's stack is in " + path
}

// child is a worker running in its own process, so that pauses and kills
// are real.
type child struct {
	*testkit.Child
	e     *env
	cfg   workerConfig
	pause int64 // ID of the open Paused operation, 0 when running
}

// startChild runs cfg in a child process and returns once the child is
// ready (its window starts then). At cleanup it is continued (SIGCONT
// first) and killed.
func (e *env) startChild(cfg workerConfig) *child {
	e.t.Helper()
	cfg.Out = filepath.Join(e.t.TempDir(), cfg.Proc+".jsonl")
	cfg.Announce = true
	b, _ := json.Marshal(cfg)
	c := &child{Child: testkit.StartSelf(e.t, "worker "+cfg.Proc, childEnv+"="+string(b)), e: e, cfg: cfg}
	e.mu.Lock()
	e.files = append(e.files, cfg.Out)
	e.mu.Unlock()
	c.await("ready", startWithin)
	return c
}

// startWithin bounds how long a child process may take to start, build its
// client and reach its servers: generous, because a race-instrumented binary
// on a loaded machine is slow to start, and only a hung child should trip it.
const startWithin = 2 * time.Minute

// await returns the child's next line that starts with prefix.
func (c *child) await(prefix string, within time.Duration) string {
	c.e.t.Helper()
	l, err := c.Await(prefix, within)
	if err != nil {
		c.e.t.Fatal(err)
	}
	return l
}

// stop pauses the child with SIGSTOP and records the pause.
func (c *child) stop() {
	c.pause = c.e.nem.Begin(history.Op{Kind: history.Paused})
	if err := c.Pause(); err != nil {
		c.e.t.Fatal(err)
	}
}

// cont resumes a paused child with SIGCONT.
func (c *child) cont() {
	if err := c.Resume(); err != nil {
		c.e.t.Fatal(err)
	}
	c.e.nem.End(c.pause, func(o *history.Op) { o.Proc = c.cfg.Proc })
	c.pause = 0
}

// kill ends the child with SIGKILL and records its death.
func (c *child) kill() {
	c.e.nem.Instant(history.Op{Kind: history.Died, Reason: c.cfg.Proc})
	c.Kill()
}

// wait waits for the child to finish on its own.
func (c *child) wait(within time.Duration) {
	c.e.t.Helper()
	if err := c.Wait(within); err != nil {
		c.e.t.Fatal(err)
	}
}

// holding reports whether one of this process's workers believes it holds
// lock: its last Lock of it succeeded, and it has been told of no loss and
// begun no Unlock since.
func (e *env) holding(lock string) bool {
	e.mu.Lock()
	recs := slices.Clone(e.recs)
	e.mu.Unlock()
	for _, r := range recs {
		held := false
		for _, op := range r.Ops() {
			switch {
			case op.Lock != lock:
			case op.Kind == history.Lock && op.Depth == 1:
				held = op.OK
			case op.Kind == history.Told, op.Kind == history.Unlock && op.Depth == 1:
				held = false
			}
		}
		if held {
			return true
		}
	}
	return false
}

// ops returns the whole history: this process's recorders and the
// children's files. Fault records are re-attributed to the process they hit.
func (e *env) ops() []history.Op {
	e.mu.Lock()
	defer e.mu.Unlock()
	var all []history.Op
	for _, r := range e.recs {
		for _, op := range r.Ops() {
			if op.Kind == history.Died {
				op.Proc = op.Reason
			}
			all = append(all, op)
		}
	}
	for _, f := range e.files {
		ops, err := history.Load(f)
		if err != nil {
			e.t.Errorf("load %s: %v", f, err)
			continue
		}
		all = append(all, ops...)
	}
	history.Sort(all)
	return all
}

// expect says what a scenario must show. The zero value is the safety
// claim: no double grant, no stale write accepted, no holder told late.
type expect struct {
	// DoubleGrant, StaleWrite and Late mark a negative control: the
	// checker must find at least one.
	DoubleGrant, StaleWrite, Late bool
	// LateWhenPaused classifies a holder told late as expected when its
	// process was paused (SIGSTOP) at its deadline: no lease lock can tell
	// a stopped process anything.
	LateWhenPaused bool
	// Note explains the expected cases, for the report.
	Note string
}

// stallSlack is how soon after a stall of its process ends a holder told
// late must have been told for the stall to explain it.
const stallSlack = 100 * time.Millisecond

// stalledAt reports whether l's holder was told late because its process
// did not run: a stall its monitor recorded (history.Stalled) covers the
// moment the server could give the lock away, and the holder was told
// within stallSlack of the stall's end. A watchdog late in a running
// process is not excused.
func stalledAt(ops []history.Op, l check.Late) bool {
	told := l.At + int64(l.By)
	for _, op := range ops {
		if op.Kind == history.Stalled && op.Proc == l.Proc && op.Call <= l.At && l.At <= op.Return && told <= op.Return+int64(stallSlack) {
			return true
		}
	}
	return false
}

// verify checks the whole history against want, reports the figures (under
// the scenario's name on the backend, see backend.scenario), and on a
// failure writes the history (and porcupine's view of it) to a file named
// in the output.
func (e *env) verify(scenario string, runs int, want expect) check.Row {
	e.t.Helper()
	scenario = e.b.scenario(scenario)
	ops := e.ops()
	// A control of grant safety may be a long run of double grants, which
	// porcupine can take minutes to prove illegal: it gets less time, and
	// its Unknown is no failure once the definite count has caught the
	// control (see below).
	timeout := 2 * time.Minute
	if want.DoubleGrant {
		timeout = 20 * time.Second
	}
	g := check.Grants(ops, timeout)
	sw := check.StaleWrites(ops)
	nt := check.Notifications(ops)
	ov := check.Overlap(ops)

	paused := func(proc string) bool {
		for _, op := range ops {
			if op.Kind == history.Paused && op.Proc == proc {
				return true
			}
		}
		return false
	}
	var late, lateOK, stalled []check.Late
	for _, l := range nt.Late {
		switch {
		case want.LateWhenPaused && paused(l.Proc):
			lateOK = append(lateOK, l)
		case !want.Late && stalledAt(ops, l):
			stalled = append(stalled, l)
		default:
			late = append(late, l)
		}
	}
	if len(stalled) > 0 {
		// Not the watchdog's fault: nothing of the holder's process ran.
		lateOK = append(lateOK, stalled...)
		want.Note = strings.TrimPrefix(want.Note+fmt.Sprintf("; %d holders told late because their process did not run across the server deadline (a stall its own monitor saw)", len(stalled)), "; ")
		e.t.Logf("told late across a stall of their process: %+v", stalled)
	}
	r := check.Row{
		Scenario: scenario, Runs: runs, Grants: g.Grants, Verdict: string(g.Verdict),
		DoubleGrants: len(g.DoubleGrants), StaleAccepted: len(sw.StaleAccepted), Superseded: sw.Superseded,
		Ambiguous: g.Ambiguous, Late: len(late), LateExpected: len(lateOK),
		LeadMinMS: -1, LeadP50MS: -1, OverlapMS: ms(ov.Total), Note: want.Note,
		Control: want.DoubleGrant || want.StaleWrite || want.Late, Seed: e.seed, Seconds: time.Since(e.start).Seconds(),
	}
	if n := len(nt.LostAtReturn); n > 0 {
		// Not late: the hold was lost from its first moment (see
		// check.NotifyResult), so its holder never believed it held.
		r.Note = strings.TrimPrefix(r.Note+fmt.Sprintf("; %d holds returned by Lock already past their validity (the acquire outlasted the lease), lost from their first moment", n), "; ")
	}
	if g.Verdict == porcupine.Illegal && r.DoubleGrants == 0 {
		r.DoubleGrants = 1 // porcupine found one that the definite count could not pin down
	}
	var leads []time.Duration // of holders that were running: a stopped one is told late
	for _, l := range nt.Leads {
		if !paused(l.Proc) {
			leads = append(leads, l.D)
		}
	}
	r.Told = len(leads)
	if len(leads) > 0 {
		slices.Sort(leads)
		r.LeadMinMS, r.LeadP50MS = ms(leads[0]), ms(leads[len(leads)/2])
	}
	e.t.Logf("%s: %d runs, %d grants (%d ambiguous store ops), porcupine %s, %d double grants, %d stale writes accepted of %d superseded attempts, %d told by deadline (lead min %.0fms, p50 %.0fms), %d late (+%d expected), %d lost at return, believed overlap %.0fms",
		scenario, runs, r.Grants, r.Ambiguous, r.Verdict, r.DoubleGrants, r.StaleAccepted, r.Superseded, r.Told, r.LeadMinMS, r.LeadP50MS, r.Late, r.LateExpected, len(nt.LostAtReturn), r.OverlapMS)
	if len(nt.LostAtReturn) > 0 {
		e.t.Logf("lost at return: %+v", nt.LostAtReturn)
	}

	var failures []string
	claim := func(name string, found, control bool) {
		switch {
		case control && !found:
			failures = append(failures, fmt.Sprintf("negative control: the checker found no %s in a configuration known to produce them", name))
		case !control && found:
			failures = append(failures, "found "+name)
		}
	}
	claim("double grant", r.DoubleGrants > 0 || g.Verdict == porcupine.Illegal, want.DoubleGrant)
	claim("stale write accepted", r.StaleAccepted > 0 || len(sw.TokenRegressions) > 0, want.StaleWrite)
	claim("holder told after its server deadline", len(late) > 0, want.Late)
	if g.Verdict == porcupine.Unknown && !(want.DoubleGrant && len(g.DoubleGrants) > 0) {
		failures = append(failures, "porcupine timed out (Unknown counts as a failure, except in a control of grant safety that the definite count has caught)")
	}
	if g.Grants == 0 {
		failures = append(failures, "no grant at all: the scenario proved nothing")
	}
	if len(failures) > 0 {
		e.t.Errorf("%s: %s\n  late: %+v\n  double grants: %+v\n  stale: %+v\n  token regressions: %+v\n  %s",
			scenario, strings.Join(failures, "; "), late, g.DoubleGrants, sw.StaleAccepted, sw.TokenRegressions, e.save(ops, g))
	}
	e.report(r)
	return r
}

// artifact returns the path, without extension, of the scenario's files in
// the artifacts directory (LEASH_RELIABILITY_ARTIFACTS, or leash-reliability
// in the temporary directory), which it creates.
func (e *env) artifact() (string, error) {
	dir := os.Getenv(artifactsEnv)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "leash-reliability")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(dir, fmt.Sprintf("%s-%d", strings.ReplaceAll(e.t.Name(), "/", "_"), e.seed)), nil
}

// save writes a failing history and porcupine's HTML view; it returns a
// sentence naming them.
func (e *env) save(ops []history.Op, g check.GrantResult) string {
	return e.saveWith(ops, g.Visualize)
}

// saveHistory writes a failing history, for a check that has no porcupine
// view; it returns a sentence naming it.
func (e *env) saveHistory(ops []history.Op) string { return e.saveWith(ops, nil) }

// saveWith writes a failing history and, with visualize, its HTML view.
func (e *env) saveWith(ops []history.Op, visualize func(path string) error) string {
	base, err := e.artifact()
	if err != nil {
		return fmt.Sprintf("(history not saved: %v)", err)
	}
	if err := history.WriteFile(base+".json", ops); err != nil {
		return fmt.Sprintf("(history not saved: %v)", err)
	}
	html := ""
	if visualize != nil && visualize(base+".html") == nil {
		html = " and " + base + ".html"
	}
	return fmt.Sprintf("history written to %s.json%s; replay the schedule with %s=%d", base, html, seedEnv, e.seed)
}

// report appends r to LEASH_RELIABILITY_REPORT, if set.
func (e *env) report(r check.Row) {
	path := os.Getenv(reportEnv)
	if path == "" {
		return
	}
	b, _ := json.Marshal(r)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		e.t.Errorf("report: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		e.t.Errorf("report: %v", err)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestStalledAt: a holder told late is excused by a stall of its own
// process that covers the moment the server could free its lock and ends
// just before it was told; not by another process's stall, one that
// began after that moment, or one that ended long before it was told.
func TestStalledAt(t *testing.T) {
	const ms = int64(time.Millisecond)
	l := check.Late{Proc: "w1", At: 1000 * ms, By: 250 * time.Millisecond}
	stall := func(proc string, from, to int64) []history.Op {
		return []history.Op{{Kind: history.Stalled, Proc: proc, Call: from * ms, Return: to * ms}}
	}
	for name, tc := range map[string]struct {
		ops  []history.Op
		want bool
	}{
		"its process stalled across the deadline": {stall("w1", 800, 1240), true},
		"another process stalled":                 {stall("w2", 800, 1240), false},
		"the stall began after the deadline":      {stall("w1", 1010, 1240), false},
		"the stall ended long before it was told": {stall("w1", 800, 1050), false},
		"a pause, not a stall":                    {[]history.Op{{Kind: history.Paused, Proc: "w1", Call: 800 * ms, Return: 1240 * ms}}, false},
		"no stall":                                {nil, false},
	} {
		if got := stalledAt(tc.ops, l); got != tc.want {
			t.Errorf("%s: stalledAt = %v, want %v", name, got, tc.want)
		}
	}
}
