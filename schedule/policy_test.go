package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/schedule"
)

// awaitHistory polls job's history until cond holds, for at most within
// counted from the call, and returns it.
func awaitHistory(t *testing.T, in *instance, job string, within time.Duration, what string, cond func([]driver.RunRecord) bool) []driver.RunRecord {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		recs := history(t, in, job)
		if cond(recs) {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s did not happen; history: %+v", within, what, recs)
		}
		time.Sleep(10 * time.Millisecond) // polling the store for the condition
	}
}

func count(recs []driver.RunRecord, o driver.Outcome) int {
	n := 0
	for _, r := range recs {
		if r.Outcome == o {
			n++
		}
	}
	return n
}

func TestNewAndAddRejectBadInput(t *testing.T) {
	if _, err := schedule.New(nil, nil); !errors.Is(err, leash.ErrInvalidArgument) {
		t.Errorf("New(nil) = %v, want ErrInvalidArgument", err)
	}
	bare := newClient(t, struct{ driver.Store }{memstore.New()}, nil)
	if _, err := schedule.New(bare, nil); !errors.Is(err, leash.ErrUnsupported) {
		t.Errorf("New on a store without JobStore = %v, want ErrUnsupported", err)
	}
	c := newClient(t, memstore.New(), nil)
	for _, o := range []schedule.Options{{Tolerance: -1}, {Grace: -2}, {Keep: -1}, {Keep: driver.MaxKeepRuns + 1}, {Timeout: -1},
		{Location: time.Local}} {
		if _, err := schedule.New(c, &o); !errors.Is(err, leash.ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v, want ErrInvalidArgument", o, err)
		}
	}
	s, err := schedule.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	nop := func(context.Context, schedule.Run) error { return nil }
	if err := s.Add("job", "@every 1s", nop, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, spec string
		fn         schedule.Func
		opts       *schedule.JobOptions
		want       error
	}{
		{"job", "@every 1s", nop, nil, schedule.ErrJobExists},
		{"other", "every second", nop, nil, schedule.ErrBadSpec},
		{"other", "@every 1s", nil, nil, leash.ErrInvalidArgument},
		{"", "@every 1s", nop, nil, leash.ErrInvalidArgument},
		{"other", "@every 1s", nop, &schedule.JobOptions{Overlap: schedule.OverlapLimit}, leash.ErrInvalidArgument},
		{"other", "@every 1s", nop, &schedule.JobOptions{Limit: 2}, leash.ErrInvalidArgument},
		{"other", "@every 1s", nop, &schedule.JobOptions{Retries: -1}, leash.ErrInvalidArgument},
		{"other", "@every 1s", nop, &schedule.JobOptions{MaxRun: -time.Second}, leash.ErrInvalidArgument},
		{"other", "@every 1s", nop, &schedule.JobOptions{Lease: time.Nanosecond}, leash.ErrInvalidArgument},
		{"other", "@every 1s", nop, &schedule.JobOptions{Misfire: 7}, leash.ErrInvalidArgument},
		{"other", "0 * * * * *", nop, &schedule.JobOptions{Location: time.Local}, leash.ErrInvalidArgument},
	} {
		if err := s.Add(tc.name, tc.spec, tc.fn, tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("Add(%q, %q, fn nil %v, %+v) = %v, want %v", tc.name, tc.spec, tc.fn == nil, tc.opts, err, tc.want)
		}
	}
	if got := s.Jobs(); len(got) != 1 || got[0] != "job" {
		t.Errorf("Jobs() = %q after failed Adds, want [job]", got)
	}
}

// TestOverlapSkip: while a run holds the job's lock, the ticks that come
// are claimed and recorded skipped, and the function is not called again.
func TestOverlapSkip(t *testing.T) {
	job, log := jobName(t), newRunLog()
	in := newInstance(t, memstore.New(), nil, nil)
	release := make(chan struct{})
	if err := in.Add(job, "@every 100ms", log.fn("a", func(ctx context.Context, _ schedule.Run) error {
		<-release
		return nil
	}), nil); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	recs := awaitHistory(t, in, job, 30*time.Second, "2 skipped ticks", func(r []driver.RunRecord) bool {
		return count(r, driver.OutcomeSkipped) >= 2
	})
	if n := len(log.all()); n != 0 {
		t.Errorf("%d runs ended while the first still ran", n)
	}
	for _, r := range recs {
		if r.Outcome == driver.OutcomeSkipped && !strings.Contains(r.Error, "still holds the job's lock") {
			t.Errorf("skipped record says %q, want why", r.Error)
		}
	}
	close(release)
	log.await(t, 30*time.Second, "the next run after the release", func(r []ran) bool { return len(r) >= 2 })
}

// TestOverlapQueue: a tick that comes while the previous run still runs
// waits for the lock and runs after it, within its window; one whose wait
// outlasts its window is recorded skipped.
func TestOverlapQueue(t *testing.T) {
	job, log := jobName(t), newRunLog()
	in := newInstance(t, memstore.New(), nil, nil)
	var calls atomic.Int32
	release := make(chan struct{})
	if err := in.Add(job, "@every 1s", log.fn("a", func(ctx context.Context, _ schedule.Run) error {
		if calls.Add(1) == 1 {
			<-release
		}
		return nil
	}), &schedule.JobOptions{Overlap: schedule.OverlapQueue}); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	// The first run holds until a second tick has been claimed and waits.
	recs := awaitHistory(t, in, job, 30*time.Second, "a second tick claimed", func(r []driver.RunRecord) bool {
		return count(r, driver.OutcomeRunning) >= 2
	})
	queued := recs[0].Tick
	close(release)
	runs := log.await(t, 30*time.Second, "the queued tick's run", func(r []ran) bool { return len(r) >= 2 })
	if !runs[1].run.Tick.Equal(queued) || !runs[1].at.After(runs[0].at) {
		t.Errorf("second run = tick %v at %v; want the queued tick %v, after the first run ended (%v)",
			runs[1].run.Tick, runs[1].at, queued, runs[0].at)
	}
	if runs[1].run.Fence <= runs[0].run.Fence {
		t.Errorf("queued run's fence %d, want above the first's %d", runs[1].run.Fence, runs[0].run.Fence)
	}
}

// TestOverlapQueuePastWindowSkips: a queued tick whose wait reaches the next
// tick gives up and is recorded skipped.
func TestOverlapQueuePastWindowSkips(t *testing.T) {
	job := jobName(t)
	in := newInstance(t, memstore.New(), nil, nil)
	release := make(chan struct{})
	var calls atomic.Int32
	if err := in.Add(job, "@every 200ms", func(ctx context.Context, _ schedule.Run) error {
		if calls.Add(1) == 1 {
			<-release
		}
		return nil
	}, &schedule.JobOptions{Overlap: schedule.OverlapQueue}); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	recs := awaitHistory(t, in, job, 30*time.Second, "a queued tick skipped", func(r []driver.RunRecord) bool {
		return count(r, driver.OutcomeSkipped) >= 1
	})
	close(release)
	for _, r := range recs {
		if r.Outcome == driver.OutcomeSkipped && !strings.Contains(r.Error, "until the next tick") {
			t.Errorf("skipped record says %q, want that the wait reached the next tick", r.Error)
		}
	}
}

// TestOverlapLimit: with a limit of 2, two runs run at once, and a third
// tick is skipped.
func TestOverlapLimit(t *testing.T) {
	job := jobName(t)
	in := newInstance(t, memstore.New(), nil, nil)
	release := make(chan struct{})
	var running, most atomic.Int32
	if err := in.Add(job, "@every 100ms", func(ctx context.Context, _ schedule.Run) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		return nil
	}, &schedule.JobOptions{Overlap: schedule.OverlapLimit, Limit: 2}); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	awaitHistory(t, in, job, 30*time.Second, "two running and one skipped", func(r []driver.RunRecord) bool {
		return count(r, driver.OutcomeRunning) == 2 && count(r, driver.OutcomeSkipped) >= 1
	})
	close(release)
	in.stop(t)
	if m := most.Load(); m != 2 {
		t.Errorf("at most %d runs at once, want 2", m)
	}
}

// TestMisfire: ticks no instance claimed while none ran are recorded
// missed; with MisfireRunLatest the latest is run once when the job starts,
// with MisfireSkip it is not.
func TestMisfire(t *testing.T) {
	for _, tc := range []struct {
		name    string
		misfire schedule.Misfire
		runs    bool
	}{{"run latest", schedule.MisfireRunLatest, true}, {"skip", schedule.MisfireSkip, false}} {
		t.Run(tc.name, func(t *testing.T) {
			job, log := jobName(t), newRunLog()
			store := memstore.New()
			hourly := schedule.Every(time.Hour)
			latest := hourly.Prev(time.Now())
			// The last run anyone claimed was three hours before the latest tick.
			_, err := store.ClaimTick(context.Background(), driver.TickClaim{Job: job, Tick: latest.Add(-3 * time.Hour), Attempt: 1})
			if err != nil {
				t.Fatal(err)
			}
			in := newInstance(t, store, nil, nil)
			if err := in.Add(job, "@every 1h", log.fn(job, nil), &schedule.JobOptions{Misfire: tc.misfire}); err != nil {
				t.Fatal(err)
			}
			sentinel := newRunLog()
			if err := in.Add(job+"/sentinel", "@every 50ms", sentinel.fn("sentinel", nil), nil); err != nil {
				t.Fatal(err)
			}
			in.run(t)
			sentinel.await(t, 30*time.Second, "3 runs of another job", func(r []ran) bool { return len(r) >= 3 })
			if !tc.runs {
				if runs := log.all(); len(runs) != 0 {
					t.Errorf("MisfireSkip ran the missed tick %v", runs[0].run.Tick)
				}
				return
			}
			runs := log.await(t, 30*time.Second, "the latest tick's run", func(r []ran) bool { return len(r) >= 1 })
			if len(runs) != 1 || !runs[0].run.Tick.Equal(latest) {
				t.Fatalf("runs = %+v, want one, of the latest tick %v", runs, latest)
			}
			recs := awaitHistory(t, in, job, 30*time.Second, "the run recorded", func(r []driver.RunRecord) bool {
				return count(r, driver.OutcomeOK) == 1
			})
			var missed []time.Time
			for _, r := range recs {
				if r.Outcome == driver.OutcomeMissed {
					missed = append(missed, r.Tick)
				}
			}
			if len(missed) != 2 || !missed[0].Equal(latest.Add(-time.Hour)) || !missed[1].Equal(latest.Add(-2*time.Hour)) {
				t.Errorf("missed ticks recorded %v, want the two between the last claim and the latest tick", missed)
			}
		})
	}
}

// TestRetries: a failed run is attempted again within its tick's window,
// up to Retries more times; each attempt is recorded.
func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retries   int
		failFirst int
		want      []driver.Outcome // by attempt
	}{
		{"succeeds on the third attempt", 2, 2, []driver.Outcome{driver.OutcomeFailed, driver.OutcomeFailed, driver.OutcomeOK}},
		{"gives up after its retries", 1, 5, []driver.Outcome{driver.OutcomeFailed, driver.OutcomeFailed}},
		{"no retries", 0, 5, []driver.Outcome{driver.OutcomeFailed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, log := jobName(t), newRunLog()
			in := newInstance(t, memstore.New(), nil, nil)
			var first atomic.Int64 // the first tick run: the test looks at that one
			if err := in.Add(job, "@every 2s", log.fn("a", func(ctx context.Context, run schedule.Run) error {
				first.CompareAndSwap(0, run.Tick.UnixMilli())
				if run.Attempt <= tc.failFirst {
					return fmt.Errorf("attempt %d failed", run.Attempt)
				}
				return nil
			}), &schedule.JobOptions{Retries: tc.retries, RetryDelay: 20 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			in.run(t)
			// The tick after the first one ran proves the first tick's
			// attempts are over.
			log.await(t, 30*time.Second, "a later tick", func(r []ran) bool {
				return len(r) > 0 && r[len(r)-1].run.Tick.UnixMilli() != first.Load()
			})
			in.stop(t)
			var got []driver.Outcome
			recs := history(t, in, job)
			for i := len(recs) - 1; i >= 0; i-- {
				if r := recs[i]; r.Tick.UnixMilli() == first.Load() {
					if r.Attempt != len(got)+1 {
						t.Errorf("record %+v out of order", r)
					}
					got = append(got, r.Outcome)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("attempts of the first tick: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRetryNotPastWindow: a retry whose delay reaches the next tick is not
// claimed: the tick's window is over.
func TestRetryNotPastWindow(t *testing.T) {
	job, log := jobName(t), newRunLog()
	in := newInstance(t, memstore.New(), nil, nil)
	if err := in.Add(job, "@every 300ms", log.fn("a", func(ctx context.Context, run schedule.Run) error {
		return errors.New("always")
	}), &schedule.JobOptions{Retries: 3, RetryDelay: 400 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	log.await(t, 30*time.Second, "4 runs", func(r []ran) bool { return len(r) >= 4 })
	in.stop(t)
	for _, r := range log.all() {
		if r.run.Attempt != 1 {
			t.Errorf("tick %v ran attempt %d, after its window", r.run.Tick, r.run.Attempt)
		}
	}
}

// TestMaxRun: a run past MaxRun has its context cancelled (the hold lost
// with ReasonMaxHold) and is recorded cancelled; a function that ignores
// its context keeps running, but its lock stops being renewed, and another
// instance runs a later tick once the lease is over.
func TestMaxRun(t *testing.T) {
	job := jobName(t)
	store := memstore.New()
	copts := &leash.Options{Lease: time.Second}
	opts := &schedule.JobOptions{MaxRun: 300 * time.Millisecond}
	hung, log := newRunLog(), newRunLog()
	release := make(chan struct{})
	defer close(release)
	a := newInstance(t, store, copts, nil)
	if err := a.Add(job, "@every 100ms", log.fn("a", func(ctx context.Context, run schedule.Run) error {
		<-ctx.Done()
		hung.add(ran{who: "a", run: run, canceled: context.Cause(ctx)})
		<-release // hangs past its cancellation
		return ctx.Err()
	}), opts); err != nil {
		t.Fatal(err)
	}
	a.run(t)
	first := hung.await(t, 30*time.Second, "a run cancelled", func(r []ran) bool { return len(r) > 0 })[0]
	var lost *leash.LostError
	if !errors.As(first.canceled, &lost) || lost.Reason != leash.ReasonMaxHold {
		t.Errorf("cancelled run's cause = %v, want a LostError with ReasonMaxHold", first.canceled)
	}
	b := newInstance(t, store, copts, nil)
	other := newRunLog()
	if err := b.Add(job, "@every 100ms", other.fn("b", nil), opts); err != nil {
		t.Fatal(err)
	}
	b.run(t)
	runs := other.await(t, 30*time.Second, "a run on the other instance while the first hangs", func(r []ran) bool { return len(r) > 0 })
	if runs[0].run.Fence <= first.run.Fence {
		t.Errorf("other instance's fence %d, want above the hung run's %d", runs[0].run.Fence, first.run.Fence)
	}
	b.stop(t)
}

// TestMaxRunRecordsCancelled: a run that honours its context ends when
// MaxRun passes and is recorded cancelled, saying why.
func TestMaxRunRecordsCancelled(t *testing.T) {
	job := jobName(t)
	in := newInstance(t, memstore.New(), nil, nil)
	if err := in.Add(job, "@every 1s", func(ctx context.Context, run schedule.Run) error {
		<-ctx.Done()
		return ctx.Err()
	}, &schedule.JobOptions{MaxRun: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	recs := awaitHistory(t, in, job, 30*time.Second, "a run cancelled", func(r []driver.RunRecord) bool {
		return count(r, driver.OutcomeCancelled) > 0
	})
	for _, r := range recs {
		if r.Outcome == driver.OutcomeCancelled && !strings.Contains(r.Error, "MaxRun (100ms) passed") {
			t.Errorf("cancelled record says %q, want MaxRun", r.Error)
		}
	}
}

// TestMaxRunThenNilIsNotRetried: a run past its MaxRun whose function then
// returns nil went on without its lock, and did its work: it is recorded
// lost, and its retries are not used (each would run the tick again). One
// that returns its ctx's error is recorded cancelled and retried.
func TestMaxRunThenNilIsNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ret      func(ctx context.Context) error
		want     driver.Outcome
		attempts int // of the first tick, before the next tick runs
	}{
		{"returns nil", func(context.Context) error { return nil }, driver.OutcomeLost, 1},
		{"returns its ctx's error", func(ctx context.Context) error { return context.Cause(ctx) }, driver.OutcomeCancelled, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, log := jobName(t), newRunLog()
			in := newInstance(t, memstore.New(), nil, nil)
			if err := in.Add(job, "@every 2s", log.fn("a", func(ctx context.Context, run schedule.Run) error {
				<-ctx.Done() // past MaxRun
				return tc.ret(ctx)
			}), &schedule.JobOptions{MaxRun: 100 * time.Millisecond, Retries: 1, RetryDelay: 10 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			in.run(t)
			// A retry is claimed 10ms after its attempt ended, well before
			// the next tick, 2s after the first: by the time the next tick
			// has run, so has any retry of the first.
			attempts := func(r []ran) int {
				n := 0
				for _, x := range r {
					if x.run.Tick.Equal(r[0].run.Tick) {
						n++
					}
				}
				return n
			}
			runs := log.await(t, 30*time.Second, "the first tick's attempts and a run of a later tick", func(r []ran) bool {
				return len(r) > 0 && r[len(r)-1].run.Tick.After(r[0].run.Tick) && attempts(r) >= tc.attempts
			})
			in.stop(t)
			first, n := runs[0].run.Tick, attempts(runs)
			if n != tc.attempts {
				t.Errorf("tick %v ran %d times, want %d", first, n, tc.attempts)
			}
			if rec := recordOf(t, history(t, in, job), first); rec.Outcome != tc.want {
				t.Errorf("record of the first attempt = %v (%s), want %v", rec.Outcome, rec.Error, tc.want)
			}
		})
	}
}

// TestLivenessCatchesHungRun: a run that stops touching its Run for longer
// than Liveness has its context cancelled (ReasonStalled) and is recorded
// lost; one that touches runs to its end.
func TestLivenessCatchesHungRun(t *testing.T) {
	job, log := jobName(t), newRunLog()
	in := newInstance(t, memstore.New(), nil, nil)
	if err := in.Add(job, "@every 1s", log.fn("a", func(ctx context.Context, run schedule.Run) error {
		if run.Tick.Unix()%2 == 0 {
			for range 6 { // alive: touches every 50ms for 300ms
				run.Touch()
				time.Sleep(50 * time.Millisecond) // the job's work
			}
			return nil
		}
		<-ctx.Done() // hung: never touches
		return ctx.Err()
	}), &schedule.JobOptions{Liveness: 500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	runs := log.await(t, 30*time.Second, "a touching and a hung run", func(r []ran) bool { return len(r) >= 2 })
	in.stop(t)
	recs := history(t, in, job)
	for _, r := range runs[:2] {
		var want driver.Outcome = driver.OutcomeOK
		var lost *leash.LostError
		if r.run.Tick.Unix()%2 != 0 {
			want = driver.OutcomeLost
			if !errors.As(r.canceled, &lost) || lost.Reason != leash.ReasonStalled {
				t.Errorf("hung run's cause = %v, want ReasonStalled", r.canceled)
			}
		}
		if rec := recordOf(t, recs, r.run.Tick); rec.Outcome != want {
			t.Errorf("record of tick %v = %v (%s), want %v", r.run.Tick, rec.Outcome, rec.Error, want)
		}
	}
}

// TestShutdown: Run's ctx ending lets a running job finish within the
// grace; with NoGrace the job's context is cancelled (ErrShutdown), its end
// recorded cancelled, and its lock handed back at once. A function that
// returns nil all the same did its work: its run is recorded ok, which no
// retry follows (an instance started next, in a rolling deploy, would
// otherwise run the tick again).
func TestShutdown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		grace   time.Duration
		ignores bool // the function returns nil when its ctx ends
		want    driver.Outcome
	}{
		{"grace lets the run finish", 0, false, driver.OutcomeOK},
		{"no grace cancels the run", schedule.NoGrace, false, driver.OutcomeCancelled},
		{"a run that returns nil when cancelled did its work", schedule.NoGrace, true, driver.OutcomeOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, log := jobName(t), newRunLog()
			store := memstore.New()
			in := newInstance(t, store, nil, &schedule.Options{Grace: tc.grace})
			started := make(chan struct{}, 1)
			if err := in.Add(job, "@every 5s", log.fn("a", func(ctx context.Context, run schedule.Run) error {
				started <- struct{}{}
				select {
				case <-ctx.Done():
					if tc.ignores {
						return nil
					}
					return ctx.Err()
				case <-time.After(200 * time.Millisecond): // the job's work
					return nil
				}
			}), &schedule.JobOptions{Misfire: schedule.MisfireRunLatest, Retries: 1}); err != nil {
				t.Fatal(err)
			}
			in.run(t)
			<-started
			in.stop(t)
			runs := log.all()
			if len(runs) != 1 {
				t.Fatalf("%d runs ended by the time Run returned, want 1", len(runs))
			}
			if tc.want == driver.OutcomeCancelled && !errors.Is(runs[0].canceled, schedule.ErrShutdown) {
				t.Errorf("cancelled run's cause = %v, want ErrShutdown", runs[0].canceled)
			}
			if rec := recordOf(t, history(t, in, job), runs[0].run.Tick); rec.Outcome != tc.want {
				t.Errorf("record = %v (%s), want %v", rec.Outcome, rec.Error, tc.want)
			} else if rec.Outcome.Retryable() != (tc.want == driver.OutcomeCancelled) {
				t.Errorf("record %v retryable = %v", rec.Outcome, rec.Outcome.Retryable())
			}
			h, err := newClient(t, store, nil).Mutex(job).TryLock(context.Background())
			if err != nil {
				t.Fatalf("the job's lock after Run returned: %v, want it free", err)
			}
			h.Unlock(context.Background())
		})
	}
}

// TestAddRemoveWhileRunning: a job added to a running scheduler runs; one
// removed runs no more.
func TestAddRemoveWhileRunning(t *testing.T) {
	job, log := jobName(t), newRunLog()
	in := newInstance(t, memstore.New(), nil, nil)
	sentinel := newRunLog()
	if err := in.Add(job+"/sentinel", "@every 50ms", sentinel.fn("sentinel", nil), nil); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	if err := in.Add(job, "@every 50ms", log.fn("a", nil), nil); err != nil {
		t.Fatal(err)
	}
	log.await(t, 30*time.Second, "2 runs of the added job", func(r []ran) bool { return len(r) >= 2 })
	if !in.Remove(job) || in.Remove(job) {
		t.Fatal("Remove: want true, then false")
	}
	n := len(log.all())
	s := len(sentinel.all())
	sentinel.await(t, 30*time.Second, "4 more sentinel runs", func(r []ran) bool { return len(r) >= s+4 })
	if got := len(log.all()); got > n+1 { // one tick may have been in flight
		t.Errorf("removed job ran %d more times", got-n)
	}
	if err := in.Add(job, "@every 50ms", log.fn("a", nil), nil); err != nil {
		t.Errorf("Add after Remove: %v", err)
	}
	in.stop(t)
	if err := in.Run(context.Background()); !errors.Is(err, schedule.ErrRunning) {
		t.Errorf("second Run = %v, want ErrRunning", err)
	}
}

// unheardStore is a store whose first granted tick claim the claimer does
// not hear of: with resend false, its answer is an error, as when a
// connection drops after the server ran the script (the outcome is unknown
// to the claimer); with resend true, the store's client sends the claim
// again by itself, as go-redis resends a script after a dropped connection
// lost its reply, and the claimer sees only the resend's answer, the tick
// taken by its own claim, and no error.
type unheardStore struct {
	*memstore.Store
	resend bool
	hit    atomic.Bool
}

func (s *unheardStore) ClaimTick(ctx context.Context, c driver.TickClaim) (driver.TickResult, error) {
	r, err := s.Store.ClaimTick(ctx, c)
	if err == nil && r.Status == driver.ClaimGranted && s.hit.CompareAndSwap(false, true) {
		if s.resend {
			return s.Store.ClaimTick(ctx, c)
		}
		return driver.TickResult{}, errors.New("connection reset after the claim was sent")
	}
	return r, err
}

// TestClaimGrantedUnheardIsRun: a claim whose grant the claimer did not
// hear of (its answer lost, and the claim sent again; or resent by the
// store's client) is run by the instance that finds its own claim of the
// tick there, rather than leaving a claimed tick unrun.
func TestClaimGrantedUnheardIsRun(t *testing.T) {
	for _, resend := range []bool{false, true} {
		name := "answer lost"
		if resend {
			name = "resent by the client"
		}
		t.Run(name, func(t *testing.T) {
			job, log := jobName(t), newRunLog()
			store := &unheardStore{Store: memstore.New(), resend: resend}
			in := newInstance(t, store, nil, nil)
			if err := in.Add(job, "@every 100ms", log.fn("a", nil), nil); err != nil {
				t.Fatal(err)
			}
			in.run(t)
			runs := log.await(t, 30*time.Second, "2 runs", func(r []ran) bool { return len(r) >= 2 })
			in.stop(t)
			if !store.hit.Load() {
				t.Fatal("no claim was granted unheard")
			}
			recs := history(t, in, job)
			first := recs[len(recs)-1]
			if !runs[0].run.Tick.Equal(first.Tick) || first.Outcome != driver.OutcomeOK {
				t.Errorf("first claim (%s) = %+v; first run tick %v; want that tick run, ok", name, first, runs[0].run.Tick)
			}
		})
	}
}

// TestUserDataAtTheJobsName: a job whose name holds an application's data
// (a string where its run lock would be) is claimed, its run refused before
// the function is called, and recorded failed saying what is there; the
// data is left as it was.
func TestUserDataAtTheJobsName(t *testing.T) {
	job := jobName(t)
	store := redisStore(t)
	rdb := store.Redis()
	ctx := context.Background()
	if err := rdb.Set(ctx, job, "the application's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(context.Background(), job) })
	in := newInstance(t, store, nil, nil)
	called := atomic.Bool{}
	if err := in.Add(job, "@every 100ms", func(context.Context, schedule.Run) error { called.Store(true); return nil }, nil); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	recs := awaitHistory(t, in, job, 30*time.Second, "a failed run", func(r []driver.RunRecord) bool {
		return count(r, driver.OutcomeFailed) > 0
	})
	in.stop(t)
	if called.Load() {
		t.Error("the job's function ran without its lock")
	}
	for _, r := range recs {
		if r.Outcome == driver.OutcomeFailed && !strings.Contains(r.Error, "not a lock") {
			t.Errorf("failed record says %q, want what the name holds", r.Error)
		}
	}
	if v, err := rdb.Get(ctx, job).Result(); err != nil || v != "the application's" {
		t.Errorf("the application's key = %q, %v; want it unchanged", v, err)
	}
}

// TestManyJobsCostNoGoroutines: jobs waiting for their next tick cost no
// goroutine each: the Scheduler's dispatcher is one timer for all of them.
func TestManyJobsCostNoGoroutines(t *testing.T) {
	in := newInstance(t, memstore.New(), nil, nil)
	nop := func(context.Context, schedule.Run) error { return nil }
	for i := range 10000 {
		if err := in.Add(fmt.Sprintf("job/%d", i), "@every 1h", nop, nil); err != nil {
			t.Fatal(err)
		}
	}
	before := runtime.NumGoroutine()
	in.run(t)
	sentinel := newRunLog()
	if err := in.Add("sentinel", "@every 50ms", sentinel.fn("sentinel", nil), nil); err != nil {
		t.Fatal(err)
	}
	sentinel.await(t, 30*time.Second, "2 sentinel runs", func(r []ran) bool { return len(r) >= 2 })
	if n := runtime.NumGoroutine(); n > before+20 {
		t.Errorf("%d goroutines with 10,000 jobs waiting, %d before Run: want a handful more, not one per job", n, before)
	}
}

// TestRetryOnAnotherInstance: an instance that finds a failed attempt of
// the tick it claims (its clock runs behind) claims the retry itself, so
// the retry is run even when the instance that failed gives up (here it has
// no retries of its own).
func TestRetryOnAnotherInstance(t *testing.T) {
	job, log := jobName(t), newRunLog()
	store := memstore.New()
	a := newInstance(t, store, nil, nil)
	if err := a.Add(job, "@every 1s", log.fn("a", func(context.Context, schedule.Run) error {
		return errors.New("a fails")
	}), nil); err != nil {
		t.Fatal(err)
	}
	b := newInstance(t, store, nil, &schedule.Options{Now: offset(-300 * time.Millisecond)})
	if err := b.Add(job, "@every 1s", log.fn("b", nil), &schedule.JobOptions{Retries: 1, RetryDelay: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	a.run(t)
	b.run(t)
	runs := log.await(t, 30*time.Second, "a retry on b", func(r []ran) bool {
		return slices.ContainsFunc(r, func(x ran) bool { return x.who == "b" && x.run.Attempt == 2 })
	})
	a.stop(t)
	b.stop(t)
	for _, r := range runs {
		if r.who == "b" && r.run.Attempt == 2 {
			rec := recordOf(t, history(t, a, job), r.run.Tick)
			if rec.Outcome != driver.OutcomeFailed {
				t.Errorf("attempt 1 of tick %v = %+v, want a's failure", r.run.Tick, rec)
			}
			break
		}
	}
}

// failingStore fails the first tick claim after arm with an error, without
// sending it (a connection that could not be made): the claimer cannot
// tell whether it reached the store. It tells on claimed the verdict of the
// claim sent after that failure.
type failingStore struct {
	*memstore.Store
	armed   atomic.Bool
	failed  atomic.Bool
	claimed chan driver.TickResult
}

func (s *failingStore) ClaimTick(ctx context.Context, c driver.TickClaim) (driver.TickResult, error) {
	if s.armed.CompareAndSwap(true, false) {
		s.failed.Store(true)
		return driver.TickResult{}, errors.New("dial tcp: connection refused")
	}
	r, err := s.Store.ClaimTick(ctx, c)
	if s.failed.CompareAndSwap(true, false) {
		s.claimed <- r
	}
	return r, err
}

// TestReAddedJobDoesNotRerunItsTick: a job removed and added again on the
// same instance (as leash cron's reload does with a changed job) with
// MisfireRunLatest claims its latest tick again; when that claim's first
// try fails, the tick is found claimed by this instance's Client, but by an
// earlier claim, which already ran it: it must not run again.
func TestReAddedJobDoesNotRerunItsTick(t *testing.T) {
	job, log := jobName(t), newRunLog()
	store := &failingStore{Store: memstore.New(), claimed: make(chan driver.TickResult, 1)}
	in := newInstance(t, store, nil, nil)
	opts := &schedule.JobOptions{Misfire: schedule.MisfireRunLatest}
	if err := in.Add(job, "@every 1h", log.fn("first", nil), opts); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	runs := log.await(t, 30*time.Second, "the latest tick's run", func(r []ran) bool { return len(r) >= 1 })
	in.Remove(job)
	store.armed.Store(true)
	if err := in.Add(job, "@every 1h", log.fn("again", nil), opts); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-store.claimed:
		if r.Status != driver.ClaimTaken {
			t.Errorf("claim after the failure: %v, want taken", r.Status)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no claim after the failed one")
	}
	in.stop(t)
	for _, r := range log.all()[1:] {
		t.Errorf("tick %v (run by %q) ran again, as %q attempt %d", runs[0].run.Tick, runs[0].who, r.who, r.run.Attempt)
	}
}

// TestChangedScheduleReportsNoMissedTicks: the first claim under a changed
// schedule (leash cron's reload of a job whose schedule changed) finds the
// claim before it made under the old one; the new schedule's ticks between
// the two were never the job's ticks, so none is recorded missed, and the
// records of the runs before are kept.
func TestChangedScheduleReportsNoMissedTicks(t *testing.T) {
	job, log := jobName(t), newRunLog()
	in := newInstance(t, memstore.New(), nil, nil)
	if err := in.Add(job, "@every 1h", log.fn("hourly", nil), &schedule.JobOptions{Misfire: schedule.MisfireRunLatest}); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	hourly := log.await(t, 30*time.Second, "the latest hourly tick's run", func(r []ran) bool { return len(r) >= 1 })[0]
	in.Remove(job)
	if err := in.Add(job, "@every 100ms", log.fn("often", nil), nil); err != nil {
		t.Fatal(err)
	}
	log.await(t, 30*time.Second, "a run under the new schedule", func(r []ran) bool { return len(r) >= 2 })
	in.stop(t)
	recs := history(t, in, job)
	if n := count(recs, driver.OutcomeMissed); n > 0 {
		t.Errorf("%d ticks recorded missed after the schedule changed, the oldest saying %q", n, recs[len(recs)-1].Error)
	}
	if i := slices.IndexFunc(recs, func(r driver.RunRecord) bool { return r.Tick.Equal(hourly.run.Tick) }); i < 0 || recs[i].Outcome != driver.OutcomeOK {
		t.Errorf("the hourly run of %v is not recorded ok among the %d records kept", hourly.run.Tick, len(recs))
	}
}

// TestMissedTicksKeepTheRunsRecord: the claim that finds more ticks missed
// than the history keeps records them below its own record, not above it:
// the run it claimed stays recorded and its end is told.
func TestMissedTicksKeepTheRunsRecord(t *testing.T) {
	job, log := jobName(t), newRunLog()
	in := newInstance(t, memstore.New(), nil, &schedule.Options{Keep: 5})
	if err := in.Add(job, "@every 20ms", log.fn("a", nil), nil); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	first := log.await(t, 30*time.Second, "a run", func(r []ran) bool { return len(r) >= 1 })[0]
	in.Remove(job)
	// Wait until more ticks than Keep have passed unclaimed.
	for time.Now().Before(first.run.Tick.Add(20 * 20 * time.Millisecond)) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := in.Add(job, "@every 20ms", log.fn("b", nil), nil); err != nil {
		t.Fatal(err)
	}
	var later ran
	log.await(t, 30*time.Second, "a run after the gap", func(r []ran) bool {
		i := slices.IndexFunc(r, func(x ran) bool { return x.who == "b" })
		if i >= 0 {
			later = r[i]
		}
		return i >= 0
	})
	in.stop(t)
	recs := history(t, in, job)
	i := slices.IndexFunc(recs, func(r driver.RunRecord) bool { return r.Tick.Equal(later.run.Tick) && r.Attempt == 1 })
	if i < 0 || recs[i].Outcome != driver.OutcomeOK {
		var got []string
		for _, r := range recs {
			got = append(got, r.Tick.Format("15:04:05.000")+" "+r.Outcome.String())
		}
		t.Errorf("the run of %v after the gap is not recorded ok; the history: %v", later.run.Tick.Format("15:04:05.000"), got)
	}
}

// slowHandBack is a store on which the first release of the job's lock by
// the Client slow waits until a later attempt of its tick was granted and
// then refused the lock: the failed attempt is still handing its lock back
// when the retry comes for it.
type slowHandBack struct {
	*memstore.Store
	job        string
	slow       atomic.Value // the client id whose release is slow
	retried    atomic.Bool  // attempt 2 was granted
	refused    chan struct{}
	refuseOnce sync.Once
	slowOnce   atomic.Bool
}

func (s *slowHandBack) ClaimTick(ctx context.Context, c driver.TickClaim) (driver.TickResult, error) {
	r, err := s.Store.ClaimTick(ctx, c)
	if err == nil && r.Status == driver.ClaimGranted && c.Attempt == 2 {
		s.retried.Store(true)
	}
	return r, err
}

func (s *slowHandBack) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	g, err := s.Store.Acquire(ctx, req)
	if err == nil && !g.Acquired && req.Name == s.job && s.retried.Load() {
		s.refuseOnce.Do(func() { close(s.refused) })
	}
	return g, err
}

func (s *slowHandBack) Release(ctx context.Context, req driver.Request) error {
	if req.Name == s.job && driver.OwnerClient(req.Owner) == s.slow.Load() && s.slowOnce.CompareAndSwap(false, true) {
		<-s.refused
	}
	return s.Store.Release(ctx, req)
}

// TestRetryWaitsForTheFailedAttemptsLock: a retry claimed on another
// instance while the failed attempt is still handing its lock back waits
// for the lock instead of being recorded skipped (which would end the
// tick's retries: its run lost to its own failed attempt).
func TestRetryWaitsForTheFailedAttemptsLock(t *testing.T) {
	job, log := jobName(t), newRunLog()
	store := &slowHandBack{Store: memstore.New(), job: job, refused: make(chan struct{})}
	opts := &schedule.JobOptions{Retries: 1, RetryDelay: 10 * time.Millisecond}
	a := newInstance(t, store, nil, nil)
	// b's clock is far enough behind that a's failure is recorded when b
	// claims the tick.
	if err := a.Add(job, "@every 4s", log.fn("a", func(context.Context, schedule.Run) error { return errors.New("a fails") }), opts); err != nil {
		t.Fatal(err)
	}
	store.slow.Store(a.client.ID())
	b := newInstance(t, store, nil, &schedule.Options{Now: offset(-2 * time.Second)})
	if err := b.Add(job, "@every 4s", log.fn("b", nil), opts); err != nil {
		t.Fatal(err)
	}
	a.run(t)
	b.run(t)
	t.Cleanup(func() { store.refuseOnce.Do(func() { close(store.refused) }) }) // before the instances stop
	select {
	case <-store.refused:
	case <-time.After(60 * time.Second):
		t.Fatal("no retry came for the lock while the failed attempt held it")
	}
	recs := awaitHistory(t, a, job, 30*time.Second, "attempt 2 ended", func(r []driver.RunRecord) bool {
		return slices.ContainsFunc(r, func(x driver.RunRecord) bool { return x.Attempt == 2 && !x.Ended.IsZero() })
	})
	a.stop(t)
	b.stop(t)
	i := slices.IndexFunc(recs, func(x driver.RunRecord) bool { return x.Attempt == 2 })
	if recs[i].Outcome != driver.OutcomeOK {
		t.Errorf("attempt 2 of tick %v = %v (%s), want ok: the retry was lost to its own failed attempt's lock", recs[i].Tick, recs[i].Outcome, recs[i].Error)
	}
}
