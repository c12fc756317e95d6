package schedule_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/schedule"
)

// skewX is how far the skewed instances' clocks are off: one runs skewX
// behind the store's clock, one on it, one skewX ahead.
const skewX = 400 * time.Millisecond

var skews = []time.Duration{-skewX, 0, skewX}

// tickCheck is what the skew tests check of a job's history and of the
// calls its function saw.
type tickCheck struct {
	twice  []time.Time // ticks run more than once
	missed []time.Time // ticks between the first and last run that never ran
	early  []string    // runs claimed earlier than the tolerance before their tick, by the store's clock
}

// checkTicks checks the runs of an every-second job: each tick between the
// first and the last run ran exactly once, none was claimed early.
func checkTicks(runs []ran, recs []driver.RunRecord, every time.Duration, tolerance time.Duration) tickCheck {
	var c tickCheck
	count := map[int64]int{}
	var first, last time.Time
	for _, r := range runs {
		tk := r.run.Tick
		count[tk.UnixMilli()]++
		if count[tk.UnixMilli()] == 2 {
			c.twice = append(c.twice, tk)
		}
		if first.IsZero() || tk.Before(first) {
			first = tk
		}
		if tk.After(last) {
			last = tk
		}
	}
	for tk := first; !tk.After(last); tk = tk.Add(every) {
		if count[tk.UnixMilli()] == 0 {
			c.missed = append(c.missed, tk)
		}
	}
	for _, r := range recs {
		if r.Outcome != driver.OutcomeMissed && r.Started.Before(r.Tick.Add(-tolerance)) {
			c.early = append(c.early, fmt.Sprintf("tick %v claimed at %v (store clock) by pid %d client %s",
				r.Tick.Format("15:04:05.000"), r.Started.Format("15:04:05.000"), r.PID, r.Client))
		}
	}
	return c
}

// TestSkewedClocksRunEachTickOnce is the skew test: three instances whose
// clocks are off by -X, 0 and +X (X = 400ms) run one job every second on a
// real Redis for 61 ticks. Every tick between the first and the last ran
// exactly once, none was claimed earlier than the tolerance before its
// instant by the store's clock, none was missed, and the history agrees
// with what the job's functions saw.
func TestSkewedClocksRunEachTickOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for a minute")
	}
	const ticks = 61
	job := jobName(t)
	log := newRunLog()
	var ins []*instance
	for i, skew := range skews {
		in := newInstance(t, redisStore(t), nil, &schedule.Options{Now: offset(skew), Keep: 2 * ticks})
		who := fmt.Sprintf("instance %d (clock %+v)", i, skew)
		if err := in.Add(job, "@every 1s", log.fn(who, nil), nil); err != nil {
			t.Fatal(err)
		}
		ins = append(ins, in)
	}
	for _, in := range ins {
		in.run(t)
	}
	log.await(t, 3*ticks*time.Second, fmt.Sprintf("%d runs", ticks), func(r []ran) bool { return len(r) >= ticks })
	for _, in := range ins {
		in.stop(t)
	}
	runs := log.all()
	recs := history(t, ins[0], job)
	c := checkTicks(runs, recs, time.Second, schedule.DefaultTolerance)
	if len(c.twice) > 0 || len(c.missed) > 0 || len(c.early) > 0 {
		t.Errorf("%d runs: ticks run twice %v, missed %v, claimed early %v", len(runs), c.twice, c.missed, c.early)
	}
	byWho := map[string]int{}
	for _, r := range runs {
		byWho[r.who]++
	}
	t.Logf("%d runs: %v", len(runs), byWho)
	// The history says the same: one record per tick run, each ok, none
	// missed.
	recorded := map[int64]driver.RunRecord{}
	for _, r := range recs {
		if r.Outcome != driver.OutcomeOK {
			t.Errorf("record %+v: outcome %v, want ok", r, r.Outcome)
		}
		recorded[r.Tick.UnixMilli()] = r
	}
	for _, r := range runs {
		if rec, ok := recorded[r.run.Tick.UnixMilli()]; !ok || rec.Fence != r.run.Fence {
			t.Errorf("run of tick %v (fence %d) recorded as %+v", r.run.Tick, r.run.Fence, rec)
		}
	}
}

// TestSkewCheckerCatchesShedLockStyleDuplicates is the skew test's negative
// control: three instances with the same skewed clocks, each taking a lock
// at its own tick time and keeping it a fixed at-least time (ShedLock's
// lockAtLeastFor, leash run's --at-least), run some ticks twice, and the
// checker says so.
func TestSkewCheckerCatchesShedLockStyleDuplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	const atLeast = 500 * time.Millisecond // a usual choice: a bit under the interval
	job := jobName(t)
	store := redisStore(t)
	every := schedule.Every(time.Second)
	log := newRunLog()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i, skew := range skews {
		c := newClient(t, store, nil)
		now := offset(skew)
		who := fmt.Sprintf("instance %d (clock %+v)", i, skew)
		// Owned by the test: one instance's local timer loop, until ctx ends.
		wg.Go(func() {
			for tick := every.Next(now()); ctx.Err() == nil; tick = every.Next(tick) {
				timer := time.NewTimer(tick.Sub(now()))
				select {
				case <-ctx.Done():
					timer.Stop()
					return
				case <-timer.C:
				}
				h, err := c.Mutex(job).TryLock(ctx)
				if err != nil {
					continue // someone holds it: ShedLock skips
				}
				log.add(ran{who: who, run: schedule.Run{Job: job, Tick: tick, Fence: h.Fence()}, at: time.Now()})
				_ = h.UnlockAfter(context.WithoutCancel(ctx), atLeast)
			}
		})
	}
	runs := log.await(t, 60*time.Second, "a tick run twice", func(r []ran) bool {
		return len(checkTicks(r, nil, time.Second, 0).twice) > 0
	})
	cancel()
	wg.Wait()
	t.Logf("ShedLock-style, clocks %v apart, at-least %v: ticks run twice %v", skews, atLeast, checkTicks(runs, nil, time.Second, 0).twice)
}

// TestSkewCheckerCatchesEarlyClaims is the other negative control: with a
// tolerance of an hour, the instance whose clock runs ahead claims each
// tick when its own clock says so, before the store's clock reaches it, and
// the checker sees it.
func TestSkewCheckerCatchesEarlyClaims(t *testing.T) {
	job := jobName(t)
	log := newRunLog()
	in := newInstance(t, redisStore(t), nil, &schedule.Options{Now: offset(skewX), Tolerance: time.Hour})
	if err := in.Add(job, "@every 1s", log.fn("ahead", nil), nil); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	log.await(t, 30*time.Second, "2 runs", func(r []ran) bool { return len(r) >= 2 })
	in.stop(t)
	if c := checkTicks(log.all(), history(t, in, job), time.Second, schedule.DefaultTolerance); len(c.early) == 0 {
		t.Errorf("the checker found no early claim by an instance %v ahead with a tolerance of an hour", skewX)
	}
}

// TestLateInstanceRunsNothing: an instance whose clock is behind the store's
// by more than the job's Lateness claims no tick (each is late, or already
// claimed by the instance on time), and the instance on time runs every
// tick.
func TestLateInstanceRunsNothing(t *testing.T) {
	job := jobName(t)
	store := redisStore(t)
	log := newRunLog()
	opts := &schedule.JobOptions{Lateness: 200 * time.Millisecond}
	late := newInstance(t, store, nil, &schedule.Options{Now: offset(-600 * time.Millisecond)})
	if err := late.Add(job, "@every 500ms", log.fn("late", nil), opts); err != nil {
		t.Fatal(err)
	}
	late.run(t)
	// Its claims are late by the store's clock, or find the tick taken by
	// the instance on time.
	onTime := newInstance(t, store, nil, nil)
	if err := onTime.Add(job, "@every 500ms", log.fn("on time", nil), opts); err != nil {
		t.Fatal(err)
	}
	onTime.run(t)
	runs := log.await(t, 30*time.Second, "4 runs", func(r []ran) bool { return len(r) >= 4 })
	late.stop(t)
	onTime.stop(t)
	for _, r := range runs {
		if r.who == "late" {
			t.Errorf("the instance %v behind ran tick %v", 600*time.Millisecond, r.run.Tick)
		}
	}
}
