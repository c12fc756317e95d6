package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/redisstore"
	"github.com/leash-go/leash/schedule"
	"github.com/redis/go-redis/v9"
)

// childEnv, when set, makes the test binary run as a scheduler instance in
// a process of its own (see runChild) instead of running tests.
const childEnv = "LEASH_TEST_SCHEDULE_CHILD"

// childLease is the run lock's lease in the processes tests kill and pause.
const childLease = time.Second

// runChild is an instance of a service that runs the job $LEASH_TEST_JOB
// every second on the Redis at $LEASH_TEST_ADDR, with a lease of
// childLease, its clock off by $LEASH_TEST_SKEW (a duration; default 0).
// Each run says "run <tick ms> <attempt> <fence>", then works for
// $LEASH_TEST_WORK (default: until its context ends), says "ended <tick ms>
// <cause, or ok>" and returns.
func runChild() int {
	skew, _ := time.ParseDuration(os.Getenv("LEASH_TEST_SKEW"))
	work, _ := time.ParseDuration(os.Getenv("LEASH_TEST_WORK"))
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("LEASH_TEST_ADDR")})
	defer rdb.Close()
	c, err := leash.New(redisstore.New(rdb, nil), &leash.Options{Lease: childLease})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer c.Close()
	s, err := schedule.New(c, &schedule.Options{Now: offset(skew), Keep: driver.MaxKeepRuns})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	err = s.Add(os.Getenv("LEASH_TEST_JOB"), "@every 1s", func(ctx context.Context, run schedule.Run) error {
		fmt.Println("run", run.Tick.UnixMilli(), run.Attempt, run.Fence)
		var done <-chan time.Time
		if work > 0 {
			done = time.After(work)
		}
		select {
		case <-ctx.Done():
		case <-done:
		}
		if ctx.Err() == nil {
			fmt.Println("ended", run.Tick.UnixMilli(), "ok")
			return nil
		}
		fmt.Println("ended", run.Tick.UnixMilli(), context.Cause(ctx))
		return ctx.Err()
	}, nil)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fmt.Println("ready")
	if err := s.Run(ctx); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// childRun is a "run" line of a child.
type childRun struct {
	tick    time.Time
	attempt int
	fence   int64
}

func parseRun(t *testing.T, line string) childRun {
	t.Helper()
	f := strings.Fields(line)
	if len(f) != 4 {
		t.Fatalf("child said %q, want run <tick> <attempt> <fence>", line)
	}
	ms, err1 := strconv.ParseInt(f[1], 10, 64)
	attempt, err2 := strconv.Atoi(f[2])
	fence, err3 := strconv.ParseInt(f[3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatalf("child said %q: %v", line, err)
	}
	return childRun{time.UnixMilli(ms), attempt, fence}
}

// startChild starts a child instance of job and waits for its first run.
func startChild(t *testing.T, job string) (*testkit.Child, childRun) {
	t.Helper()
	srv := shared.Redis(t)
	child := testkit.StartSelf(t, "instance", childEnv+"=1", "LEASH_TEST_ADDR="+srv.Addr, "LEASH_TEST_JOB="+job)
	if _, err := child.Await("ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	line, err := child.Await("run ", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return child, parseRun(t, line)
}

// survivor starts an in-process instance of job beside a child, whose runs
// end at once, and returns it with its log.
func survivor(t *testing.T, job string) (*instance, *runLog) {
	t.Helper()
	in := newInstance(t, redisStore(t), &leash.Options{Lease: childLease}, nil)
	log := newRunLog()
	if err := in.Add(job, "@every 1s", log.fn("survivor", nil), nil); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	return in, log
}

// checkOnce fails t if the history holds two records of one attempt of a
// tick, or a record of the child's tick by anyone but the child.
func checkOnce(t *testing.T, recs []driver.RunRecord) {
	t.Helper()
	type key struct {
		tick    int64
		attempt int
	}
	seen := map[key]bool{}
	for _, r := range recs {
		if r.Outcome == driver.OutcomeMissed {
			continue
		}
		k := key{r.Tick.UnixMilli(), r.Attempt}
		if seen[k] {
			t.Errorf("tick %v attempt %d recorded twice: %+v", r.Tick, r.Attempt, recs)
		}
		seen[k] = true
	}
}

// recordOf returns the record of tick's first attempt.
func recordOf(t *testing.T, recs []driver.RunRecord, tick time.Time) driver.RunRecord {
	t.Helper()
	for _, r := range recs {
		if r.Tick.Equal(tick) && r.Attempt == 1 {
			return r
		}
	}
	t.Fatalf("no record of tick %v in %+v", tick, recs)
	return driver.RunRecord{}
}

// TestKilledMidRunNextTickRunsElsewhere: an instance SIGKILLed in the
// middle of a run never says how it ended. Its record reads lost once its
// lease is over, its tick is not run again, and a later tick runs on the
// surviving instance, under a greater fencing token.
func TestKilledMidRunNextTickRunsElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	job := jobName(t)
	child, first := startChild(t, job)
	in, log := survivor(t, job)
	child.Kill()
	runs := log.await(t, 60*time.Second, "a run on the surviving instance", func(r []ran) bool { return len(r) > 0 })
	got := runs[0].run
	if !got.Tick.After(first.tick) || got.Fence <= first.fence {
		t.Errorf("survivor ran tick %v with fence %d; want a tick after the killed run's %v and a fence above its %d",
			got.Tick, got.Fence, first.tick, first.fence)
	}
	recs := history(t, in, job)
	checkOnce(t, recs)
	if rec := recordOf(t, recs, first.tick); rec.Outcome != driver.OutcomeLost || rec.Fence != 0 {
		t.Errorf("killed run's record = %+v, want lost (the claimer never told its end)", rec)
	}
	if rec := recordOf(t, recs, got.Tick); rec.Outcome != driver.OutcomeOK && rec.Outcome != driver.OutcomeRunning {
		t.Errorf("survivor's run record = %+v, want ok", rec)
	}
}

// TestPausedPastLeaseIsCancelledAndFenced: an instance SIGSTOPped in the
// middle of a run, for longer than its lease, loses its run lock; a later
// tick runs on the other instance under a greater fencing token; when the
// paused instance resumes, its run's context is cancelled with a
// *leash.LostError, and its record says lost.
func TestPausedPastLeaseIsCancelledAndFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	job := jobName(t)
	child, first := startChild(t, job)
	if err := child.Pause(); err != nil {
		t.Fatal(err)
	}
	in, log := survivor(t, job)
	runs := log.await(t, 60*time.Second, "a run on the running instance", func(r []ran) bool { return len(r) > 0 })
	got := runs[0].run
	if !got.Tick.After(first.tick) || got.Fence <= first.fence {
		t.Errorf("running instance ran tick %v with fence %d; want a tick after the paused run's %v and a fence above its %d",
			got.Tick, got.Fence, first.tick, first.fence)
	}
	if err := child.Resume(); err != nil {
		t.Fatal(err)
	}
	line, err := child.Await("ended ", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("ended %d leash: lock %q lost", first.tick.UnixMilli(), job); !strings.HasPrefix(line, want) {
		t.Errorf("paused instance said %q once resumed, want %q…: its run's context cancelled by the loss", line, want)
	}
	// The resumed instance records its end (lost) right after it said so.
	var rec driver.RunRecord
	deadline := time.Now().Add(30 * time.Second)
	for {
		recs := history(t, in, job)
		checkOnce(t, recs)
		rec = recordOf(t, recs, first.tick)
		if !rec.Ended.IsZero() || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling the store for the child's record
	}
	if rec.Outcome != driver.OutcomeLost || rec.Ended.IsZero() || rec.Fence != first.fence {
		t.Errorf("paused run's record = %+v, want lost, ended, with its fence %d", rec, first.fence)
	}
}

// TestSkewedProcessesKilledAndPaused is the skew test with processes: three
// instances, each a process of its own with its clock off by -X, 0 and +X,
// run a job every second whose runs take 300ms. One is SIGKILLed in the
// middle of a run; later another is SIGSTOPped in the middle of a run for
// longer than its lease, and continued once the third has run a later tick.
// Then: every tick from the first run to the last has exactly one record
// (ok, skipped while a dead or paused run still held the lock, or lost),
// none claimed earlier than the tolerance by the store's clock, the killed
// and paused runs read lost, the paused run's context was cancelled by the
// loss, and every later tick ran under a greater fence.
func TestSkewedProcessesKilledAndPaused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and runs for seconds")
	}
	job := jobName(t)
	srv := shared.Redis(t)
	lines := make(chan string, 1000)
	var children []*testkit.Child
	for i, skew := range skews {
		c, err := testkit.Start(fmt.Sprintf("instance %d (clock %+v)", i, skew),
			testkit.Self(childEnv+"=1", "LEASH_TEST_ADDR="+srv.Addr, "LEASH_TEST_JOB="+job,
				"LEASH_TEST_SKEW="+skew.String(), "LEASH_TEST_WORK=300ms"),
			func(l string) { lines <- fmt.Sprintf("%d %s", i, l) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Kill)
		children = append(children, c)
	}
	// await returns the next line that starts with prefix from any child
	// but those in not, as (child, line).
	await := func(prefix string, not ...int) (int, string) {
		t.Helper()
		timeout := time.After(60 * time.Second)
		for {
			select {
			case l := <-lines:
				who, text, _ := strings.Cut(l, " ")
				i, _ := strconv.Atoi(who)
				if strings.HasPrefix(text, "error") {
					t.Fatalf("instance %d: %s", i, text)
				}
				if strings.HasPrefix(text, prefix) && !slices.Contains(not, i) {
					return i, text
				}
			case <-timeout:
				t.Fatalf("no %q line for 60s", prefix)
			}
		}
	}
	killed, line := await("run ")
	killedRun := parseRun(t, line)
	children[killed].Kill()
	await("run ", killed) // a run elsewhere since the kill
	paused, line := await("run ", killed)
	pausedRun := parseRun(t, line)
	if err := children[paused].Pause(); err != nil {
		t.Fatal(err)
	}
	// The third instance runs a later tick once the paused run's lease is
	// over; then the paused one continues.
	var third int
	for {
		i, l := await("run ", killed, paused)
		if r := parseRun(t, l); r.tick.After(pausedRun.tick) {
			if r.fence <= pausedRun.fence {
				t.Errorf("tick %v ran under fence %d while the paused run had %d", r.tick, r.fence, pausedRun.fence)
			}
			third = i
			break
		}
	}
	if err := children[paused].Resume(); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("ended %d leash: lock %q lost", pausedRun.tick.UnixMilli(), job)
	if _, l := await(fmt.Sprintf("ended %d", pausedRun.tick.UnixMilli())); !strings.HasPrefix(l, want) {
		t.Errorf("paused instance said %q once continued, want %q…", l, want)
	}
	// A few more ticks on the two live instances, then a clean stop.
	for range 3 {
		await("ended ", killed)
	}
	for _, i := range []int{paused, third} {
		if err := children[i].Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := children[i].Wait(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	in := newInstance(t, redisStore(t), nil, nil)
	recs := history(t, in, job)
	checkOnce(t, recs)
	byTick := map[int64]driver.RunRecord{}
	var first, last time.Time
	for _, r := range recs {
		if r.Attempt != 1 || r.Outcome == driver.OutcomeMissed {
			t.Errorf("record %+v: want only first attempts, none missed", r)
		}
		byTick[r.Tick.UnixMilli()] = r
		if first.IsZero() || r.Tick.Before(first) {
			first = r.Tick
		}
		if r.Tick.After(last) {
			last = r.Tick
		}
		if r.Started.Before(r.Tick.Add(-schedule.DefaultTolerance)) {
			t.Errorf("tick %v claimed at %v by the store's clock: early", r.Tick, r.Started)
		}
	}
	var prevFence int64
	for tk := first; !tk.After(last); tk = tk.Add(time.Second) {
		r, ok := byTick[tk.UnixMilli()]
		switch {
		case !ok:
			t.Errorf("tick %v has no record", tk)
		case tk.Equal(killedRun.tick) || tk.Equal(pausedRun.tick):
			if r.Outcome != driver.OutcomeLost {
				t.Errorf("the %s run's record = %+v, want lost", map[bool]string{true: "killed", false: "paused"}[tk.Equal(killedRun.tick)], r)
			}
		case r.Outcome == driver.OutcomeOK:
			if r.Fence <= prevFence {
				t.Errorf("tick %v ran under fence %d, not above an earlier tick's %d", tk, r.Fence, prevFence)
			}
			prevFence = r.Fence
		case r.Outcome != driver.OutcomeSkipped:
			t.Errorf("tick %v: %+v, want ok, or skipped while a stopped run held the lock", tk, r)
		}
	}
	t.Logf("ticks %v to %v: killed instance %d at %v, paused instance %d at %v, the third is %d",
		first.Format("15:04:05"), last.Format("15:04:05"), killed, killedRun.tick.Format("15:04:05"), paused,
		pausedRun.tick.Format("15:04:05"), third)
}
