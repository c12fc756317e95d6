package scenario

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/leash-go/leash/reliability/check"
	"github.com/redis/go-redis/v9"
)

// skew is how far the instances' clocks are apart in the cron scenarios:
// one runs skew behind the store's clock, one on it, one skew ahead.
const skew = 400 * time.Millisecond

// leashBin is the leash command, built once for the cron scenarios.
var leashBin struct {
	once sync.Once
	path string
	err  error
}

func buildLeash(t *testing.T) string {
	t.Helper()
	leashBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "leash-cron-")
		if err != nil {
			leashBin.err = err
			return
		}
		leashBin.path = filepath.Join(dir, "leash")
		cmd := exec.Command("go", "build", "-o", leashBin.path, "github.com/leash-go/leash/cmd/leash")
		cmd.Dir = "../.." // the workspace, whose go.work names every module
		if out, err := cmd.CombinedOutput(); err != nil {
			leashBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if leashBin.err != nil {
		t.Fatal(leashBin.err)
	}
	return leashBin.path
}

// A crond is one leash cron process of a test.
type crond struct {
	id     string
	cmd    *exec.Cmd
	stderr string // its stderr file
	done   chan struct{}
}

func startCron(t *testing.T, bin, store, tab, out, id string, offset time.Duration) *crond {
	t.Helper()
	dir := t.TempDir()
	d := &crond{id: id, stderr: filepath.Join(dir, "stderr"), done: make(chan struct{})}
	errf, err := os.Create(d.stderr)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(bin, "cron", "--verbose", "--lease", "2s", "--kill-after", "1s", "--keep", "1000", tab)
	d.cmd.Env = append(os.Environ(), "LEASH_STORE="+store, "LEASH_TEST_CLOCK_OFFSET="+offset.String(), "HOST_ID="+id, "OUT="+out)
	d.cmd.Stdout, d.cmd.Stderr = errf, errf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Owner: d. Stops when the daemon exits.
	go func() {
		_ = d.cmd.Wait()
		errf.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGCONT)
		_ = d.cmd.Process.Kill()
		<-d.done
		if t.Failed() {
			b, _ := os.ReadFile(d.stderr)
			t.Logf("leash cron %s (clock %v) stderr:\n%s", id, offset, tail(string(b), 40))
		}
	})
	return d
}

// gone reports whether process pid has exited (or is a zombie).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (d *crond) log() string {
	b, _ := os.ReadFile(d.stderr)
	return string(b)
}

// until polls cond every 10ms until it holds, or fails the test after
// within (a bound on a broken run, never the thing measured).
func until(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// outLine is one line the job's command wrote: "start TICK FENCE HOST PGID"
// or "end TICK FENCE HOST".
type outLine struct {
	event, tick, host string
	fence             int64
	pgid              int
	long              bool // a start line: the run lasts a minute (see TestCronSkew's long)
}

func readOut(path string) []outLine {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var lines []outLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) < 4 {
			continue
		}
		l := outLine{event: w[0], tick: w[1], host: w[3]}
		l.fence, _ = strconv.ParseInt(w[2], 10, 64)
		if len(w) > 4 {
			l.pgid, _ = strconv.Atoi(w[4])
		}
		l.long = len(w) > 5 && w[5] == "60"
		lines = append(lines, l)
	}
	return lines
}

// TestCronSkew runs the job "skew" every second on three leash cron
// processes whose clocks are -skew, 0 and +skew from the store's, for at
// least 60 ticks; one daemon is SIGKILLed while its command runs, another
// (with its command) SIGSTOPped past its lease. Every tick that came while
// a daemon was up ran exactly once (by the history and by the commands'
// own output), none started early by the store's clock, the killed
// daemon's command died with it and its run reads lost, and the paused
// run's command was stopped once its daemon resumed and found the lock
// gone, after a later tick ran elsewhere under a greater fence.
func TestCronSkew(t *testing.T) {
	t.Parallel()
	bin := buildLeash(t)
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	store := "redis://" + srv.Addr
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	tab := filepath.Join(dir, "crontab")
	const job = "skew"
	// A run takes 300ms, or as long as the file $OUT.<host> says, which its
	// start line tells: the test makes a host's runs long before it kills
	// or pauses that host mid-run, and faults the first long run to start,
	// so that the fault never comes after the run ended, however slowly the
	// test sees it start.
	line := `@every 1s  skew  lease=2s  d=$(cat "$OUT.$HOST_ID" 2>/dev/null || echo 0.3); echo "start $LEASH_TICK $LEASH_FENCE $HOST_ID $$ $d" >> "$OUT"; sleep $d; echo "end $LEASH_TICK $LEASH_FENCE $HOST_ID" >> "$OUT"` + "\n"
	if err := os.WriteFile(tab, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	behind := startCron(t, bin, store, tab, out, "behind", -skew)
	on := startCron(t, bin, store, tab, out, "on", 0)
	ahead := startCron(t, bin, store, tab, out, "ahead", skew)
	for _, d := range []*crond{behind, on, ahead} {
		until(t, time.Minute, d.id+" started", func() bool { return strings.Contains(d.log(), "leash cron started") })
	}
	up := time.Now()
	ticks := func() int {
		n := 0
		for _, l := range readOut(out) {
			if l.event == "start" {
				n++
			}
		}
		return n
	}
	// startOf waits for a run of one of hosts to start after n lines of
	// output, a long one if long is set, and returns that line.
	startOf := func(after int, long bool, hosts ...string) outLine {
		var got outLine
		until(t, time.Minute, fmt.Sprintf("a run of %v", hosts), func() bool {
			lines := readOut(out)
			for _, l := range lines[min(after, len(lines)):] {
				if l.event == "start" && slices.Contains(hosts, l.host) && (l.long || !long) {
					got = l
					return true
				}
			}
			return false
		})
		return got
	}
	until(t, 2*time.Minute, "20 runs", func() bool { return ticks() >= 20 })

	// long makes the next run of each of hosts last a minute (the command
	// reads the file when it starts), or, with on false, 300ms again.
	long := func(on bool, hosts ...string) {
		t.Helper()
		for _, host := range hosts {
			if !on {
				if err := os.Remove(out + "." + host); err != nil && !errors.Is(err, fs.ErrNotExist) {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(out+"."+host, []byte("60\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	daemons := map[string]*crond{"behind": behind, "on": on, "ahead": ahead}
	// Which daemon wins a claim depends on how the three are scheduled
	// (the one ahead waits for the store's clock and races the one on
	// it): the next run, wherever it starts, is the one faulted.
	// SIGKILL its daemon while its command runs.
	hosts := []string{"behind", "on", "ahead"}
	seen := len(readOut(out))
	long(true, hosts...)
	killed := startOf(seen, true, hosts...)
	long(false, hosts...)
	if err := daemons[killed.host].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-daemons[killed.host].done
	// The daemon's child, the shell running the command line, dies with
	// it (a parent-death signal); what the shell started (its sleep) is
	// not the daemon's child and lives on, as under leash run.
	until(t, time.Minute, "the killed daemon's shell gone", func() bool { return gone(killed.pgid) })
	_ = syscall.Kill(-killed.pgid, syscall.SIGKILL)
	until(t, 2*time.Minute, "40 runs", func() bool { return ticks() >= 40 })

	// SIGSTOP the daemon that runs the next tick, and its command, mid-run;
	// let a later tick run on the last daemon once the lease has run out;
	// then resume it.
	hosts = slices.DeleteFunc(hosts, func(h string) bool { return h == killed.host })
	seen = len(readOut(out))
	long(true, hosts...)
	paused := startOf(seen, true, hosts...)
	long(false, hosts...)
	pausedD := daemons[paused.host]
	if err := pausedD.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(-paused.pgid, syscall.SIGSTOP)
	last := hosts[0]
	if last == paused.host {
		last = hosts[1]
	}
	after := startOf(len(readOut(out)), false, last)
	if after.fence <= paused.fence {
		t.Errorf("the run after the paused one has fence %d, not above the paused run's %d", after.fence, paused.fence)
	}
	if err := pausedD.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	until(t, time.Minute, "the resumed daemon stopping its command", func() bool {
		return strings.Contains(pausedD.log(), "stopping the command")
	})
	_ = syscall.Kill(-paused.pgid, syscall.SIGCONT)
	until(t, time.Minute, "the paused command gone", func() bool { return syscall.Kill(-paused.pgid, 0) != nil })
	until(t, 3*time.Minute, "70 runs", func() bool { return ticks() >= 70 })

	down := time.Now()
	survivors := []*crond{daemons[hosts[0]], daemons[hosts[1]]}
	for _, d := range survivors {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, d := range survivors {
		select {
		case <-d.done:
		case <-time.After(time.Minute):
			t.Fatalf("leash cron %s still running a minute after SIGTERM", d.id)
		}
		if code := d.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("leash cron %s exited %d after SIGTERM, want 0", d.id, code)
		}
	}

	// The history, as the store keeps it.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	st, err := redisstore.New(rdb, nil).History(context.Background(), job, 0)
	if err != nil {
		t.Fatal(err)
	}
	var runs []check.TickRun
	byTick := map[string]driver.RunRecord{}
	for _, r := range st.Runs {
		runs = append(runs, check.TickRun{Tick: r.Tick, Attempt: r.Attempt, Outcome: r.Outcome.String(), Started: r.Started,
			Where: fmt.Sprintf("%s:%d", r.Host, r.PID)})
		if r.Outcome != driver.OutcomeMissed {
			byTick[r.Tick.UTC().Format(time.RFC3339Nano)] = r
		}
	}
	// Every tick from the first whole second after all three were up to
	// the last before the shutdown began: one daemon was up
	// throughout.
	var expected []time.Time
	for tk := up.Truncate(time.Second).Add(2 * time.Second); tk.Before(down.Add(-time.Second)); tk = tk.Add(time.Second) {
		expected = append(expected, tk)
	}
	res := check.Ticks(runs, expected, 10*time.Millisecond)
	t.Logf("history: %v", res)
	if !res.OK() || res.Ticks < 60 {
		t.Errorf("history: want at least 60 ticks, none run twice, missed or early; got %v", res)
	}

	// The commands' own output: no tick started twice, and each agrees
	// with the history (same fence).
	var outRuns []check.TickRun
	for _, l := range readOut(out) {
		if l.event != "start" {
			continue
		}
		tick, err := time.Parse(time.RFC3339Nano, l.tick)
		if err != nil {
			t.Fatalf("bad tick in the output: %q", l.tick)
		}
		outRuns = append(outRuns, check.TickRun{Tick: tick, Where: l.host})
		// A run whose end was never recorded (its daemon was killed) has
		// no fence in the history.
		if r, ok := byTick[l.tick]; !ok || r.Fence != l.fence && (r.Fence != 0 || r.Outcome != driver.OutcomeLost) {
			t.Errorf("output: tick %s ran with fence %d on %s; the history has %+v", l.tick, l.fence, l.host, r)
		}
	}
	if res := check.Ticks(outRuns, nil, 0); !res.OK() {
		t.Errorf("output: %v", res)
	}

	// The killed and the paused runs read lost; neither command ended.
	for _, c := range []struct {
		what string
		l    outLine
	}{{"SIGKILLed", killed}, {"SIGSTOPped", paused}} {
		if r := byTick[c.l.tick]; r.Outcome != driver.OutcomeLost {
			t.Errorf("the %s daemon's run of %s reads %v, want lost (%+v)", c.what, c.l.tick, r.Outcome, r)
		}
		for _, l := range readOut(out) {
			if l.event == "end" && l.tick == c.l.tick {
				t.Errorf("the %s daemon's command of %s ran to its end", c.what, c.l.tick)
			}
		}
	}
	// The clocks were apart: the daemon ahead was told to wait, the one
	// behind found ticks taken.
	if !strings.Contains(ahead.log(), "early by the store's clock") {
		t.Errorf("the daemon ahead was never early by the store's clock")
	}
	if !strings.Contains(behind.log(), "status=taken") {
		t.Errorf("the daemon behind never found a tick taken")
	}
}

// TestAtLeastUnderSkewRunsTicksTwice is the negative control of
// TestCronSkew: three hosts fire the same job at each second by their own
// clocks (-skew, 0, +skew), as cron does, each through 'leash run
// --no-wait --at-least' with a guess below the skew (ShedLock's
// lockAtLeastFor). The lock keeps runs apart, not ticks: the tick checker
// must find ticks run more than once.
func TestAtLeastUnderSkewRunsTicksTwice(t *testing.T) {
	t.Parallel()
	bin := buildLeash(t)
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	out := filepath.Join(t.TempDir(), "out")
	const n = 10
	var wg sync.WaitGroup
	for i, off := range []time.Duration{-skew, 0, skew} {
		wg.Add(1)
		// Owner: the test; one host's cron, n ticks.
		go func() {
			defer wg.Done()
			host := fmt.Sprintf("host%d", i)
			start := time.Now().Add(off).Truncate(time.Second).Add(2 * time.Second)
			for k := range n {
				tick := start.Add(time.Duration(k) * time.Second)
				time.Sleep(time.Until(tick.Add(-off))) // the host's clock reaches tick
				cmd := exec.Command(bin, "run", "--no-wait", "--quiet", "--at-least", "100ms", "shed", "--",
					"sh", "-c", `echo "start $TICK 0 $HOST" >> "$OUT"`)
				cmd.Env = append(os.Environ(), "LEASH_STORE=redis://"+srv.Addr, "TICK="+tick.UTC().Format(time.RFC3339Nano),
					"HOST="+host, "OUT="+out)
				_ = cmd.Run() // 75 when another host holds the lock
			}
		}()
	}
	wg.Wait()
	var runs []check.TickRun
	for _, l := range readOut(out) {
		tick, _ := time.Parse(time.RFC3339Nano, l.tick)
		runs = append(runs, check.TickRun{Tick: tick, Where: l.host})
	}
	res := check.Ticks(runs, nil, 0)
	t.Logf("leash run --at-least 100ms under ±%v skew: %v", skew, res)
	if len(res.Duplicates) == 0 {
		t.Errorf("no tick ran twice: the negative control did not show what the tick checker catches (%d runs)", len(runs))
	}
}
