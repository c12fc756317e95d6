package gocronleash_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/gocronleash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

var shared testserver.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close()
	os.Exit(code)
}

// newClient returns a leash Client of its own on the redis-server.
func newClient(t *testing.T, addr string) *leash.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := leash.New(redisstore.New(rdb, nil), &leash.Options{Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// offsetClock is the real clock set off by a fixed amount, as a host's
// clock may be: timers run for real durations, Now reads off.
type offsetClock struct {
	clockwork.Clock
	off time.Duration
}

func (c offsetClock) Now() time.Time                  { return time.Now().Add(c.off) }
func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c offsetClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

const skew = 400 * time.Millisecond

// jobName is a job name of the test's own, new on every run (-count), so
// that no tick of it was claimed before.
func jobName(t *testing.T) string { return fmt.Sprintf("test/%s/%d", t.Name(), time.Now().UnixNano()) }

// runs records which instance ran which tick.
type runs struct {
	mu sync.Mutex
	by map[int64][]string
}

func (r *runs) add(tick time.Time, who string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.by[tick.UnixNano()] = append(r.by[tick.UnixNano()], who)
}

func (r *runs) ticks() (n, twice int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, who := range r.by {
		n++
		if len(who) > 1 {
			twice++
		}
	}
	return n, twice
}

// skewedSchedulers runs the job name every second on three gocron
// schedulers whose clocks are -skew, 0 and +skew, each with a Locker made
// by locker, until 8 ticks ran; the job takes 50ms and records its tick as
// the Locker's run says or, without one, as its own clock says.
func skewedSchedulers(t *testing.T, name string, locker func(c *leash.Client, now func() time.Time) *gocronleash.Locker) *runs {
	addr := shared.Redis(t).Addr
	r := &runs{by: map[int64][]string{}}
	var scheds []gocron.Scheduler
	for i, off := range []time.Duration{-skew, 0, skew} {
		clock := offsetClock{Clock: clockwork.NewRealClock(), off: off}
		l := locker(newClient(t, addr), clock.Now)
		who := []string{"behind", "on", "ahead"}[i]
		s, err := gocron.NewScheduler(gocron.WithClock(clock), gocron.WithDistributedLocker(l))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(l.Task(name, func(ctx context.Context) error {
			tick := clock.Now().Truncate(time.Second)
			if run, ok := gocronleash.RunOf(ctx); ok && !run.Tick.IsZero() {
				tick = run.Tick
			}
			r.add(tick, who)
			time.Sleep(50 * time.Millisecond) // the job's work
			return nil
		})), gocron.WithName(name))
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
	}
	for _, s := range scheds {
		s.Start()
	}
	deadline := time.Now().Add(2 * time.Minute)
	for n, _ := r.ticks(); n < 8; n, _ = r.ticks() {
		if time.Now().After(deadline) {
			t.Fatalf("8 ticks did not run within 2 minutes (%d did)", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, s := range scheds {
		if err := s.Shutdown(); err != nil {
			t.Error(err)
		}
	}
	return r
}

// TestLockerClaimsTicksUnderSkew: three gocron schedulers with clocks
// -400ms, 0 and +400ms apart, with Lockers that know the job's schedule:
// each tick ran once, and the store's history has each as one ok run.
func TestLockerClaimsTicksUnderSkew(t *testing.T) {
	t.Parallel()
	name := jobName(t)
	var js driver.JobStore
	r := skewedSchedulers(t, name, func(c *leash.Client, now func() time.Time) *gocronleash.Locker {
		js = c.Store().(driver.JobStore)
		l, err := gocronleash.NewLocker(c, &gocronleash.Options{Schedules: map[string]string{name: "* * * * * *"}, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
	n, twice := r.ticks()
	if twice != 0 {
		t.Errorf("%d of %d ticks ran more than once: %v", twice, n, r.by)
	}
	st, err := js.History(context.Background(), name, 0)
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, rec := range st.Runs {
		if rec.Outcome == driver.OutcomeOK {
			ok++
			if rec.Fence == 0 || rec.Started.Before(rec.Tick.Add(-10*time.Millisecond)) {
				t.Errorf("run %+v: no fence, or started before its tick by the store's clock", rec)
			}
		}
	}
	if st.Spec != "* * * * * *" {
		t.Errorf("the store keeps the schedule %q", st.Spec)
	}
	if ok < n {
		t.Errorf("the history has %d ok runs, the job ran %d ticks", ok, n)
	}
}

// TestLockerWithoutTicksRunsTwiceUnderSkew is the negative control: the
// same schedulers with Lockers that know no schedule (a lock per job name,
// which is all gocron's Locker interface carries) run ticks more than once.
func TestLockerWithoutTicksRunsTwiceUnderSkew(t *testing.T) {
	t.Parallel()
	name := jobName(t)
	r := skewedSchedulers(t, name, func(c *leash.Client, now func() time.Time) *gocronleash.Locker {
		l, err := gocronleash.NewLocker(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
	if n, twice := r.ticks(); twice == 0 {
		t.Errorf("no tick ran twice in %d: the control shows nothing the tick claims prevent", n)
	}
}

// TestLateHostSkipsTick: a host that fires a tick after another host ran it
// and unlocked gets ErrTickTaken; with a plain lock it would run it again.
func TestLateHostSkipsTick(t *testing.T) {
	addr := shared.Redis(t).Addr
	ctx := context.Background()
	name := jobName(t)
	tick := time.Now().Truncate(time.Hour)
	at := func(d time.Duration) func() time.Time { return func() time.Time { return tick.Add(d) } }
	opts := func(now func() time.Time) *gocronleash.Options {
		return &gocronleash.Options{Schedules: map[string]string{name: "@every 1h"}, Now: now}
	}
	first, err := gocronleash.NewLocker(newClient(t, addr), opts(at(10*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	late, err := gocronleash.NewLocker(newClient(t, addr), opts(at(900*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	lk, err := first.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := late.Lock(ctx, name); !errors.Is(err, gocronleash.ErrTickTaken) {
		t.Fatalf("the late host's Lock: %v, want ErrTickTaken", err)
	}
	// The control: plain Lockers give the late host the lock.
	plain, err := gocronleash.NewLocker(newClient(t, addr), nil)
	if err != nil {
		t.Fatal(err)
	}
	lk, err = plain.Lock(ctx, name+"/plain")
	if err != nil {
		t.Fatal(err)
	}
	_ = lk.Unlock(ctx)
	if lk, err = plain.Lock(ctx, name+"/plain"); err != nil {
		t.Fatalf("a plain Locker refused a free lock: %v", err)
	}
	_ = lk.Unlock(ctx)
}

// TestTaskSeesTheLostLock: the function wrapped by Task gets a context
// that ends when the lock is lost (here force-unlocked), with the loss as
// its cause, and the run is recorded lost.
func TestTaskSeesTheLostLock(t *testing.T) {
	addr := shared.Redis(t).Addr
	ctx := context.Background()
	name := jobName(t)
	c := newClient(t, addr)
	l, err := gocronleash.NewLocker(c, &gocronleash.Options{Schedules: map[string]string{name: "@every 1h"},
		Lock: &leash.LockOptions{Lease: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var cause error
	task := l.Task(name, func(ctx context.Context) error {
		run, ok := gocronleash.RunOf(ctx)
		if !ok || run.Fence == 0 || run.Tick.IsZero() {
			t.Errorf("RunOf = %+v, %v", run, ok)
		}
		if _, err := newClient(t, addr).ForceUnlock(context.Background(), name); err != nil {
			t.Error(err)
		}
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
		case <-time.After(time.Minute):
		}
		return ctx.Err()
	})
	_ = task(ctx)
	var lost *leash.LostError
	if !errors.As(cause, &lost) {
		t.Fatalf("the task's context ended with %v, want a *leash.LostError", cause)
	}
	_ = lk.Unlock(ctx)
	st, err := c.Store().(driver.JobStore).History(ctx, name, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Runs) != 1 || st.Runs[0].Outcome != driver.OutcomeLost {
		t.Errorf("history: %+v, want one lost run", st.Runs)
	}
}

// TestElector: one leader at a time; leadership passes on when it is
// given up.
func TestElector(t *testing.T) {
	addr := shared.Redis(t).Addr
	ctx := context.Background()
	name := jobName(t)
	e1, err := gocronleash.NewElector(newClient(t, addr), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := gocronleash.NewElector(newClient(t, addr), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e1.IsLeader(ctx); err != nil {
		t.Fatalf("first elector: %v", err)
	}
	if err := e2.IsLeader(ctx); !errors.Is(err, gocronleash.ErrNotLeader) {
		t.Fatalf("second elector: %v, want ErrNotLeader", err)
	}
	f1 := e1.Fence()
	if f1 == 0 || e1.Context().Err() != nil || e2.Context().Err() == nil {
		t.Errorf("leader's fence %d, contexts %v %v", f1, e1.Context().Err(), e2.Context().Err())
	}
	if err := e1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e2.IsLeader(ctx); err != nil {
		t.Fatalf("second elector after the first gave up: %v", err)
	}
	if e2.Fence() <= f1 {
		t.Errorf("the new leader's fence %d is not above the old one's %d", e2.Fence(), f1)
	}
	if err := e1.IsLeader(ctx); !errors.Is(err, gocronleash.ErrNotLeader) {
		t.Errorf("first elector after giving up: %v, want ErrNotLeader", err)
	}
	_ = e2.Close(ctx)

	// With gocron: two schedulers, only the leader's jobs run.
	var mu sync.Mutex
	ran := map[string]int{}
	var scheds []gocron.Scheduler
	for _, who := range []string{"a", "b"} {
		e, err := gocronleash.NewElector(newClient(t, addr), name+"/gocron", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close(context.Background()) })
		s, err := gocron.NewScheduler(gocron.WithDistributedElector(e))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.NewJob(gocron.DurationJob(100*time.Millisecond), gocron.NewTask(func() {
			mu.Lock()
			ran[who]++
			mu.Unlock()
		})); err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
		s.Start()
	}
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		n := ran["a"] + ran["b"]
		mu.Unlock()
		if n >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the leader's job did not run 5 times within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, s := range scheds {
		_ = s.Shutdown()
	}
	if ran["a"] > 0 && ran["b"] > 0 {
		t.Errorf("both schedulers ran the job: %v", ran)
	}
}

// TestMissedTicksRecorded: the ticks between two claims that no instance
// claimed are recorded missed.
func TestMissedTicksRecorded(t *testing.T) {
	addr := shared.Redis(t).Addr
	ctx := context.Background()
	name := jobName(t)
	c := newClient(t, addr)
	l, err := gocronleash.NewLocker(c, &gocronleash.Options{Schedules: map[string]string{name: "@every 100ms"}})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	js := c.Store().(driver.JobStore)
	st, err := js.History(ctx, name, 1)
	if err != nil || len(st.Runs) != 1 {
		t.Fatalf("history after the first run: %+v, %v", st, err)
	}
	t1 := st.Runs[0].Tick
	for time.Now().Before(t1.Add(350 * time.Millisecond)) { // three ticks pass unclaimed
		time.Sleep(10 * time.Millisecond)
	}
	if lk, err = l.Lock(ctx, name); err != nil {
		t.Fatal(err)
	}
	_ = lk.Unlock(ctx)
	st, err = js.History(ctx, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	var (
		missed []time.Time
		last   time.Time // the second claim's tick
	)
	for _, r := range st.Runs {
		if r.Outcome == driver.OutcomeMissed {
			missed = append(missed, r.Tick)
		} else if r.Tick.After(last) {
			last = r.Tick
		}
	}
	want := int(last.Sub(t1)/(100*time.Millisecond)) - 1
	if want < 2 || len(missed) != want {
		t.Fatalf("ticks %v and %v claimed, %d missed recorded (%v), want %d", t1, last, len(missed), missed, want)
	}
	for _, m := range missed {
		if !m.After(t1) || !m.Before(last) {
			t.Errorf("missed tick %v not between the claims %v and %v", m, t1, last)
		}
	}
}

// TestChangedScheduleRecordsNoMissedTicks: the first claim under a changed
// schedule (a redeploy from hourly to every 100ms) records none of the new
// schedule's ticks since the last hourly claim missed: they never were the
// job's, and recording them would push its real runs out of the history.
func TestChangedScheduleRecordsNoMissedTicks(t *testing.T) {
	addr := shared.Redis(t).Addr
	ctx := context.Background()
	name := jobName(t)
	c := newClient(t, addr)
	for _, spec := range []string{"@every 1h", "@every 100ms"} {
		l, err := gocronleash.NewLocker(c, &gocronleash.Options{Schedules: map[string]string{name: spec}})
		if err != nil {
			t.Fatal(err)
		}
		lk, err := l.Lock(ctx, name)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.Store().(driver.JobStore).History(ctx, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range st.Runs {
		if r.Outcome == driver.OutcomeMissed {
			n++
		}
	}
	if n > 0 || len(st.Runs) != 2 {
		t.Errorf("%d records, %d of them missed ticks; want the two runs only", len(st.Runs), n)
	}
}

// TestLongErrorKeptWhole: a task's error longer than the store keeps is
// recorded cut on a rune boundary, not inside a rune (which the store's
// JSON would turn into U+FFFD, or keep as invalid UTF-8).
func TestLongErrorKeptWhole(t *testing.T) {
	addr := shared.Redis(t).Addr
	ctx := context.Background()
	name := jobName(t)
	c := newClient(t, addr)
	l, err := gocronleash.NewLocker(c, &gocronleash.Options{Schedules: map[string]string{name: "@every 1h"}})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// "é" is two bytes, the first of them at the last byte kept.
	long := strings.Repeat("x", driver.MaxRunError-1) + strings.Repeat("é", 10)
	_ = l.Task(name, func(context.Context) error { return errors.New(long) })(ctx)
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := c.Store().(driver.JobStore).History(ctx, name, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Runs) != 1 || st.Runs[0].Outcome != driver.OutcomeFailed {
		t.Fatalf("history: %+v, want one failed run", st.Runs)
	}
	got := st.Runs[0].Error
	if !utf8.ValidString(got) || strings.ContainsRune(got, utf8.RuneError) || len(got) > driver.MaxRunError ||
		!strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Errorf("recorded error ends %q (%d bytes), want a prefix of the task's cut on a rune boundary, at most %d bytes",
			got[max(len(got)-8, 0):], len(got), driver.MaxRunError)
	}
}
