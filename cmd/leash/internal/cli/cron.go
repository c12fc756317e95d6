package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/schedule"
)

// clockOffsetEnv names the test-only environment variable that sets leash
// cron's clock apart from the system's, for tests of clock skew.
const clockOffsetEnv = "LEASH_TEST_CLOCK_OFFSET"

func cmdCron() *command {
	return &command{
		name:  "cron",
		usage: "cron [flags] FILE",
		short: "run the jobs of a crontab once per tick across every host running it",
		long: `
Cron is a daemon that runs the jobs of FILE, a crontab. Every host runs it
with the same file and the same store, and each tick of each job runs once
across all of them: not once per host, not twice when their clocks or start
times differ, not never when the host running it dies or hangs.

How. A tick is claimed, not a time window locked. Each tick is the instant
the job's schedule names, the same on every host. When a host's clock
reaches it, the host asks the store to claim it, and the store decides by
its own clock: the tick is granted once, and only while no later tick of the
job was claimed (a host whose clock runs behind finds it taken), and not
before the store's clock reaches it (a host whose clock runs ahead waits).
The host granted the tick takes the job's run lock (a lock named after the
job, renewed every lease/3, with a fencing token) and runs the command.
Every run is recorded in the store: tick, host, pid, start, duration,
outcome and error ('leash jobs' shows them). So with hosts' clocks apart by
any amount ahead of the store's, and behind it by less than the job's
lateness (default: its interval), every tick runs exactly once or is
recorded missed. Cron needs a store that keeps job records (every store
but etcd://); on one without, it exits 64 before any round trip.

A run ends with the command. A non-zero exit status records the run failed
("exit status N") and, with retries=N, this host runs it again after
retry-delay while the tick's window lasts, as it does a run stopped by
max-run, whatever its exit status. A run stopped by this daemon's shutdown
is recorded cancelled, and is run again only by a host that claims the tick
after that (one whose clock runs behind, say): the others claimed it while
it ran, and are not told how it ended. When the
run lock is lost while the command runs (its lease ran out because this
host paused or lost the store), or its max-run passes, the command's process
group gets SIGTERM, then SIGKILL after --kill-after, and the run is recorded
lost (or cancelled); the next tick runs wherever it is claimed. If the
daemon itself is killed, the shell of each running command gets SIGKILL at
once (on Linux and FreeBSD; see 'leash help run'), but processes the shell
started live on: a parent-death signal reaches only the daemon's own
children, so start the last program of a command line with exec where that
matters. The run reads lost once its lease ran out.

Signals. SIGHUP reloads FILE: new jobs start with their next tick, removed
ones claim no more ticks, and changed ones (schedule, options or command)
start anew; a run in progress goes on to its end. A file that does not
parse on reload is reported on stderr and the jobs stay as they were.
SIGTERM or SIGINT shuts the daemon down: no tick is claimed any more,
running commands get --grace to finish (default 0: SIGTERM at once), then
SIGTERM and SIGKILL after --kill-after, and each run's lock is released and
its end recorded before cron exits 0. Cron logs to stderr, one line per run
and per event.
` + crontabHelp + `

Flags:

  --lease DURATION       the run locks' lease, renewed every lease/3
                         (default 30s); a job's lease= overrides it
  --kill-after DURATION  SIGKILL a command's group this long after its
                         SIGTERM (default 10s; 0: SIGKILL at once)
  --grace DURATION       on shutdown, let running commands run this long
                         before they get SIGTERM (default 0)
  --keep N               runs kept in each job's history (default 100)
  --verbose              log every claim too
` + storeHelp + `

Testing. The environment variable ` + clockOffsetEnv + `=DURATION (such as
-300ms) sets this daemon's clock that far from the system's. It is for tests
of clock skew only: it moves when the daemon fires, never the store's clock
that judges each claim.

Exit status: 0 after a shutdown by SIGTERM or SIGINT; 64 for a bad command
line, a bad FILE or a store that keeps no job records; 69 when the store
cannot be reached at start; 77 when it refuses the credentials.

Example:

  $ leash cron --store redis://redis.internal:6379 /etc/leash.cron`,
		run: runCron,
	}
}

// cronConfig is what leash cron was asked to do.
type cronConfig struct {
	store     storeFlags
	file      string
	lease     *durationFlag
	killAfter *durationFlag
	grace     *durationFlag
	keep      int
	verbose   bool
	offset    time.Duration
}

func parseCron(e *env, argv []string) (*cronConfig, error) {
	c := cmdCron()
	fs := flags(e, c)
	r := &cronConfig{}
	r.store.register(fs)
	r.lease = durationVar(fs, "lease", leash.DefaultLease, "run locks' lease `duration`")
	r.killAfter = durationVar(fs, "kill-after", defaultKillAfter, "SIGKILL a command this `duration` after SIGTERM")
	r.grace = durationVar(fs, "grace", 0, "on shutdown, let commands run this `duration` before SIGTERM")
	fs.IntVar(&r.keep, "keep", driver.DefaultKeepRuns, "runs kept per job")
	fs.BoolVar(&r.verbose, "verbose", false, "log every claim")
	a, err := parseArgs(e, c, fs, argv)
	if err != nil {
		return nil, err
	}
	operands := append(a.operands, a.rest...)
	switch {
	case len(operands) != 1:
		return nil, usageErrorf("cron takes one crontab FILE, got %d: leash %s", len(operands), c.usage)
	case r.lease.d < leash.MinLease || r.lease.d > leash.MaxLease:
		return nil, usageErrorf("--lease %v: must be between %v and %v", r.lease.d, leash.MinLease, leash.MaxLease)
	case r.keep < 1 || r.keep > driver.MaxKeepRuns:
		return nil, usageErrorf("--keep %d: must be between 1 and %d", r.keep, driver.MaxKeepRuns)
	}
	if s := os.Getenv(clockOffsetEnv); s != "" {
		if r.offset, err = time.ParseDuration(s); err != nil {
			return nil, usageErrorf("%s=%q: not a duration", clockOffsetEnv, s)
		}
	}
	r.file = operands[0]
	return r, nil
}

// readCrontab reads and parses a crontab file.
func readCrontab(file string) ([]*cronJob, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseCrontab(file, f)
}

func runCron(e *env, argv []string) int {
	r, err := parseCron(e, argv)
	if err != nil {
		if errors.Is(err, errHelp) || errors.Is(err, errFlags) {
			return exitParse(err)
		}
		return e.fail("cron", err)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	jobs, err := readCrontab(r.file)
	if err != nil {
		return e.fail("cron", withStatus(exitUsage, err))
	}
	if err := sessionLeaseErr(r.store, r.lease.d); err != nil {
		return e.fail("cron", err)
	}
	var names []string
	for _, j := range jobs {
		names = append(names, j.name)
		if err := jobLeaseErr(r, j); err != nil { // before any round trip
			return e.fail("cron", err)
		}
	}
	ctx := context.Background()
	conn, err := openStore(ctx, r.store, func(c *conn) error {
		if _, ok := c.store.(driver.JobStore); !ok {
			return c.lacks("cron", "job records (driver.JobStore)")
		}
		return nil
	}, names...)
	if err != nil {
		return e.fail("cron", err)
	}
	defer conn.Close()
	c, err := conn.newClient(&leash.Options{
		Lease:          r.lease.d,
		ReleaseTimeout: min(max(r.lease.d, time.Second), maxReleaseTimeout),
		Command:        "leash cron " + r.file,
	})
	if err != nil {
		return e.fail("cron", err)
	}
	defer c.Close()
	level := slog.LevelInfo
	if r.verbose {
		level = slog.LevelDebug
	}
	d := &daemon{e: e, r: r, conn: conn, c: c, out: shareable(e.stdout), errOut: shareable(e.stderr)}
	d.log = slog.New(slog.NewTextHandler(d.errOut, &slog.HandlerOptions{Level: level}))
	if d.s, err = d.newScheduler(); err != nil {
		return e.fail("cron", err)
	}
	if err := d.load(jobs); err != nil {
		return e.fail("cron", withStatus(exitUsage, err))
	}
	d.log.Info("leash cron started", slog.String("file", r.file), slog.Int("jobs", len(jobs)), slog.String("store", conn.desc))
	if r.offset != 0 {
		d.log.Warn("test-only clock offset in effect", slog.String("env", clockOffsetEnv), slog.Duration("offset", r.offset))
	}
	if _, note := conn.graceNote(ctx, ""); note != "" {
		// Runs find their locks refused until it ends, and are recorded
		// skipped: say why, once.
		d.log.Warn(note)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	// Owner: runCron. Stops when runCtx ends and every run has ended.
	go func() { done <- d.s.Run(runCtx) }()
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				d.reload()
				continue
			}
			if runCtx.Err() == nil {
				d.log.Info("shutting down", slog.String("signal", signalName(sig)))
				stop()
			}
		case err := <-done:
			stop()
			if err != nil {
				return e.fail("cron", err)
			}
			d.log.Info("leash cron stopped")
			return exitOK
		}
	}
}

// jobLeaseErr is the usage error for a job whose lease= a ZooKeeper store
// cannot keep (see sessionLeaseErr), or nil.
func jobLeaseErr(r *cronConfig, j *cronJob) error {
	if j.opts.Lease <= 0 {
		return nil
	}
	if err := sessionLeaseErr(r.store, j.opts.Lease); err != nil {
		return fmt.Errorf("%s:%d: job %s: lease=: %w", r.file, j.line, j.name, err)
	}
	return nil
}

// daemon is a running leash cron.
type daemon struct {
	e           *env
	r           *cronConfig
	conn        *conn
	c           *leash.Client
	s           *schedule.Scheduler
	log         *slog.Logger
	out, errOut io.Writer
	jobs        map[string]*cronJob // the jobs added; only the main goroutine touches it
}

func (d *daemon) newScheduler() (*schedule.Scheduler, error) {
	grace := d.r.grace.d
	if grace == 0 {
		grace = schedule.NoGrace
	}
	opts := &schedule.Options{Grace: grace, Keep: d.r.keep, Logger: d.log}
	if off := d.r.offset; off != 0 {
		opts.Now = func() time.Time { return time.Now().Add(off) }
	}
	return schedule.New(d.c, opts)
}

// load checks jobs and adds them to the scheduler, in place of the jobs it
// has; on an error, nothing changed. Jobs that did not change keep running.
func (d *daemon) load(jobs []*cronJob) error {
	next := map[string]*cronJob{}
	for _, j := range jobs {
		if err := checkName(d.conn.store, j.name); err != nil {
			return fmt.Errorf("%s:%d: %w", d.r.file, j.line, err)
		}
		if err := jobLeaseErr(d.r, j); err != nil { // on a reload too
			return err
		}
		next[j.name] = j
	}
	// Every job must be accepted before any is changed: a scratch
	// scheduler, never run, checks them (no round trip).
	scratch, err := d.newScheduler()
	if err != nil {
		return err
	}
	for _, j := range jobs {
		opts := j.opts
		if err := scratch.Add(j.name, j.spec, d.jobFunc(j), &opts); err != nil {
			return fmt.Errorf("%s:%d: %s", d.r.file, j.line, strings.TrimPrefix(err.Error(), "leash: invalid argument: "))
		}
	}
	var added, removed, changed []string
	for name, old := range d.jobs {
		if j, ok := next[name]; !ok || !old.same(j) {
			d.s.Remove(name)
			if !ok {
				removed = append(removed, name)
			}
		}
	}
	for name, j := range next {
		old, ok := d.jobs[name]
		if ok && old.same(j) {
			continue
		}
		opts := j.opts
		if err := d.s.Add(name, j.spec, d.jobFunc(j), &opts); err != nil {
			// Checked above; only a shutdown under way can refuse it.
			d.log.Error("job not added", slog.String("job", name), slog.Any("error", err))
			continue
		}
		if ok {
			changed = append(changed, name)
		} else {
			added = append(added, name)
		}
	}
	if d.jobs != nil {
		d.log.Info("crontab reloaded", slog.Any("added", added), slog.Any("removed", removed), slog.Any("changed", changed))
	}
	d.jobs = next
	return nil
}

// reload reads the file again and puts its jobs in place of the old ones,
// or keeps the old ones and logs why.
func (d *daemon) reload() {
	jobs, err := readCrontab(d.r.file)
	if err == nil {
		err = d.load(jobs)
	}
	if err != nil {
		d.log.Error("crontab not reloaded; the jobs stay as they were", slog.Any("error", err))
	}
}

// jobFunc returns the function that runs j's command for one run.
func (d *daemon) jobFunc(j *cronJob) schedule.Func {
	return func(ctx context.Context, run schedule.Run) error {
		log := d.log.With(slog.String("job", j.name), slog.Time("tick", run.Tick), slog.Int("attempt", run.Attempt),
			slog.Int64("fence", run.Fence))
		cmd := exec.Command("/bin/sh", "-c", j.command)
		cmd.Stdout, cmd.Stderr = d.out, d.errOut
		cmd.Env = append(os.Environ(),
			"LEASH_NAME="+j.name,
			"LEASH_FENCE="+strconv.FormatInt(run.Fence, 10),
			"LEASH_TICK="+run.Tick.UTC().Format(time.RFC3339Nano),
			"LEASH_ATTEMPT="+strconv.Itoa(run.Attempt))
		started := time.Now()
		if err := startGroup(cmd); err != nil {
			log.Error("command not started", slog.Any("error", err))
			return fmt.Errorf("cannot start /bin/sh: %v", err)
		}
		log.Info("job started", slog.Int("pid", cmd.Process.Pid))
		g := &groupStop{pgid: cmd.Process.Pid, killAfter: d.r.killAfter.d, say: func(format string, a ...any) {
			log.Warn(fmt.Sprintf(format, a...))
		}}
		exited := make(chan error, 1)
		// Owner: this run. Stops when the command exits.
		go func() { exited <- cmd.Wait() }()
		stopped := ctx.Done()
	loop:
		for {
			select {
			case <-stopped:
				stopped = nil
				log.Warn("stopping the command", slog.String("why", oneLine(context.Cause(ctx).Error())),
					slog.String("signal", map[bool]string{true: "SIGKILL", false: "SIGTERM"}[g.killAfter == 0]))
				g.term()
			case <-g.timer:
				log.Warn("the command outlived --kill-after; sending SIGKILL", slog.Duration("kill_after", g.killAfter))
				g.kill()
			case <-exited:
				break loop
			}
		}
		status := exitStatus(cmd.ProcessState)
		took := time.Since(started).Round(time.Millisecond)
		if ctx.Err() != nil {
			g.clear(nil)
			log.Warn("job stopped", slog.Int("status", status), slog.Duration("took", took))
			return fmt.Errorf("stopped (%s); the command exited with status %d", oneLine(context.Cause(ctx).Error()), status)
		}
		if groupAlive(g.pgid) {
			log.Warn("the command left processes running in its process group; they run without the lock", slog.Int("pgid", g.pgid))
		}
		if status != 0 {
			log.Warn("job failed", slog.Int("status", status), slog.Duration("took", took))
			return fmt.Errorf("exit status %d", status)
		}
		log.Info("job ended", slog.Int("status", 0), slog.Duration("took", took))
		return nil
	}
}

// shareable returns w for concurrent commands and log lines: a file as it
// is (the commands write to it directly), anything else behind a mutex.
func shareable(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok {
		return f
	}
	return &lockedWriter{w: w}
}

// lockedWriter serializes writes of concurrent commands and log lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
