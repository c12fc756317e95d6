package gocronleash_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/gocronleash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/redisstore"
	"github.com/leash-go/leash/schedule"
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

// hookStore is a memstore whose ClaimTick and Release a test can wrap
// (nil: memstore's own).
type hookStore struct {
	*memstore.Store
	claimTick func(ctx context.Context, c driver.TickClaim) (driver.TickResult, error)
	release   func(ctx context.Context, req driver.Request) error
	acquire   func(ctx context.Context, req driver.Request) (driver.Grant, error)
}

func (s *hookStore) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if s.acquire != nil {
		return s.acquire(ctx, req)
	}
	return s.Store.Acquire(ctx, req)
}

func (s *hookStore) ClaimTick(ctx context.Context, c driver.TickClaim) (driver.TickResult, error) {
	if s.claimTick != nil {
		return s.claimTick(ctx, c)
	}
	return s.Store.ClaimTick(ctx, c)
}

func (s *hookStore) Release(ctx context.Context, req driver.Request) error {
	if s.release != nil {
		return s.release(ctx, req)
	}
	return s.Store.Release(ctx, req)
}

// memLocker returns a Locker, on a Client of its own on st, that knows
// the job name's schedule spec, with the clock now (nil: time.Now).
func memLocker(t *testing.T, st driver.Store, name, spec string, now func() time.Time) *gocronleash.Locker {
	t.Helper()
	c, err := leash.New(st, &leash.Options{Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l, err := gocronleash.NewLocker(c, &gocronleash.Options{Schedules: map[string]string{name: spec}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestClaimGrantedEarlierRuns: the store grants the first claim of a
// tick, and the claimer does not hear so: its answer is lost (a timed-out
// round trip; the claimer sends the claim again), or the store's client
// sends it again by itself after its reply was lost (as go-redis resends a
// script on a dropped connection), so that the claimer sees only the
// resend's answer. Either way the store then names the claimer's own claim
// as the tick's: the claimer runs the tick, and the other instance finds
// it taken. The tick runs once, where it would otherwise run nowhere.
func TestClaimGrantedEarlierRuns(t *testing.T) {
	for _, tc := range []struct {
		fault string
		// after answers the granted first claim c, sent to st.
		after func(ctx context.Context, st *hookStore, c driver.TickClaim) (driver.TickResult, error)
	}{
		{"answer lost", func(context.Context, *hookStore, driver.TickClaim) (driver.TickResult, error) {
			return driver.TickResult{}, errors.New("i/o timeout")
		}},
		{"resent by the client", func(ctx context.Context, st *hookStore, c driver.TickClaim) (driver.TickResult, error) {
			return st.Store.ClaimTick(ctx, c)
		}},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			ctx := t.Context()
			name := "test/granted-earlier"
			st := &hookStore{Store: memstore.New()}
			var hit atomic.Bool
			st.claimTick = func(ctx context.Context, c driver.TickClaim) (driver.TickResult, error) {
				res, err := st.Store.ClaimTick(ctx, c)
				if err == nil && res.Status == driver.ClaimGranted && hit.CompareAndSwap(false, true) {
					return tc.after(ctx, st, c)
				}
				return res, err
			}
			first, second := memLocker(t, st, name, "@every 1h", nil), memLocker(t, st, name, "@every 1h", nil)
			lk, err := first.Lock(ctx, name)
			if err != nil {
				t.Fatalf("the claimer (%s): Lock: %v", tc.fault, err)
			}
			if !hit.Load() {
				t.Fatal("no claim was granted unheard")
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := second.Lock(ctx, name); !errors.Is(err, gocronleash.ErrTickTaken) {
				t.Errorf("the other instance: Lock: %v, want ErrTickTaken", err)
			}
			h, err := st.History(ctx, name, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Runs) != 1 || h.Runs[0].Outcome != driver.OutcomeOK {
				t.Errorf("history: %+v, want one ok run", h.Runs)
			}
		})
	}
}

// TestClaimRetriedUntilWindowOrContextEnds: a claim whose round trips fail
// is sent again until the tick's window (up to the next tick) passes, or
// gocron's ctx ends, and Lock then says which; a definite refusal is not
// sent again.
func TestClaimRetriedUntilWindowOrContextEnds(t *testing.T) {
	for name, tc := range map[string]struct {
		spec   string
		err    error // what every ClaimTick returns
		cancel bool  // cancel Lock's ctx at the second send
		want   string
		sends  func(n int32) bool
	}{
		"store unreachable for the tick's window": {spec: "@every 300ms", err: errors.New("i/o timeout"),
			want: "not claimed before its window ended", sends: func(n int32) bool { return n > 1 }},
		"context ends": {spec: "@every 1h", err: errors.New("i/o timeout"), cancel: true,
			want: "not claimed", sends: func(n int32) bool { return n == 2 }},
		"the name holds something else": {spec: "@every 200ms", err: &driver.NotALockError{Name: "x", Found: "a string"},
			want: "not a lock", sends: func(n int32) bool { return n == 1 }},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var sends atomic.Int32
			st := &hookStore{Store: memstore.New()}
			st.claimTick = func(context.Context, driver.TickClaim) (driver.TickResult, error) {
				if sends.Add(1) == 2 && tc.cancel {
					cancel()
				}
				return driver.TickResult{}, tc.err
			}
			// The clock starts at a tick: the window is the whole interval.
			start := time.Now()
			l := memLocker(t, st, "test/unreachable", tc.spec, func() time.Time { return time.Unix(0, 0).Add(time.Since(start)) })
			_, err := l.Lock(ctx, "test/unreachable")
			if err == nil || errors.Is(err, gocronleash.ErrTickTaken) || !strings.Contains(err.Error(), tc.want) ||
				!errors.Is(err, tc.err) || tc.cancel != errors.Is(err, context.Canceled) {
				t.Errorf("Lock: %v; want an error saying %q, matching the store's error", err, tc.want)
			}
			if n := sends.Load(); !tc.sends(n) {
				t.Errorf("the claim was sent %d times", n)
			}
		})
	}
}

// TestUnlockRecordsEndBeforeRelease: Unlock records how the run ended
// before it releases the run lock, so that no reader sees the run, its
// lock free, as still running (which History reports as lost); and when
// the release finds the lock was lost already, the run is recorded lost.
func TestUnlockRecordsEndBeforeRelease(t *testing.T) {
	for name, tc := range map[string]struct {
		freed bool // the lock is freed behind the Client's back before the release
		want  driver.Outcome
	}{
		"run ended well":                      {want: driver.OutcomeOK},
		"lock freed behind the client's back": {freed: true, want: driver.OutcomeLost},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			job := "test/end-first"
			st := &hookStore{Store: memstore.New()}
			var atRelease []driver.RunRecord
			st.release = func(ctx context.Context, req driver.Request) error {
				if req.Name == job {
					h, err := st.History(ctx, job, 0)
					if err != nil {
						return err
					}
					atRelease = h.Runs
					if tc.freed {
						if _, err := st.ForceRelease(ctx, job); err != nil {
							return err
						}
					}
				}
				return st.Store.Release(ctx, req)
			}
			l := memLocker(t, st, job, "@every 1h", nil)
			lk, err := l.Lock(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			if err := lk.Unlock(ctx); tc.freed != errors.Is(err, leash.ErrLost) {
				t.Errorf("Unlock: %v", err)
			}
			if len(atRelease) != 1 || atRelease[0].Outcome != driver.OutcomeOK {
				t.Errorf("history at the release: %+v, want the run recorded ok", atRelease)
			}
			h, err := st.History(ctx, job, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Runs) != 1 || h.Runs[0].Outcome != tc.want {
				t.Errorf("history after Unlock: %+v, want one run, %v", h.Runs, tc.want)
			}
		})
	}
}

// TestNewLockerRefusesSpecsGocronReadsOtherwise: a cron spec that restricts
// both day fields is refused, and one that leaves either open is accepted;
// each case is checked against gocron's own cron (robfig/cron, which ORs
// the day fields) and schedule.Parse (which ANDs them): they disagree on
// exactly the refused specs.
func TestNewLockerRefusesSpecsGocronReadsOtherwise(t *testing.T) {
	c, err := leash.New(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for spec, refused := range map[string]bool{
		"0 0 1 * MON":                        true,
		"0 0 0 1,15 * 1-5":                   true,
		"CRON_TZ=Europe/Berlin 0 9 13 * FRI": true,
		"0 0 */2 * MON":                      true, // a step above 1 restricts (robfig's star bit is cleared)
		"0 0 1 * */2":                        true,
		"0 0 1 * *":                          false,
		"0 0 * * MON":                        false,
		"0 0 ? * MON":                        false,
		"0 0 0 1 * ?":                        false,
		"0 0 */1 * MON":                      false,
		"CRON_TZ=Europe/Berlin 0 9 * * 1-5":  false,
		"@weekly":                            false,
		"@every 1h":                          false,
	} {
		_, err := gocronleash.NewLocker(c, &gocronleash.Options{Schedules: map[string]string{"job": spec}})
		switch {
		case refused && (!errors.Is(err, leash.ErrInvalidArgument) || !strings.Contains(err.Error(), "either")):
			t.Errorf("NewLocker with %q: %v, want ErrInvalidArgument saying gocron runs it when either day matches", spec, err)
		case !refused && err != nil:
			t.Errorf("NewLocker with %q: %v, want it accepted", spec, err)
		}
		gc := gocron.NewDefaultCron(true)
		if err := gc.IsValid(spec, time.UTC, start); err != nil {
			t.Fatalf("gocron refuses %q: %v", spec, err)
		}
		s, err := schedule.Parse(spec, nil)
		if err != nil {
			t.Fatalf("schedule.Parse(%q): %v", spec, err)
		}
		same := true
		for g, p, i := start, start, 0; i < 50 && same; i++ {
			g, p = gc.Next(g), s.Next(p)
			same = g.Equal(p)
		}
		if same == refused {
			t.Errorf("%q: gocron and schedule.Parse name the same ticks: %v; refused: %v", spec, same, refused)
		}
	}
}

// TestClaimWaitsForStoreClockPastTheWindow: an instance whose clock runs
// ahead of the store's by more than the job's interval fires for a tick the
// store has not reached; Lock waits for the store's clock, however long
// that is by the instance's own window, and claims the tick.
func TestClaimWaitsForStoreClockPastTheWindow(t *testing.T) {
	const ahead = 250 * time.Millisecond
	l := memLocker(t, memstore.New(), "test/ahead", "@every 100ms", func() time.Time { return time.Now().Add(ahead) })
	lk, err := l.Lock(t.Context(), "test/ahead")
	if err != nil {
		t.Fatalf("Lock on a clock %v ahead of the store's, with a 100ms interval: %v, want the tick claimed", ahead, err)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestRunLockRetriedAfterClaim: once the tick is claimed, the run is this
// instance's alone, so a run lock that could not be taken because the
// store did not answer is tried again while the tick's window lasts; the
// tick then runs once, recorded ok. When the store stays unreachable for
// the whole window, Lock says why and the run is recorded failed; a lock
// held by the job's previous run is not tried again.
func TestRunLockRetriedAfterClaim(t *testing.T) {
	ctx := t.Context()
	for name, tc := range map[string]struct {
		spec     string
		failures int32 // how many Acquires fail before the store answers again
		grace    bool  // they answer that the store is in its restart grace
		held     bool  // the previous run holds the lock
		outcome  driver.Outcome
		tries    func(n int32) bool
	}{
		"one try lost":                     {spec: "@every 1h", failures: 1, outcome: driver.OutcomeOK, tries: func(n int32) bool { return n == 2 }},
		"the store in its restart grace":   {spec: "@every 1h", failures: 1, grace: true, outcome: driver.OutcomeOK, tries: func(n int32) bool { return n == 2 }},
		"store unreachable for the window": {spec: "@every 1s", failures: 1 << 30, outcome: driver.OutcomeFailed, tries: func(n int32) bool { return n > 1 }},
		"the previous run holds the lock":  {spec: "@every 1h", held: true, outcome: driver.OutcomeSkipped, tries: func(n int32) bool { return n == 1 }},
	} {
		t.Run(name, func(t *testing.T) {
			job := "test/run-lock/" + name
			st := &hookStore{Store: memstore.New()}
			if tc.held {
				if g, err := st.Store.Acquire(ctx, driver.Request{Kind: driver.KindMutex, Name: job,
					Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Hour}); err != nil || !g.Acquired {
					t.Fatalf("the previous run's lock: %+v, %v", g, err)
				}
			}
			var tries atomic.Int32
			st.acquire = func(ctx context.Context, req driver.Request) (driver.Grant, error) {
				if tries.Add(1) <= tc.failures {
					if tc.grace {
						return driver.Grant{Grace: true, Remaining: 100 * time.Millisecond}, nil
					}
					return driver.Grant{}, errors.New("i/o timeout")
				}
				return st.Store.Acquire(ctx, req)
			}
			l := memLocker(t, st, job, tc.spec, nil)
			if tc.spec == "@every 1s" {
				// Start at a tick, so that the window is the whole second.
				time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
			}
			lk, err := l.Lock(ctx, job)
			switch {
			case tc.outcome == driver.OutcomeOK && err != nil:
				t.Fatalf("Lock: %v; want the run lock", err)
			case tc.outcome == driver.OutcomeOK:
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			case tc.held && !errors.Is(err, leash.ErrNotAcquired):
				t.Errorf("Lock: %v; want ErrNotAcquired", err)
			case !tc.held && (err == nil || !strings.Contains(err.Error(), "i/o timeout")):
				t.Errorf("Lock: %v; want the store's error", err)
			}
			if n := tries.Load(); !tc.tries(n) {
				t.Errorf("the run lock was tried %d times", n)
			}
			h, err := st.History(ctx, job, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Runs) != 1 || h.Runs[0].Outcome != tc.outcome {
				t.Errorf("history: %+v, want one %v run", h.Runs, tc.outcome)
			}
		})
	}
}

// TestRunLockGrantWithLostAnswer: the run lock's first try is granted but
// its answer lost; the Client gives the grant back in the background, and
// that give-back fails at first. The next try finds the lock held — by the
// first try's own grant — and is tried again until the give-back lands,
// rather than recording the claimed tick skipped and running it nowhere.
func TestRunLockGrantWithLostAnswer(t *testing.T) {
	ctx := t.Context()
	job := "test/run-lock-lost-answer"
	st := &hookStore{Store: memstore.New()}
	var tries, givebacks atomic.Int32
	var first atomic.Value // the first try's owner
	st.acquire = func(ctx context.Context, req driver.Request) (driver.Grant, error) {
		g, err := st.Store.Acquire(ctx, req)
		if tries.Add(1) == 1 && err == nil && g.Acquired {
			first.Store(req.Owner)
			return driver.Grant{}, errors.New("i/o timeout") // granted, answer lost
		}
		return g, err
	}
	st.release = func(ctx context.Context, req driver.Request) error {
		if o, _ := first.Load().(string); o == req.Owner && givebacks.Add(1) <= 2 {
			return errors.New("i/o timeout") // the give-back fails twice
		}
		return st.Store.Release(ctx, req)
	}
	l := memLocker(t, st, job, "@every 1h", nil)
	lk, err := l.Lock(ctx, job)
	if err != nil {
		t.Fatalf("Lock: %v; want the run lock once the first try's grant is given back (%d tries, %d give-backs)",
			err, tries.Load(), givebacks.Load())
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := st.History(ctx, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Runs) != 1 || h.Runs[0].Outcome != driver.OutcomeOK {
		t.Errorf("history: %+v, want one ok run", h.Runs)
	}
}
