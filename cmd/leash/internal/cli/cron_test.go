package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/schedule"

	_ "github.com/leash-go/leash/etcdstore" // registers etcd://, a store that keeps no job records
)

func TestCrontabParse(t *testing.T) {
	const tab = `
# a comment
@every 1s  tick  echo "tick $LEASH_TICK"
TZ=Europe/Berlin
0 30 2 * * *  nightly  max-run=1h retries=2 retry-delay=5s  ./report.sh --day yesterday
*/5 * * * *  sync  overlap=queue lease=10s FOO=bar ./sync
CRON_TZ=America/New_York 0 9 * * mon-fri  standup  overlap=3 misfire=latest lateness=1m  ./standup.sh
  @daily  daily  true
`
	jobs, err := parseCrontab("tab", strings.NewReader(tab))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, spec, zone, command string
		opts                      schedule.JobOptions
	}{
		{"tick", "@every 1s", "UTC", `echo "tick $LEASH_TICK"`, schedule.JobOptions{}},
		{"nightly", "0 30 2 * * *", "Europe/Berlin", "./report.sh --day yesterday",
			schedule.JobOptions{MaxRun: time.Hour, Retries: 2, RetryDelay: 5 * time.Second}},
		{"sync", "*/5 * * * *", "Europe/Berlin", "FOO=bar ./sync", schedule.JobOptions{Overlap: schedule.OverlapQueue, Lease: 10 * time.Second}},
		{"standup", "CRON_TZ=America/New_York 0 9 * * mon-fri", "Europe/Berlin", "./standup.sh",
			schedule.JobOptions{Overlap: schedule.OverlapLimit, Limit: 3, Misfire: schedule.MisfireRunLatest, Lateness: time.Minute}},
		{"daily", "@daily", "Europe/Berlin", "true", schedule.JobOptions{}},
	}
	if len(jobs) != len(want) {
		t.Fatalf("got %d jobs, want %d", len(jobs), len(want))
	}
	for i, w := range want {
		j := jobs[i]
		opts := j.opts
		opts.Location = nil
		if j.name != w.name || j.spec != w.spec || j.loc.String() != w.zone || j.command != w.command || opts != w.opts {
			t.Errorf("job %d = %q %q %v %q %+v, want %+v", i, j.name, j.spec, j.loc, j.command, opts, w)
		}
	}
	// The zone setting applies to the lines after it: 02:30 Berlin is
	// 01:30 UTC in winter.
	next := jobs[1].sched.Next(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 11, 25, 1, 30, 0, 0, time.UTC); !next.Equal(want) {
		t.Errorf("nightly's next tick = %v, want %v", next, want)
	}
	// CRON_TZ on the line wins: 09:00 New York is 14:00 UTC in winter.
	next = jobs[3].sched.Next(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 11, 24, 14, 0, 0, 0, time.UTC); !next.Equal(want) {
		t.Errorf("standup's next tick = %v, want %v", next, want)
	}

	for _, c := range []struct{ tab, want string }{
		{"* * * * * job", "want SCHEDULE NAME COMMAND"},
		{"61 * * * * job x", "job \"job\""},
		{"@every 1s a x\n@every 2s a y", "tab:2: job \"a\" is already on line 1"},
		{"TZ=Mars/Olympus", "tab:1: unknown time zone"},
		{"TZ=UTC @every 1s a x", "write CRON_TZ=ZONE"},
		{"@every 1s a retries=-1 x", "retries=-1"},
		{"@every 1s a overlap=0 x", "overlap=0"},
		{"@every 1s a max-run=soon x", "not a duration"},
		{"@every 1s a lease=1ns x", "must be between"},
		{"@every 1s a misfire=all x", "want skip or latest"},
		{"@every 1s a retries=1", "has no command"},
		{"@every 1ns a x", "at least"},
		{"@every 1s bad\x00name x", "job name"},
	} {
		_, err := parseCrontab("tab", strings.NewReader(c.tab))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.tab, err, c.want)
		}
	}
}

func TestCronUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("@every 1s job\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("@every 1s job true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(dir, "long")
	if err := os.WriteFile(long, []byte("@every 1s job lease=45s true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// No server listens there: refused before any round trip.
	noJobs := "etcd://127.0.0.1:" + strconv.Itoa(port)
	zk := "zk://127.0.0.1:" + strconv.Itoa(port)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cron", "--store", noJobs, good}, "has no job records (driver.JobStore); leash cron needs it"},
		{[]string{"jobs", "--store", noJobs}, "has no job records (driver.JobStore); leash jobs needs it"},
		{[]string{"cron", "--store", "mem://"}, "one crontab FILE"},
		{[]string{"cron", "--store", "mem://", bad}, bad + ":1: want SCHEDULE NAME COMMAND"},
		{[]string{"cron", "--store", "mem://", filepath.Join(dir, "none")}, "no such file"},
		{[]string{"cron", "--store", "mem://", "--lease", "1ns", bad}, "--lease"},
		{[]string{"jobs", "--store", "mem://", "-n", "-1"}, "-n -1"},
		{[]string{"jobs", "--store", "mem://", "--file", bad}, bad + ":1:"},
		// A lock on ZooKeeper ends with its session: a longer lease is
		// refused, as by leash run.
		{[]string{"cron", "--store", zk, "--lease", "45s", good}, "longer than the ZooKeeper session timeout"},
		{[]string{"cron", "--store", zk, long}, long + ":1: job job: lease=: --lease 45s is longer than the ZooKeeper session timeout"},
	} {
		code, _, stderr := run(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("leash %q: %d %q, want %d and %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
	// A ZooKeeper ensemble that cannot be reached is said at start.
	if code, _, stderr := run(t, "cron", "--store", zk, good); code != exitStore || !strings.Contains(stderr, "reach") {
		t.Errorf("leash cron on an unreachable zk:// = %d %q, want %d", code, stderr, exitStore)
	}
}

// TestCronReloadAndShutdown runs leash cron on a redis-server: jobs run
// with LEASH_FENCE and LEASH_TICK, a failed command is recorded with its
// exit status, SIGHUP swaps the jobs (and a bad file on reload keeps the
// old ones), and SIGTERM stops a running command (SIGTERM to its group),
// records the run cancelled, frees its lock and exits 0; 'leash jobs'
// shows all of it.
func TestCronReloadAndShutdown(t *testing.T) {
	r := sharedRedis(t)
	store := "redis://" + r.Addr
	dir := t.TempDir()
	tab, out := filepath.Join(dir, "crontab"), filepath.Join(dir, "out")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(tab, []byte(strings.ReplaceAll(s, "OUT", out)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	prefix := fmt.Sprintf("test/%s/%d/", t.Name(), time.Now().UnixNano()) // new jobs on every run (-count)
	write(`@every 1s ` + prefix + `a  echo "a $LEASH_NAME $LEASH_TICK $LEASH_FENCE $LEASH_ATTEMPT" >> OUT
@every 1s ` + prefix + `fail  exit 3
`)
	// The daemon's log goes to a file, which the test reads while it runs.
	logPath := filepath.Join(dir, "stderr")
	p := startCommand(t, store, []string{"/bin/sh", "-c", `exec "$0" cron --kill-after 5s "$1" 2>"$2"`, leashBinary(t), tab, logPath})
	daemonLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	has := func(s string) bool {
		b, _ := os.ReadFile(out)
		return strings.Contains(string(b), s)
	}
	eventually(t, time.Minute, "a run of job a", func() bool { return has("a " + prefix + "a ") })
	// And a run of fail ended before the reload changes its command: a
	// reload cancels a run of the old command that had not started yet.
	eventually(t, time.Minute, "a failed run of job fail (exit 3)", func() bool {
		for _, l := range strings.Split(daemonLog(), "\n") {
			if strings.Contains(l, `msg="job failed"`) && strings.Contains(l, " job="+prefix+"fail ") && strings.Contains(l, " status=3 ") {
				return true
			}
		}
		return false
	})
	line := strings.Fields(readLog(out)[0])
	if _, err := time.Parse(time.RFC3339Nano, line[2]); err != nil || line[3] == "" || line[4] != "1" {
		t.Errorf("the command's environment: %q", line)
	}

	// Reload: a goes, b comes (a command that runs until SIGTERM), fail
	// changes its command.
	write(`@every 1s ` + prefix + `b  echo "b started $$" >> OUT; trap 'echo "b got SIGTERM" >> OUT; exit 143' TERM; while :; do sleep 0.05; done
@every 1s ` + prefix + `fail  echo fail4 >> OUT; exit 4
`)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "job b started, and fail changed", func() bool { return has("b started") && has("fail4") })
	eventually(t, time.Minute, "the reload logged", func() bool { return strings.Contains(daemonLog(), "crontab reloaded") })

	// A bad file on reload changes nothing.
	write("@every 1s " + prefix + "c\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the bad reload logged", func() bool {
		return strings.Contains(daemonLog(), "crontab not reloaded; the jobs stay as they were")
	})
	nA := strings.Count(readFile(t, out), "a "+prefix)

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, time.Minute); code != exitOK {
		t.Errorf("leash cron exited %d after SIGTERM, want 0; stderr:\n%s", code, daemonLog())
	}
	if !has("b got SIGTERM") {
		t.Errorf("the running command did not get SIGTERM at shutdown; out:\n%s", readFile(t, out))
	}
	if n := strings.Count(readFile(t, out), "a "+prefix); n != nA {
		t.Errorf("job a ran %d more times after it was removed", n-nA)
	}
	assertFree(t, newRDB(t, r.Addr), prefix+"b")

	write("@every 1s " + prefix + "b  true\n@every 1s " + prefix + "fail  exit 3\n")
	code, stdout, stderr := run(t, "jobs", "--store", store, "--json", "-n", "0", "--file", tab, prefix+"*")
	if code != exitOK {
		t.Fatalf("leash jobs: %d %s", code, stderr)
	}
	var jobs []jobJSON
	if err := json.Unmarshal([]byte(stdout), &jobs); err != nil {
		t.Fatalf("leash jobs --json: %v\n%s", err, stdout)
	}
	got := map[string]jobJSON{}
	for _, j := range jobs {
		got[strings.TrimPrefix(j.Job, prefix)] = j
	}
	if len(got) != 3 || got["a"].Schedule != "@every 1s" || got["a"].Next == "" || got["b"].Next == "" || got["fail"].Next == "" {
		t.Fatalf("leash jobs: want a (not in the file: its schedule from the store), b and fail, each with a next tick; got %s", stdout)
	}
	outcome := func(name string) map[string]int {
		n := map[string]int{}
		for _, r := range got[name].Runs {
			n[r.Outcome]++
			if r.Outcome != "missed" && (r.Host == "" || r.PID != p.cmd.Process.Pid || r.Started == "") {
				t.Errorf("job %s: run without where or when: %+v", name, r)
			}
		}
		return n
	}
	if n := outcome("a"); n["ok"] != nA {
		t.Errorf("job a: outcomes %v, want %d ok (the runs in its output)", n, nA)
	}
	if n := outcome("fail"); n["failed"] == 0 || n["ok"] != 0 {
		t.Errorf("job fail: outcomes %v, want failed runs only", n)
	}
	errs := map[string]int{}
	for _, r := range got["fail"].Runs {
		if r.Outcome == "failed" {
			errs[r.Error]++
		}
	}
	if len(errs) != 2 || errs["exit status 3"] == 0 || errs["exit status 4"] == 0 {
		t.Errorf("job fail: its failed runs' errors are %v, want \"exit status 3\" before the reload and \"exit status 4\" after", errs)
	}
	last := got["b"].Runs[0]
	if last.Outcome != "cancelled" || !strings.Contains(last.Error, "shut down") || last.Fence == 0 {
		t.Errorf("job b's last run: %+v, want cancelled by the shutdown, with a fence", last)
	}

	// The table, for a person.
	code, stdout, _ = run(t, "jobs", "--store", store, "-n", "2", "--file", tab, prefix+"fail")
	if code != exitOK || !strings.Contains(stdout, prefix+"fail  (@every 1s)  next ") || !strings.Contains(stdout, "exit status 3") {
		t.Errorf("leash jobs: %d\n%s", code, stdout)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCronMaxRunKillsAStubbornCommand: a run past its max-run gets SIGTERM;
// a command that ignores it gets SIGKILL after --kill-after; the run is
// recorded cancelled and its lock freed.
func TestCronMaxRunKillsAStubbornCommand(t *testing.T) {
	r := sharedRedis(t)
	store := "redis://" + r.Addr
	dir := t.TempDir()
	tab, out := filepath.Join(dir, "crontab"), filepath.Join(dir, "out")
	name := fmt.Sprintf("test/%s/%d", t.Name(), time.Now().UnixNano()) // a tick never claimed (-count)
	line := `@every 1h ` + name + ` misfire=latest max-run=500ms  echo "pid $$" >> ` + out +
		`; trap 'echo "got SIGTERM" >> ` + out + `' TERM; while :; do sleep 0.05; done` + "\n"
	if err := os.WriteFile(tab, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startLeash(t, store, "cron", "--kill-after", "500ms", tab)
	eventually(t, time.Minute, "the command stopped", func() bool {
		code, stdout, _ := run(t, "jobs", "--store", store, "--json", name)
		return code == exitOK && strings.Contains(stdout, `"outcome": "cancelled"`)
	})
	lines := readLog(out)
	if len(lines) < 2 || lines[1] != "got SIGTERM" {
		t.Fatalf("the command's output: %q, want its pid and then got SIGTERM", lines)
	}
	pid, _ := strconv.Atoi(strings.TrimPrefix(lines[0], "pid "))
	eventually(t, time.Minute, "the command killed", func() bool { return processGone(pid) })
	code, stdout, _ := run(t, "jobs", "--store", store, "--json", name)
	if code != exitOK || !strings.Contains(stdout, "MaxRun (500ms) passed") {
		t.Errorf("leash jobs: %d\n%s", code, stdout)
	}
	assertFree(t, newRDB(t, r.Addr), name)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, time.Minute); code != exitOK {
		t.Errorf("leash cron exited %d after SIGTERM", code)
	}
}

// TestCrontabSixFieldsWithDayNameSteps: a six-field expression whose
// day-of-week is day names with a step (mon-fri/2) is read as six fields,
// not as five fields and a job named mon-fri/2 (which would run at 00:00 on
// the 9th of each month, not at 09:00 on Monday, Wednesday and Friday).
func TestCrontabSixFieldsWithDayNameSteps(t *testing.T) {
	for _, dow := range []string{"mon-fri/2", "MON-FRI/2", "sun,tue-thu/2", "mon/2"} {
		line := "0 0 9 * * " + dow + " standup ./standup.sh"
		jobs, err := parseCrontab("tab", strings.NewReader(line))
		if err != nil {
			t.Errorf("%q: %v", line, err)
			continue
		}
		if j := jobs[0]; j.name != "standup" || j.spec != "0 0 9 * * "+dow || j.command != "./standup.sh" {
			t.Errorf("%q: job %q, schedule %q, command %q; want standup, 0 0 9 * * %s, ./standup.sh", line, j.name, j.spec, j.command, dow)
		}
	}
	// A job name is not a day-of-week field just because it holds one.
	jobs, err := parseCrontab("tab", strings.NewReader("0 9 * * * monsun-backup ./b"))
	if err != nil || jobs[0].name != "monsun-backup" || jobs[0].spec != "0 9 * * *" {
		t.Errorf("five fields and monsun-backup: %+v, %v", jobs, err)
	}
}

// TestCrontabRefusesLocalZone: TZ=Local (or CRON_TZ=Local) would read the
// jobs in each host's own zone, and hosts in different zones would claim
// different instants as the same job's ticks, each granted: a nightly job
// run once per zone. The file must name a zone.
func TestCrontabRefusesLocalZone(t *testing.T) {
	for _, tab := range []string{"TZ=Local\n0 30 2 * * * nightly ./n", "CRON_TZ=Local\n@daily d true",
		"CRON_TZ=Local 0 30 2 * * * nightly ./n"} {
		if _, err := parseCrontab("tab", strings.NewReader(tab)); err == nil || !strings.Contains(err.Error(), "Local") {
			t.Errorf("%q: error %v, want a refusal of the host's local zone", tab, err)
		}
	}
}

// TestCronReloadRefusesLeaseLongerThanSession: a crontab reloaded (SIGHUP)
// with a job whose lease= a ZooKeeper session cannot keep is refused, as
// at start, and the jobs stay as they were; no server is needed to tell.
func TestCronReloadRefusesLeaseLongerThanSession(t *testing.T) {
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	r := &cronConfig{store: storeFlags{url: "zk://127.0.0.1:" + strconv.Itoa(port)}, file: "tab"}
	conn, err := newConn(context.Background(), r.store)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	jobs, err := parseCrontab("tab", strings.NewReader("@every 1s job lease=45s true\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{r: r, conn: conn}
	if err := d.load(jobs); err == nil || !strings.Contains(err.Error(), "tab:1: job job: lease=") ||
		!strings.Contains(err.Error(), "ZooKeeper session timeout") {
		t.Errorf("load of a job with lease=45s on zk:// = %v; want the lease refused", err)
	}
	if len(d.jobs) != 0 {
		t.Errorf("jobs after the refused load: %v, want none added", d.jobs)
	}
}
