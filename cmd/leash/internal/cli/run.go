package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// forwarded are the signals leash run passes to the command, and that stop
// it while it waits for the lock.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// Defaults of leash run.
const (
	defaultKillAfter = 10 * time.Second
	// maxReleaseTimeout bounds each release round trip; a release of a lost
	// lock on an unreachable store need not wait longer than the lease, after
	// which the server frees the lock anyway.
	maxReleaseTimeout = 5 * time.Second
)

func cmdRun() *command {
	return &command{
		name:  "run",
		usage: "run [flags] NAME -- COMMAND [ARGS...]",
		short: "run a command while holding a lock: a distributed flock",
		long: `
Run takes the lock NAME, runs COMMAND with ARGS while holding it, and
releases it when the command ends. Put the same line in the crontab of every
host and at most one host runs the command at a time. Run works on any
store (it needs only locks); mem:// locks only within the one leash process.

Waiting. By default run waits for the lock as long as it takes; a release
wakes it at once. --wait bounds the wait and --no-wait (or --wait 0) gives up
at once when someone else holds the lock; the status is then 75 and the
command does not run.

Holding. The lock is a lease (--lease, 30s by default) that run renews every
lease/3 while the command runs, so a lock whose holder host dies frees itself
within one lease. --max-hold bounds the whole hold: when it is reached the
lock is treated as lost.

At least. --at-least keeps the lock for that long after it was taken, even
when the command ends sooner, so that a host whose cron fires a little late
finds the lock still held and does not run the same job again (ShedLock's
lockAtLeastFor). run exits as soon as the command does: the rest of the hold
is left to the lease on the server, not to a sleeping process. Use it with
--no-wait, or a late host would wait for the lock and then run the job too.

Who holds it. 'leash ls' and 'leash show' name the holder by this host, the
pid of leash and the command, with when it took the lock, and mark the rest
of an --at-least hold as its tail, after the command ended.

The command. COMMAND is looked up in PATH before the lock is taken. It runs
in its own process group (at an interactive terminal, that group gets the
terminal, so the command can read it), with leash's standard input and
output, and gets these variables in its environment:

  LEASH_NAME    the lock name
  LEASH_FENCE   the fencing token of this hold: larger than that of every
                earlier hold of the lock; pass it to the resources the command
                writes so that they can reject a stale holder
  LEASH_OWNER   the owner id recorded in the store (new for every run)

Signals. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to leash
are passed on to the command's process group. While leash is still waiting
for the lock, they make it stop waiting and exit with 128+N. A signal that
leash was started with ignored (SIGHUP under nohup) stays ignored.

Stops (on Linux). Ctrl-Z at the terminal stops the command, and leash stops
its whole job with it (itself, and the script or pipeline it runs in) so
that the shell gets its prompt back; a stop of leash's job (Ctrl-Z when the
command does not have the terminal, another leash run of the same job
stopping) stops the command too; a command started in the background that
reads the terminal stops the job in the same way. fg continues them, once
leash has checked with the store that the lock is still held, and gives
the command the terminal. A stopped leash does not renew the lock: if they
stay stopped past its lease (suspended time counts), or the lock is gone
from the store, the command gets SIGKILL without running again once leash
is continued, and leash exits 76 (see below). Where no shell's job control
would continue leash (it leads its own session, or was left to init),
Ctrl-Z does not stop it: it says so and continues the command; a command
that reads the terminal from the background there is ended (SIGTERM, as
when the lock is lost), since nothing could bring it to the foreground.

Losing the lock. When the lock is lost while the command runs (it was
deleted or force-unlocked, its lease ran out because the store was
unreachable or the host paused, or --max-hold was reached), run sends SIGTERM
to the command's process group, SIGKILL after --kill-after, and exits with
status 76 whatever the command's own status. The lock is counted as lost
slightly before the store can give it to someone else (a safety margin of
lease/20); a command that ignores SIGTERM may run up to --kill-after past
that point, so keep --kill-after short where that matters, and use
LEASH_FENCE. If leash itself is killed, the command gets SIGKILL at once,
since nobody renews the lock any more: on Linux and FreeBSD, even when leash
gets SIGKILL or crashes. macOS, OpenBSD and NetBSD have no parent-death
signal: there a leash that is sent SIGKILL (or crashes) leaves its command
running without the lock, which frees itself within one lease, so another
host may start the job while it runs. Stop leash with SIGTERM, never
SIGKILL, on those systems.

Release. The lock is released on every way out: when the command ends, when
it cannot be started, when leash is interrupted, and when the lock is lost
(in case the store still has it). A store that cannot be reached to release
it frees it when the lease ends.

The restart grace. After the lock server restarts and may have lost locks
(or when it is new), no lock is granted until every lease it may have
forgotten has run out. run then says so on stderr, even with --quiet, and
waits (or, with --no-wait, exits 75); see 'leash help store'.

Flags:

  --wait DURATION        give up when the lock is not free within DURATION
                         (default: wait as long as it takes)
  --no-wait              give up at once when someone else holds the lock
  --lease DURATION       lease, renewed every lease/3 (default 30s)
  --max-hold DURATION    longest hold, renewals included (default: no limit)
  --at-least DURATION    keep the lock this long after taking it (default 0)
  --kill-after DURATION  SIGKILL the command this long after the SIGTERM that
                         follows a lost lock (default 10s; 0: SIGKILL at once)
  --quiet                print nothing when someone else holds the lock; the
                         status still says so (a refusal by the restart
                         grace is still reported: no one holds the lock)
  --replicas N           count the grant and each renewal only once N
                         replicas have acknowledged it (Redis WAIT, up to 1s),
                         which narrows the window in which a failover loses
                         the lock; a grant they do not acknowledge is undone
                         and run exits 69 without running the command, and
                         renewals they do not acknowledge lose the lock like
                         an unreachable store (default 0: off; Redis only,
                         the replicas URL parameter; not on Cluster)
` + storeHelp + `

Exit status:

` + exitStatusText() + `
Examples:

  # Once across all hosts every night, even when clocks differ by minutes:
  0 3 * * *  leash run --no-wait --quiet --at-least 10m nightly-report -- ./report.sh

  # Wait up to 5 minutes for a migration lock, then run:
  leash run --wait 5m --store rediss://leash:secret@redis.internal:6380 \
      --ca-file /etc/ssl/redis-ca.pem schema-migrate -- ./migrate up

  # Use the fencing token in a shell command:
  leash run orders-sync -- sh -c 'sync-orders --fence "$LEASH_FENCE"'`,
		run: runRun,
	}
}

// runConfig is what leash run was asked to do.
type runConfig struct {
	store     storeFlags
	name      string
	argv      []string
	path      string // the command, looked up in PATH
	wait      *durationFlag
	noWait    bool
	lease     *durationFlag
	maxHold   *durationFlag
	atLeast   *durationFlag
	killAfter *durationFlag
	quiet     bool
}

// defineRunFlags defines leash run's flags on fs, bound to a new runConfig.
func defineRunFlags(fs *flag.FlagSet) *runConfig {
	r := &runConfig{}
	r.store.register(fs)
	r.wait = durationVar(fs, "wait", 0, "give up when the lock is not free within `duration`")
	fs.BoolVar(&r.noWait, "no-wait", false, "give up at once when the lock is held")
	r.lease = durationVar(fs, "lease", leash.DefaultLease, "lease `duration`, renewed every lease/3")
	r.maxHold = durationVar(fs, "max-hold", 0, "longest hold `duration` (default: no limit)")
	r.atLeast = durationVar(fs, "at-least", 0, "keep the lock this `duration` after taking it")
	r.killAfter = durationVar(fs, "kill-after", defaultKillAfter, "SIGKILL the command this `duration` after SIGTERM on loss")
	fs.BoolVar(&r.quiet, "quiet", false, "print nothing when the lock is not acquired")
	fs.IntVar(&r.store.replicas, "replicas", 0, "count a grant or renewal only once `n` replicas acknowledged it")
	return r
}

// parseRun parses and checks leash run's command line, without any network call.
func parseRun(e *env, argv []string) (*runConfig, error) {
	c := cmdRun()
	fs := flags(e, c)
	r := defineRunFlags(fs)
	a, err := parseArgs(e, c, fs, argv)
	if err != nil {
		return nil, err
	}
	switch {
	case len(a.operands) == 0:
		return nil, usageErrorf("missing the lock name: leash %s", c.usage)
	case len(a.operands) > 1 && !a.dash:
		return nil, usageErrorf("missing \"--\" between the lock name and the command: leash run %s -- %s", a.operands[0], joinArgs(a.operands[1:]))
	case len(a.operands) > 1:
		return nil, usageErrorf("one lock name before \"--\", got %d: %s", len(a.operands), joinArgs(a.operands))
	case !a.dash:
		return nil, usageErrorf("missing \"--\" and the command to run: leash run %s -- COMMAND [ARGS...]", a.operands[0])
	case len(a.rest) == 0:
		return nil, usageErrorf("missing the command after \"--\": leash run %s -- COMMAND [ARGS...]", a.operands[0])
	case r.noWait && r.wait.set:
		return nil, usageErrorf("--wait and --no-wait contradict each other: give one")
	case r.lease.d < leash.MinLease || r.lease.d > leash.MaxLease:
		return nil, usageErrorf("--lease %v: must be between %v and %v", r.lease.d, leash.MinLease, leash.MaxLease)
	case r.maxHold.set && r.maxHold.d == 0:
		return nil, usageErrorf("--max-hold 0: must be positive (leave it out for no limit)")
	case r.store.replicas < 0:
		return nil, usageErrorf("--replicas %d: must be 0 (off) or more", r.store.replicas)
	case r.atLeast.d > leash.MaxLease:
		return nil, usageErrorf("--at-least %v: must be at most %v", r.atLeast.d, leash.MaxLease)
	}
	r.name, r.argv = a.operands[0], a.rest
	if r.wait.set && r.wait.d == 0 {
		r.noWait = true
	}
	return r, nil
}

func joinArgs(a []string) string {
	s := ""
	for i, x := range a {
		if i > 0 {
			s += " "
		}
		s += strconv.Quote(x)
	}
	return s
}

func runRun(e *env, argv []string) int {
	r, err := parseRun(e, argv)
	if err != nil {
		if errors.Is(err, errHelp) || errors.Is(err, errFlags) {
			return exitParse(err)
		}
		return e.fail("run", err)
	}
	// From here on, the forwarded signals are ours: they stop the wait, or
	// go to the command.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, caught()...)
	defer signal.Stop(sigs)

	if err := sessionLeaseErr(r.store, r.lease.d); err != nil {
		return e.fail("run", err)
	}
	conn, err := newConn(context.Background(), r.store, r.name)
	if err != nil {
		return e.fail("run", err)
	}
	defer conn.Close()
	if _, session := conn.store.(driver.SessionStore); session && r.atLeast.d > 0 {
		// A session keeps its locks exactly as long as it lives: none can
		// be left to expire after the command (see Hold.UnlockAfter).
		return e.fail("run", conn.lacks("run --at-least", "leases that outlive their holder's session"))
	}
	if r.path, err = lookPath(r.argv[0]); err != nil {
		return e.fail("run", err)
	}
	var sig os.Signal
	if sig = interruptible(sigs, func(ctx context.Context) { err = conn.ping(ctx) }); sig != nil {
		return e.interrupted(sig, "while connecting to the store")
	}
	if err != nil {
		return e.fail("run", err)
	}
	c, err := conn.newClient(&leash.Options{
		Lease:          r.lease.d,
		MaxHold:        r.maxHold.d,
		ReleaseTimeout: min(max(r.lease.d, time.Second), maxReleaseTimeout),
		Command:        commandLine(r.argv),
	})
	if err != nil {
		return e.fail("run", err)
	}
	defer c.Close()
	return (&runner{e: e, r: r, c: c, conn: conn, sigs: sigs}).run()
}

// caught returns the forwarded signals that leash was not started with
// ignored. An ignored signal stays ignored, for leash and the command alike:
// under nohup, SIGHUP must not reach the command through leash.
func caught() []os.Signal {
	var sigs []os.Signal
	for _, s := range forwarded {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	return sigs
}

// lookPath finds the command before the lock is taken, so that a typo in a
// crontab costs no lock.
func lookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	switch {
	case err == nil:
		return p, nil
	case errors.Is(err, exec.ErrNotFound):
		return "", withStatus(exitNotFound, fmt.Errorf("command %q not found", name))
	case errors.Is(err, fs.ErrNotExist):
		return "", withStatus(exitNotFound, fmt.Errorf("command %q: no such file", name))
	}
	return "", withStatus(exitCannotRun, fmt.Errorf("command %q cannot be run: %v", name, errors.Unwrap(err)))
}

// interruptible runs f with a context that is cancelled when a signal
// arrives on sigs, and returns that signal, or nil when f ended first. It
// always waits for f to return.
func interruptible(sigs <-chan os.Signal, f func(ctx context.Context)) os.Signal {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	// Owner: interruptible. Stops when f returns, which cancel hastens.
	go func() {
		defer close(done)
		f(ctx)
	}()
	select {
	case <-done:
		return nil
	case s := <-sigs:
		cancel()
		<-done
		return s
	}
}

// interrupted reports a signal that stopped leash before the command ran and
// returns 128+N.
func (e *env) interrupted(sig os.Signal, when string) int {
	e.errorf("run: %s %s; the command did not run", signalName(sig), when)
	return exitSignal + int(sig.(syscall.Signal))
}

func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if name := sigNames[s]; name != "" {
			return name
		}
	}
	return sig.String()
}

var sigNames = map[syscall.Signal]string{
	syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP",
	syscall.SIGQUIT: "SIGQUIT", syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGKILL: "SIGKILL", syscall.SIGTSTP: "SIGTSTP", syscall.SIGTTIN: "SIGTTIN", syscall.SIGTTOU: "SIGTTOU",
}

// runner runs one command under one lock.
type runner struct {
	e    *env
	r    *runConfig
	c    *leash.Client
	conn *conn
	sigs chan os.Signal
}

func (rn *runner) run() int {
	e, r := rn.e, rn.r
	// A force-unlock frees the name for others once the command's process
	// group is gone, not when it is sent SIGTERM: supervise unlocks then.
	m := rn.c.Mutex(r.name, &leash.LockOptions{AckRevokeOnUnlock: true})
	var (
		hold *leash.Hold
		err  error
	)
	sig := interruptible(rn.sigs, func(ctx context.Context) {
		if r.wait.set {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, r.wait.d)
			defer cancel()
		}
		hold, err = m.TryLock(ctx)
		if r.noWait || !errors.Is(err, leash.ErrNotAcquired) || ctx.Err() != nil {
			return
		}
		var na *leash.NotAcquiredError
		if errors.As(err, &na) && na.Grace {
			// Never wait silently for a grace, even with --quiet.
			e.errorf("run: waiting for lock %q: %s", r.name, graceWhy(na))
		}
		hold, err = m.Lock(ctx)
	})
	if sig != nil {
		if hold != nil { // granted just as the signal came
			_ = hold.Unlock(context.Background())
		}
		return e.interrupted(sig, "while waiting for the lock")
	}
	if err != nil {
		return rn.notAcquired(err)
	}
	acquired := time.Now()
	select {
	case sig := <-rn.sigs:
		_ = hold.Unlock(context.Background())
		return e.interrupted(sig, "just as the lock was taken")
	default:
	}
	cmd := exec.Command(rn.r.path, r.argv[1:]...)
	cmd.Args[0] = r.argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, e.stdout, e.stderr
	cmd.Env = append(os.Environ(),
		"LEASH_NAME="+r.name,
		"LEASH_FENCE="+strconv.FormatInt(hold.Fence(), 10),
		"LEASH_OWNER="+hold.Owner())
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	tty := foregroundTTY()
	if tty >= 0 {
		// At a terminal, the command's group gets it (see terminal.go).
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, tty
	}
	if err := startGroup(cmd); err != nil {
		_ = hold.Unlock(context.Background())
		status := exitCannotRun
		if errors.Is(err, fs.ErrNotExist) {
			status = exitNotFound
		}
		return e.fail("run", withStatus(status, fmt.Errorf("cannot start %q: %v", r.argv[0], errors.Unwrap(err))))
	}
	if tty >= 0 {
		defer reclaimTTY(tty, cmd.Process.Pid)
	}
	return rn.supervise(cmd, hold, acquired)
}

// stillHeld reports whether hold is still held after leash was stopped
// with left of its validity: for stopped by a clock that counts a suspended
// machine's sleep, awake by one that does not (the hold's own deadline
// follows that one). None left, or the store saying it is lost, is lost.
// A store that cannot be reached within a few seconds leaves the answer to
// the validity left (the watchdog goes on renewing, and tells if it cannot)
// unless the machine slept meanwhile: then the hold's deadline is wrong by
// that sleep, and without the store's word the lock is taken for lost.
func stillHeld(hold *leash.Hold, left, stopped, awake time.Duration) bool {
	rest := left - stopped
	if hold.Err() != nil || rest <= 0 {
		return false
	}
	start := bootTime()
	ctx, cancel := context.WithTimeout(context.Background(), min(rest, stillHeldWait))
	defer cancel()
	err := hold.Renew(ctx)
	var lost *leash.LostError
	switch {
	case errors.As(err, &lost):
		return false
	case err != nil && (stopped-awake > time.Second || rest-(bootTime()-start) <= 0):
		return false
	}
	return hold.Err() == nil
}

// stillHeldWait bounds stillHeld's renewal: leash holds the terminal
// meanwhile, and passes on no signal.
const stillHeldWait = 5 * time.Second

// notAcquired reports a failed acquisition.
func (rn *runner) notAcquired(err error) int {
	var na *leash.NotAcquiredError
	if !errors.As(err, &na) {
		if errors.Is(err, leash.ErrInvalidArgument) {
			return rn.e.fail("run", err)
		}
		return rn.e.fail("run", rn.conn.fail(err))
	}
	if na.Grace {
		// Printed even with --quiet: no one holds the lock, and every host
		// skips the job until the grace ends.
		how := "not waiting (--no-wait)"
		if !rn.r.noWait {
			how = fmt.Sprintf("after waiting %v (--wait)", rn.r.wait.d)
		}
		rn.e.errorf("run: lock %q not acquired, %s: %s; the command did not run", rn.r.name, how, graceWhy(na))
		return exitNotAcquired
	}
	if rn.r.quiet {
		return exitNotAcquired
	}
	left := ""
	if na.Remaining >= 0 {
		left = fmt.Sprintf(" (%v of its lease left)", na.Remaining.Round(time.Millisecond))
	}
	if rn.r.noWait {
		rn.e.errorf("run: lock %q is held by another owner%s; not waiting (--no-wait); the command did not run", rn.r.name, left)
	} else {
		rn.e.errorf("run: lock %q still held by another owner after waiting %v (--wait)%s; the command did not run", rn.r.name, rn.r.wait.d, left)
	}
	return exitNotAcquired
}

// supervise forwards signals to the running command, stops it when the lock
// is lost, and releases the lock when it ends. Leash's job stops when the
// command stops at the terminal (Ctrl-Z), the command when leash's job
// stops, and both run on when continued (see stopJob).
func (rn *runner) supervise(cmd *exec.Cmd, hold *leash.Hold, acquired time.Time) int {
	e, r := rn.e, rn.r
	g := &groupStop{pgid: cmd.Process.Pid, killAfter: r.killAfter.d, say: func(format string, a ...any) {
		e.errorf("run: "+format, a...)
	}}
	exited := make(chan error, 1)
	// Owner: supervise. Stops when the command exits.
	go func() { exited <- cmd.Wait() }()
	// The command's stops and the job's (see stopJob), where leash can
	// tell them apart.
	var chld, jobStop chan os.Signal
	ctty := controllingTTY()
	if followsStops {
		chld = make(chan os.Signal, 1)
		signal.Notify(chld, syscall.SIGCHLD)
		defer signal.Stop(chld)
		select { // a stop before Notify: waitid still reports it
		case chld <- syscall.SIGCHLD:
		default: // a real SIGCHLD is queued already
		}
		jobStop = make(chan os.Signal, 1)
		signal.Notify(jobStop, syscall.SIGTSTP, syscall.SIGTTIN)
		defer signal.Stop(jobStop)
		// Not SIGTTOU, which leash's own writes to the terminal from the
		// background raise under "stty tostop" (caught, it would be sent
		// again at every retry of the write): ignored instead, so that
		// leash never stops alone, its command running on. Only now,
		// since the command inherits what is ignored, and only when leash
		// writes to a terminal (it stays ignored, see ignoreTTOU).
		if writesToTTY() {
			ignoreTTOU()
		}
	}
	// hadTTY: the command had the terminal when it stopped, or stopped for
	// want of it; it gets it back on fg.
	hadTTY := false

	var (
		lost    = hold.Context().Done()
		lostErr *leash.LostError
	)
loop:
	for {
		select {
		case sig := <-rn.sigs:
			_ = syscall.Kill(-g.pgid, sig.(syscall.Signal))
		case <-chld:
			sig, ok := childStopped(cmd.Process.Pid)
			switch {
			case !ok || (sig != syscall.SIGTSTP && sig != syscall.SIGTTIN && sig != syscall.SIGTTOU):
				// Not stopped, or stopped on purpose (SIGSTOP): left to
				// whoever stopped it.
			case jobControlled():
				// Stopped from the terminal: the whole job stops, leash
				// with it, when its SIGTSTP comes back (jobStop). The
				// terminal first, before the shell may take it.
				hadTTY = ctty >= 0 && (sig != syscall.SIGTSTP || ttyIs(ctty, g.pgid))
				if ctty >= 0 {
					reclaimTTY(ctty, g.pgid)
				}
				_ = syscall.Kill(0, syscall.SIGTSTP)
			case sig == syscall.SIGTSTP:
				// No shell to give the prompt back to: leash stays, and
				// so does the command.
				e.errorf("run: the command was stopped (SIGTSTP), but leash does not run under a shell's job control; it continues the command")
				_ = syscall.Kill(-g.pgid, syscall.SIGCONT)
			default:
				// It cannot go on, and nothing will bring it to the
				// foreground: it ends, rather than hold the lock for ever.
				e.errorf("run: the command was stopped (%s): it used the terminal from the background, and no shell's job control will bring it to the foreground; ending it", signalName(sig))
				g.term()
				_ = syscall.Kill(-g.pgid, syscall.SIGCONT)
			}
		case sig := <-jobStop:
			if !jobControlled() {
				e.errorf("run: %s ignored: leash does not run under a shell's job control, which would continue it", signalName(sig))
				continue
			}
			left := time.Until(hold.ValidUntil())
			give := hadTTY || (ctty >= 0 && ttyIs(ctty, g.pgid))
			hadTTY = false
			resumed := stopJob(ctty, g.pgid, give, func() {
				e.errorf("run: stopped (%s), with the command; its lock %q is not renewed meanwhile and is lost if they stay stopped past its lease (%v left)",
					signalName(sig), r.name, left.Round(time.Second))
			}, func(stopped, awake time.Duration) bool { return stillHeld(hold, left, stopped, awake) })
			select { // a stop signal from before this stop: spent
			case <-jobStop:
			default:
			}
			if resumed {
				continue
			}
			g.kill()
			if lostErr == nil && hold.Err() == nil {
				// The lease ran out while the machine was suspended, by a
				// clock the hold's deadline does not follow.
				lost = nil
				lostErr = &leash.LostError{Name: r.name, Fence: hold.Fence(), Reason: leash.ReasonExpired,
					Err: errors.New("leash was stopped past it")}
				e.errorf("run: %s; sent the stopped command SIGKILL, so it did not run again", describeLoss(lostErr))
			}
		case <-lost:
			lost = nil
			lostErr = asLost(context.Cause(hold.Context()), r.name, hold.Fence())
			if g.killed {
				e.errorf("run: %s while the command was stopped; sent it SIGKILL, so it did not run again", describeLoss(lostErr))
				continue
			}
			if r.killAfter.d == 0 {
				e.errorf("run: %s; sending SIGKILL to the command", describeLoss(lostErr))
			} else {
				e.errorf("run: %s; sending SIGTERM to the command, SIGKILL in %v if it is still running", describeLoss(lostErr), r.killAfter.d)
			}
			g.term()
		case <-g.timer:
			e.errorf("run: the command outlived --kill-after %v; sending SIGKILL", r.killAfter.d)
			g.kill()
		case <-exited:
			break loop
		}
	}
	status := exitStatus(cmd.ProcessState)
	if lostErr == nil {
		if err := hold.Err(); err != nil {
			lostErr = asLost(err, r.name, hold.Fence())
			e.errorf("run: %s as the command ended", describeLoss(lostErr))
		}
	}
	if lostErr != nil {
		// Nothing of the command may outlive the lock.
		g.clear(rn.sigs)
		_ = hold.Unlock(context.Background()) // in case the store still has it
		e.errorf("run: the command exited with status %d, but not under the lock to the end; exiting %d", status, exitLost)
		return exitLost
	}
	if groupAlive(g.pgid) {
		e.errorf("run: the command left processes running in its process group %d; they run without the lock", g.pgid)
	}
	var err error
	if rest := r.atLeast.d - time.Since(acquired); rest > 0 {
		err = hold.UnlockAfter(context.Background(), rest)
	} else {
		err = hold.Unlock(context.Background())
	}
	var le *leash.LostError
	switch {
	case errors.As(err, &le):
		e.errorf("run: %s before the command ended; exiting %d", describeLoss(le), exitLost)
		return exitLost
	case err != nil:
		e.errorf("run: the command ended, but the lock could not be released: %v; the store frees it when its lease ends", rn.conn.fail(err))
	}
	return status
}

// asLost returns the *LostError in err, or makes one.
func asLost(err error, name string, fence int64) *leash.LostError {
	var le *leash.LostError
	if errors.As(err, &le) {
		return le
	}
	return &leash.LostError{Name: name, Fence: fence, Reason: leash.ReasonReleasedElsewhere, Err: err}
}

// describeLoss says in words how a lock was lost.
func describeLoss(le *leash.LostError) string {
	s := fmt.Sprintf("lock %q lost (%s)", le.Name, le.Reason)
	switch le.Reason {
	case leash.ReasonReleasedElsewhere:
		s += ": it was deleted or force-unlocked"
	case leash.ReasonTakenOver:
		s += ": another owner holds it"
	case leash.ReasonExpired, leash.ReasonUnreachable:
		s += ": its lease ran out before it could be renewed"
	case leash.ReasonMaxHold:
		s += ": --max-hold ran out"
	}
	if le.Err != nil && !errors.Is(le.Err, leash.ErrNotHeld) {
		s += ": " + oneLine(le.Err.Error())
	}
	return s
}

// exitStatus returns a finished command's status as a shell reports it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignal + int(ws.Signal())
	}
	return ps.ExitCode()
}
