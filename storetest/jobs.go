package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// jobTests are scheduled jobs' claims and records (driver.JobStore).
var jobTests = []test{
	{name: "a tick is granted once", fn: testClaimOnce},
	{name: "concurrent claims of a tick grant one", fn: testClaimConcurrent},
	{name: "concurrent claims of an existing job's next tick grant one", fn: testClaimConcurrentExisting},
	{name: "an earlier tick is taken once a later one is claimed", fn: testClaimEarlierTaken},
	{name: "an early claim is told to wait by the store's clock", fn: testClaimEarly},
	{name: "a claim past its until is late and records nothing", fn: testClaimLate},
	{name: "a failed run may be retried once per attempt", fn: testClaimRetry},
	{name: "a run that ended well is not retried", fn: testClaimNoRetryAfterOK},
	{name: "only the claimer ends its run", fn: testEndRunOtherClient},
	{name: "a running record whose claimer holds no lock reads as lost", fn: testHistoryLost},
	{name: "claims queued behind another's lock read as running until a newer run ends", fn: testHistoryWaiting},
	{name: "only the last records are kept", fn: testHistoryKeep},
	{name: "missed ticks are recorded", fn: testAddRuns},
	{name: "missed ticks are recorded below the claim that found them", fn: testAddRunsBelowLaterTicks},
	{name: "jobs are listed by pattern", fn: testJobsList},
	{name: "bad claims, ends and records are refused", fn: testJobBadInput},
}

// jobs is s as a JobStore.
func jobs(s driver.Store) driver.JobStore { return s.(driver.JobStore) }

// tickAt is a tick d from now, to the millisecond.
func tickAt(d time.Duration) time.Time { return time.UnixMilli(time.Now().Add(d).UnixMilli()) }

// claimOf is a claim of job's tick by client, attempt 1, with no
// tolerance and no until.
func claimOf(job string, tick time.Time, client string) driver.TickClaim {
	return driver.TickClaim{Job: job, Tick: tick, Attempt: 1,
		Run: driver.RunRecord{Host: "host-1.example", PID: 4242, Client: client}}
}

func mustClaim(t *testing.T, s driver.Store, c driver.TickClaim) driver.TickResult {
	t.Helper()
	r, err := jobs(s).ClaimTick(ctx(t), c)
	if err != nil {
		t.Fatalf("ClaimTick(%q, %v, attempt %d) error: %v", c.Job, c.Tick, c.Attempt, err)
	}
	return r
}

func wantClaim(t *testing.T, s driver.Store, c driver.TickClaim, want driver.ClaimStatus, what string) driver.TickResult {
	t.Helper()
	r := mustClaim(t, s, c)
	if r.Status != want {
		t.Fatalf("ClaimTick %s = %v, want %v", what, r.Status, want)
	}
	return r
}

func mustHistory(t *testing.T, s driver.Store, job string, n int) driver.JobState {
	t.Helper()
	st, err := jobs(s).History(ctx(t), job, n)
	if err != nil {
		t.Fatalf("History(%q) error: %v", job, err)
	}
	return st
}

func mustEnd(t *testing.T, s driver.Store, e driver.RunEnd) {
	t.Helper()
	if err := jobs(s).EndRun(ctx(t), e); err != nil {
		t.Fatalf("EndRun(%q, attempt %d, %v) error: %v", e.Job, e.Attempt, e.Outcome, err)
	}
}

// clientOf is the client id of a fresh owner.
func clientOf(n *namer) string { return driver.OwnerClient(n.owner()) }

func testClaimOnce(t *testing.T, s driver.Store, n *namer) {
	job, a, b := n.name(), clientOf(n), clientOf(n)
	tick := tickAt(-time.Second)
	before := time.Now()
	first := claimOf(job, tick, a)
	first.Spec = "CRON_TZ=Europe/Berlin 0 30 2 * * *"
	first.Run.Claim = "claim-1"
	r := wantClaim(t, s, first, driver.ClaimGranted, "of a job's first tick")
	if !r.Prev.IsZero() {
		t.Errorf("first claim: Prev = %v, want zero", r.Prev)
	}
	if r.Now.Before(before.Add(-time.Minute)) || r.Now.After(time.Now().Add(time.Minute)) {
		t.Errorf("first claim: Now = %v, not the store's clock (the test's reads %v)", r.Now, before)
	}
	r = wantClaim(t, s, claimOf(job, tick, b), driver.ClaimTaken, "of the same tick by another client")
	if r.Last.Client != a || r.Last.Claim != "claim-1" || !r.Last.Tick.Equal(tick) || r.Last.Attempt != 1 {
		t.Errorf("taken: Last = %+v, want client %s's claim claim-1 of %v, attempt 1", r.Last, a, tick)
	}
	wantClaim(t, s, claimOf(job, tick, a), driver.ClaimTaken, "of the same tick by its claimer again")
	st := mustHistory(t, s, job, 0)
	if !st.Tick.Equal(tick) || st.Attempt != 1 || len(st.Runs) != 1 || st.Spec != first.Spec {
		t.Fatalf("History = tick %v attempt %d spec %q, %d runs; want %v, 1, %q, 1 run", st.Tick, st.Attempt, st.Spec, len(st.Runs), tick, first.Spec)
	}
	got := st.Runs[0]
	if got.Job != job || !got.Tick.Equal(tick) || got.Attempt != 1 || got.Host != "host-1.example" || got.PID != 4242 || got.Client != a ||
		got.Claim != "claim-1" {
		t.Errorf("record = %+v, want job %q tick %v attempt 1 on host-1.example pid 4242 client %s claim claim-1", got, job, tick, a)
	}
	if got.Started.IsZero() || !got.Ended.IsZero() {
		t.Errorf("record: Started %v Ended %v, want the claim's time and zero", got.Started, got.Ended)
	}
	next := tick.Add(time.Second / 2)
	r = wantClaim(t, s, claimOf(job, next, b), driver.ClaimGranted, "of the next tick")
	if !r.Prev.Equal(tick) || r.PrevSpec != first.Spec {
		t.Errorf("next tick: Prev = %v, PrevSpec %q; want %v, %q", r.Prev, r.PrevSpec, tick, first.Spec)
	}
	if st := mustHistory(t, s, job, 0); st.Spec != first.Spec {
		t.Errorf("spec after a claim without one = %q, want the kept %q", st.Spec, first.Spec)
	}
	changed := claimOf(job, next.Add(time.Second/4), a)
	changed.Spec = "@every 250ms"
	if r = wantClaim(t, s, changed, driver.ClaimGranted, "under a changed schedule"); r.PrevSpec != first.Spec {
		t.Errorf("claim under a changed schedule: PrevSpec = %q, want the one kept before, %q", r.PrevSpec, first.Spec)
	}
}

func testClaimConcurrent(t *testing.T, s driver.Store, n *namer) {
	job, tick := n.name(), tickAt(-time.Millisecond)
	const claimers = 8
	clients := make([]string, claimers)
	for i := range clients {
		clients[i] = clientOf(n)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted []string
		errs    []error
	)
	for _, c := range clients {
		wg.Go(func() {
			r, err := jobs(s).ClaimTick(ctx(t), claimOf(job, tick, c))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if r.Status == driver.ClaimGranted {
				granted = append(granted, c)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 || len(granted) != 1 {
		t.Fatalf("%d concurrent claims of one tick: granted to %v, errors %v; want one grant", claimers, granted, errs)
	}
}

func testClaimEarlierTaken(t *testing.T, s driver.Store, n *namer) {
	job := n.name()
	later := tickAt(-time.Second)
	wantClaim(t, s, claimOf(job, later, clientOf(n)), driver.ClaimGranted, "of a tick")
	r := wantClaim(t, s, claimOf(job, later.Add(-time.Second), clientOf(n)), driver.ClaimTaken, "of an earlier tick")
	if !r.Last.Tick.Equal(later) {
		t.Errorf("Last.Tick = %v, want the later tick %v", r.Last.Tick, later)
	}
	if st := mustHistory(t, s, job, 0); len(st.Runs) != 1 {
		t.Errorf("History has %d runs, want 1: a taken claim records nothing", len(st.Runs))
	}
}

func testClaimEarly(t *testing.T, s driver.Store, n *namer) {
	job := n.name()
	tick := tickAt(10 * time.Second)
	r := wantClaim(t, s, claimOf(job, tick, clientOf(n)), driver.ClaimEarly, "ten seconds early, no tolerance")
	if r.Wait <= 8*time.Second || r.Wait > 10*time.Second+time.Second {
		t.Errorf("Wait = %v, want about 10s (the tick minus the store's now)", r.Wait)
	}
	if st := mustHistory(t, s, job, 0); st.Attempt != 0 || len(st.Runs) != 0 {
		t.Errorf("History after an early claim = attempt %d, %d runs; want nothing", st.Attempt, len(st.Runs))
	}
	c := claimOf(job, tick, clientOf(n))
	c.Tolerance = 15 * time.Second
	wantClaim(t, s, c, driver.ClaimGranted, "ten seconds early, within a 15s tolerance")
}

func testClaimLate(t *testing.T, s driver.Store, n *namer) {
	job := n.name()
	c := claimOf(job, tickAt(-10*time.Second), clientOf(n))
	c.Until = time.Now().Add(-5 * time.Second)
	wantClaim(t, s, c, driver.ClaimLate, "past its until")
	if st := mustHistory(t, s, job, 0); st.Attempt != 0 || len(st.Runs) != 0 {
		t.Errorf("History after a late claim = attempt %d, %d runs; want nothing", st.Attempt, len(st.Runs))
	}
	c.Until = time.Now().Add(time.Minute)
	wantClaim(t, s, c, driver.ClaimGranted, "before its until")
}

func testClaimRetry(t *testing.T, s driver.Store, n *namer) {
	job, a, b := n.name(), clientOf(n), clientOf(n)
	tick := tickAt(-time.Second)
	wantClaim(t, s, claimOf(job, tick, a), driver.ClaimGranted, "attempt 1")
	retry := claimOf(job, tick, b)
	retry.Attempt = 2
	wantClaim(t, s, retry, driver.ClaimTaken, "attempt 2 while attempt 1 runs")
	mustEnd(t, s, driver.RunEnd{Job: job, Tick: tick, Attempt: 1, Client: a, Outcome: driver.OutcomeFailed, Fence: 7, Error: "boom"})
	third := retry
	third.Attempt = 3
	wantClaim(t, s, third, driver.ClaimTaken, "attempt 3 after attempt 1 failed")
	r := wantClaim(t, s, retry, driver.ClaimGranted, "attempt 2 after attempt 1 failed")
	if !r.Prev.Equal(tick) {
		t.Errorf("retry: Prev = %v, want the tick itself %v", r.Prev, tick)
	}
	wantClaim(t, s, retry, driver.ClaimTaken, "attempt 2 again")
	st := mustHistory(t, s, job, 0)
	if len(st.Runs) != 2 || st.Attempt != 2 {
		t.Fatalf("History = attempt %d, %d runs; want attempt 2, 2 runs", st.Attempt, len(st.Runs))
	}
	first := st.Runs[1]
	if first.Attempt != 1 || first.Outcome != driver.OutcomeFailed || first.Fence != 7 || first.Error != "boom" || first.Ended.IsZero() {
		t.Errorf("attempt 1's record = %+v, want failed, fence 7, error boom, ended", first)
	}
	if st.Runs[0].Attempt != 2 || st.Runs[0].Client != b {
		t.Errorf("newest record = %+v, want attempt 2 by %s", st.Runs[0], b)
	}
}

func testClaimNoRetryAfterOK(t *testing.T, s driver.Store, n *namer) {
	job, a := n.name(), clientOf(n)
	tick := tickAt(-time.Second)
	wantClaim(t, s, claimOf(job, tick, a), driver.ClaimGranted, "attempt 1")
	mustEnd(t, s, driver.RunEnd{Job: job, Tick: tick, Attempt: 1, Client: a, Outcome: driver.OutcomeOK, Fence: 3})
	retry := claimOf(job, tick, clientOf(n))
	retry.Attempt = 2
	r := wantClaim(t, s, retry, driver.ClaimTaken, "attempt 2 after attempt 1 ended ok")
	if r.Last.Outcome != driver.OutcomeOK || r.Last.Fence != 3 {
		t.Errorf("Last = %+v, want attempt 1's record, ok with fence 3", r.Last)
	}
}

func testEndRunOtherClient(t *testing.T, s driver.Store, n *namer) {
	job, a := n.name(), clientOf(n)
	tick := tickAt(-time.Second)
	wantClaim(t, s, claimOf(job, tick, a), driver.ClaimGranted, "attempt 1")
	mustEnd(t, s, driver.RunEnd{Job: job, Tick: tick, Attempt: 1, Client: clientOf(n), Outcome: driver.OutcomeFailed})
	retry := claimOf(job, tick, clientOf(n))
	retry.Attempt = 2
	wantClaim(t, s, retry, driver.ClaimTaken, "attempt 2 after another client said attempt 1 failed")
	mustEnd(t, s, driver.RunEnd{Job: n.name(), Tick: tick, Attempt: 1, Client: a, Outcome: driver.OutcomeOK})
	if st := mustHistory(t, s, job, 0); st.Runs[0].Outcome == driver.OutcomeFailed || !st.Runs[0].Ended.IsZero() {
		t.Errorf("record after another client's EndRun = %+v, want it unchanged", st.Runs[0])
	}
}

func testHistoryLost(t *testing.T, s driver.Store, n *namer) {
	job, owner := n.name(), n.owner()
	a := driver.OwnerClient(owner)
	tick := tickAt(-time.Second)
	wantClaim(t, s, claimOf(job, tick, a), driver.ClaimGranted, "attempt 1")
	if got := mustHistory(t, s, job, 1).Runs[0].Outcome; got != driver.OutcomeLost {
		t.Errorf("running record, claimer holds no lock: outcome %v, want lost", got)
	}
	lock := req(job, owner, long)
	mustAcquire(t, s, lock)
	if got := mustHistory(t, s, job, 1).Runs[0].Outcome; got != driver.OutcomeRunning {
		t.Errorf("running record, claimer holds the job's lock: outcome %v, want running", got)
	}
	r := wantClaim(t, s, claimOf(job, tick, clientOf(n)), driver.ClaimTaken, "of the running tick")
	if r.Last.Outcome != driver.OutcomeRunning {
		t.Errorf("Last.Outcome = %v, want running", r.Last.Outcome)
	}
	mustRelease(t, s, lock)
	if got := mustHistory(t, s, job, 1).Runs[0].Outcome; got != driver.OutcomeLost {
		t.Errorf("running record after its claimer released the lock: outcome %v, want lost", got)
	}
}

func testHistoryWaiting(t *testing.T, s driver.Store, n *namer) {
	job, other, a := n.name(), n.owner(), clientOf(n)
	lock := req(job, other, long)
	mustAcquire(t, s, lock)
	tick := tickAt(-2 * time.Second)
	wantClaim(t, s, claimOf(job, tick, a), driver.ClaimGranted, "of a tick")
	if got := mustHistory(t, s, job, 1).Runs[0].Outcome; got != driver.OutcomeRunning {
		t.Errorf("latest claim, another client holds the job's lock: outcome %v, want running (it may wait for it)", got)
	}
	b := clientOf(n)
	wantClaim(t, s, claimOf(job, tick.Add(time.Second), b), driver.ClaimGranted, "of the next tick")
	// Both wait for the lock: the earlier one until its window ends, when
	// it records itself skipped.
	for i, what := range []string{"the next tick's claim", "the earlier claim, queued behind the same lock"} {
		if got := mustHistory(t, s, job, 0).Runs[i].Outcome; got != driver.OutcomeRunning {
			t.Errorf("%s, another client holds the job's lock: outcome %v, want running (it may wait for it)", what, got)
		}
	}
	// Once a newer run ended, the earlier one's window is over: a claimer
	// that still says nothing stopped.
	mustEnd(t, s, driver.RunEnd{Job: job, Tick: tick.Add(time.Second), Attempt: 1, Client: b, Outcome: driver.OutcomeSkipped})
	if got := mustHistory(t, s, job, 0).Runs[1].Outcome; got != driver.OutcomeLost {
		t.Errorf("an earlier claim whose claimer holds nothing, below a run that ended: outcome %v, want lost", got)
	}
	mustRelease(t, s, lock)
}

func testHistoryKeep(t *testing.T, s driver.Store, n *namer) {
	job, a := n.name(), clientOf(n)
	base := tickAt(-time.Minute)
	for i := range 5 {
		c := claimOf(job, base.Add(time.Duration(i)*time.Second), a)
		c.Keep = 3
		wantClaim(t, s, c, driver.ClaimGranted, "of a new tick")
	}
	st := mustHistory(t, s, job, 0)
	if len(st.Runs) != 3 {
		t.Fatalf("History with Keep 3 after 5 claims has %d runs, want 3", len(st.Runs))
	}
	for i, r := range st.Runs {
		if want := base.Add(time.Duration(4-i) * time.Second); !r.Tick.Equal(want) {
			t.Errorf("run %d: tick %v, want %v (newest first)", i, r.Tick, want)
		}
	}
	if st := mustHistory(t, s, job, 2); len(st.Runs) != 2 || !st.Runs[0].Tick.Equal(base.Add(4*time.Second)) {
		t.Errorf("History(n=2) = %d runs from %v, want the 2 newest", len(st.Runs), st.Runs)
	}
}

func testAddRuns(t *testing.T, s driver.Store, n *namer) {
	job := n.name()
	base := tickAt(-time.Minute)
	missed := []driver.RunRecord{{Tick: base, Outcome: driver.OutcomeMissed}, {Tick: base.Add(time.Second), Outcome: driver.OutcomeMissed, Error: "no instance claimed it"}}
	if err := jobs(s).AddRuns(ctx(t), job, missed, 0); err != nil {
		t.Fatalf("AddRuns error: %v", err)
	}
	st := mustHistory(t, s, job, 0)
	if len(st.Runs) != 2 {
		t.Fatalf("History after AddRuns of 2 has %d runs", len(st.Runs))
	}
	got := st.Runs[0]
	if got.Job != job || !got.Tick.Equal(base.Add(time.Second)) || got.Outcome != driver.OutcomeMissed || got.Error != "no instance claimed it" || got.Started.IsZero() {
		t.Errorf("newest record = %+v, want the second missed tick", got)
	}
	if !st.Tick.IsZero() || st.Attempt != 0 {
		t.Errorf("History claim after AddRuns = %v attempt %d, want none: records are not claims", st.Tick, st.Attempt)
	}
	wantClaim(t, s, claimOf(job, base, clientOf(n)), driver.ClaimGranted, "of a tick recorded missed")
}

// testAddRunsBelowLaterTicks: the claim that finds ticks missed records
// them after its own record was made; they go below it (the history stays
// newest tick first), so that however many there are, trimming to keep
// drops the oldest ticks and never the claim's run, whose end is still told.
func testAddRunsBelowLaterTicks(t *testing.T, s driver.Store, n *namer) {
	job, a := n.name(), clientOf(n)
	tick := tickAt(-time.Second)
	c := claimOf(job, tick, a)
	c.Keep = 3
	wantClaim(t, s, c, driver.ClaimGranted, "of a tick after a gap")
	var missed []driver.RunRecord
	for i := 5; i >= 1; i-- {
		missed = append(missed, driver.RunRecord{Tick: tick.Add(-time.Duration(i) * 100 * time.Millisecond), Outcome: driver.OutcomeMissed})
	}
	if err := jobs(s).AddRuns(ctx(t), job, missed, 3); err != nil {
		t.Fatalf("AddRuns error: %v", err)
	}
	mustEnd(t, s, driver.RunEnd{Job: job, Tick: tick, Attempt: 1, Client: a, Outcome: driver.OutcomeOK})
	st := mustHistory(t, s, job, 0)
	var got []string
	for _, r := range st.Runs {
		got = append(got, fmt.Sprintf("%v %v", r.Tick.Sub(tick), r.Outcome))
	}
	if want := []string{"0s ok", "-100ms missed", "-200ms missed"}; !slices.Equal(got, want) {
		t.Errorf("history (tick after the claim's, outcome) = %q, want %q", got, want)
	}
}

func testJobsList(t *testing.T, s driver.Store, n *namer) {
	a, b := n.name()+"/alpha", n.name()+"/beta"
	for _, job := range []string{a, b} {
		wantClaim(t, s, claimOf(job, tickAt(-time.Second), clientOf(n)), driver.ClaimGranted, "of "+job)
	}
	got, err := jobs(s).Jobs(ctx(t), quoteGlob(n.prefix)+"*/alpha")
	if err != nil {
		t.Fatalf("Jobs error: %v", err)
	}
	if len(got) != 1 || got[0] != a {
		t.Errorf("Jobs(…*/alpha) = %q, want [%q]", got, a)
	}
	all, err := jobs(s).Jobs(ctx(t), quoteGlob(n.prefix)+"*")
	if err != nil {
		t.Fatalf("Jobs error: %v", err)
	}
	if len(all) != 2 || all[0] != a || all[1] != b {
		t.Errorf("Jobs(prefix*) = %q, want [%q %q]", all, a, b)
	}
	// Adding no records makes no job.
	ghost := n.name() + "/ghost"
	if err := jobs(s).AddRuns(ctx(t), ghost, nil, 0); err != nil {
		t.Errorf("AddRuns with no records: %v", err)
	}
	if got, err := jobs(s).Jobs(ctx(t), quoteGlob(ghost)); err != nil || len(got) != 0 {
		t.Errorf("Jobs after AddRuns of no records = %q, %v; want none", got, err)
	}
	every, err := jobs(s).Jobs(ctx(t), "") // the store may hold other tests' jobs too
	if err != nil {
		t.Fatalf("Jobs(\"\") error: %v", err)
	}
	if !slices.Contains(every, a) || !slices.Contains(every, b) {
		t.Errorf("Jobs(\"\") = %q, want every job, %q and %q among them", every, a, b)
	}
	if _, err := jobs(s).History(ctx(t), n.name(), 0); errors.Is(err, driver.ErrNotALock) {
		t.Errorf("History of a name with no job = %v, want a zero state", err)
	}
}

func testJobBadInput(t *testing.T, s driver.Store, n *namer) {
	job, a := n.name(), clientOf(n)
	tick := tickAt(-time.Second)
	for what, c := range map[string]driver.TickClaim{
		"attempt 0":          {Job: job, Tick: tick},
		"negative tolerance": {Job: job, Tick: tick, Attempt: 1, Tolerance: -time.Second},
		"keep too many":      {Job: job, Tick: tick, Attempt: 1, Keep: driver.MaxKeepRuns + 1},
		"error too long":     {Job: job, Tick: tick, Attempt: 1, Run: driver.RunRecord{Error: strings.Repeat("x", driver.MaxRunError+1)}},
	} {
		if _, err := jobs(s).ClaimTick(ctx(t), c); err == nil {
			t.Errorf("ClaimTick with %s: no error", what)
		}
	}
	wantClaim(t, s, claimOf(job, tick, a), driver.ClaimGranted, "after the refused ones")
	for what, e := range map[string]driver.RunEnd{
		"outcome running": {Job: job, Tick: tick, Attempt: 1, Client: a, Outcome: driver.OutcomeRunning},
		"no outcome":      {Job: job, Tick: tick, Attempt: 1, Client: a},
		"attempt 0":       {Job: job, Tick: tick, Client: a, Outcome: driver.OutcomeOK},
		"error too long":  {Job: job, Tick: tick, Attempt: 1, Client: a, Outcome: driver.OutcomeFailed, Error: strings.Repeat("x", driver.MaxRunError+1)},
	} {
		if err := jobs(s).EndRun(ctx(t), e); err == nil {
			t.Errorf("EndRun with %s: no error", what)
		}
	}
	if err := jobs(s).AddRuns(ctx(t), job, []driver.RunRecord{{Tick: tick}}, 0); err == nil {
		t.Errorf("AddRuns of a record without an outcome: no error")
	}
	st := mustHistory(t, s, job, 0)
	if len(st.Runs) != 1 || st.Runs[0].Outcome == driver.OutcomeFailed || !st.Runs[0].Ended.IsZero() {
		t.Errorf("History after refused calls = %+v, want the one claim, still running", st.Runs)
	}
}
