package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/faultproxy"
	"github.com/redis/go-redis/v9"
)

func TestRunPassesStatusAndEnvironment(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	store := "redis://" + srv.Addr
	for _, code := range []int{0, 3, 125} {
		t.Run(fmt.Sprintf("exit %d", code), func(t *testing.T) {
			name, log := lockName(t), logFile(t)
			status, _, stderr := runLeash(t, store, runArgs(name, nil, child(log, "-exit", strconv.Itoa(code)))...)
			if status != code {
				t.Errorf("leash run exited %d, want the command's %d; stderr:\n%s", status, code, stderr)
			}
			if stderr != "" {
				t.Errorf("leash run printed %q on a clean run, want nothing", stderr)
			}
			start := waitLog(t, log, "start ", 0)
			info, err := newClient(t, srv.Addr, nil).Inspect(ctxFor(t), name)
			if err != nil {
				t.Fatal(err)
			}
			if got := field(start, "name"); got != name {
				t.Errorf("LEASH_NAME = %q, want %q", got, name)
			}
			if got := field(start, "fence"); got != strconv.FormatInt(info.Fence, 10) || info.Fence == 0 {
				t.Errorf("LEASH_FENCE = %q, want the lock's last token %d", got, info.Fence)
			}
			if owner := field(start, "owner"); !strings.Contains(owner, ":") {
				t.Errorf("LEASH_OWNER = %q, want <client-id>:<n>", owner)
			}
			assertFree(t, rdb, name)
		})
	}
}

func TestRunCommandEndedBySignal(t *testing.T) {
	srv := sharedRedis(t)
	name, log := lockName(t), logFile(t)
	p := startLeash(t, "redis://"+srv.Addr, runArgs(name, nil, child(log, "-sleep", "1m"))...)
	pid, _ := strconv.Atoi(field(waitLog(t, log, "start ", 30*time.Second), "pid"))
	waitLog(t, log, "ready ", 10*time.Second)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if status := p.wait(t, 30*time.Second); status != exitSignal+int(syscall.SIGKILL) {
		t.Errorf("leash run exited %d when SIGKILL ended the command, want %d; stderr:\n%s", status, exitSignal+9, p.stderr.String())
	}
	assertFree(t, newRDB(t, srv.Addr), name)
}

func TestRunNotAcquired(t *testing.T) {
	srv := sharedRedis(t)
	store := "redis://" + srv.Addr
	c := newClient(t, srv.Addr, nil)
	for _, tc := range []struct {
		name       string
		flags      []string
		wantStderr string
	}{
		{"no-wait", []string{"--no-wait"}, "not waiting (--no-wait)"},
		{"wait 0", []string{"--wait", "0s"}, "not waiting (--no-wait)"},
		{"wait runs out", []string{"--wait", "300ms"}, "after waiting 300ms (--wait)"},
		{"quiet", []string{"--no-wait", "--quiet"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, log := lockName(t), logFile(t)
			h, err := c.Mutex(name).Lock(ctxFor(t))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Unlock(context.Background())
			status, _, stderr := runLeash(t, store, runArgs(name, tc.flags, child(log))...)
			if status != exitNotAcquired {
				t.Errorf("leash run %v on a held lock exited %d, want %d", tc.flags, status, exitNotAcquired)
			}
			if tc.wantStderr == "" && stderr != "" || !strings.Contains(stderr, tc.wantStderr) || strings.Count(stderr, "\n") > 1 {
				t.Errorf("stderr = %q, want one line with %q", stderr, tc.wantStderr)
			}
			if lines := readLog(log); len(lines) != 0 {
				t.Errorf("the command ran although the lock was not acquired: %q", lines)
			}
			if err := h.Err(); err != nil {
				t.Errorf("the holder lost its lock: %v", err)
			}
		})
	}
}

func TestRunWaitsForRelease(t *testing.T) {
	srv := sharedRedis(t)
	name, log := lockName(t), logFile(t)
	c := newClient(t, srv.Addr, nil)
	const lease = 10 * time.Minute // far longer than the test may take
	h, err := c.Mutex(name, &leash.LockOptions{Lease: lease}).Lock(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	p := startLeash(t, "redis://"+srv.Addr, runArgs(name, []string{"--lease", lease.String()}, child(log))...)
	waitForWaiter(t, c, name)
	if p.exited() || len(readLog(log)) != 0 {
		t.Fatalf("leash run did not wait for the held lock; stderr:\n%s", p.stderr.String())
	}
	if err := h.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	// Both leases are 10m, and so is the waiter's fallback timer: a run that
	// ends within a minute, however slow the machine, was woken by the release.
	if status := p.wait(t, time.Minute); status != 0 {
		t.Errorf("leash run exited %d after the release, want 0; stderr:\n%s", status, p.stderr.String())
	}
	waitLog(t, log, "end ", 0)
}

func TestRunCommandCannotRun(t *testing.T) {
	// A store that counts connections: none may be made for a command that
	// cannot run.
	store, conns := countingListener(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "report.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		command string
		status  int
		want    string
	}{
		{"no-such-command-xyz", exitNotFound, `command "no-such-command-xyz" not found`},
		{filepath.Join(dir, "missing.sh"), exitNotFound, "no such file"},
		{notExec, exitCannotRun, "cannot be run"},
		{dir, exitCannotRun, "cannot be run"},
	} {
		status, _, stderr := runLeash(t, store, "run", "job", "--", tc.command)
		if status != tc.status || !strings.Contains(stderr, tc.want) {
			t.Errorf("leash run job -- %s = %d, %q; want %d and %q", tc.command, status, stderr, tc.status, tc.want)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("leash connected to the store %d times for commands that cannot run, want 0", n)
	}
}

// countingListener returns a redis:// URL whose server only counts the
// connections made to it.
func countingListener(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	// Owner: the test. Stops when the listener closes at cleanup.
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return "redis://" + ln.Addr().String(), &n
}

func TestRunAtLeastKeepsTheLockAfterTheCommandEnds(t *testing.T) {
	srv := sharedRedis(t)
	store, rdb := "redis://"+srv.Addr, newRDB(t, srv.Addr)
	name, log := lockName(t), logFile(t)
	const atLeast = 2 * time.Minute // the checks below get half of it, however slow the machine
	began := time.Now()
	status, _, stderr := runLeash(t, store, runArgs(name, []string{"--at-least", atLeast.String()}, child(log))...)
	exitedAfter := time.Since(began)
	if status != 0 {
		t.Fatalf("leash run --at-least exited %d; stderr:\n%s", status, stderr)
	}
	// leash exits as soon as the command does: it does not sleep out the rest.
	if exitedAfter >= atLeast/2 {
		t.Errorf("leash run --at-least %v exited after %v: it waited instead of leaving the rest to the lease", atLeast, exitedAfter)
	}
	pttl, err := rdb.PTTL(ctxFor(t), name).Result()
	if err != nil || pttl <= atLeast/2 || pttl > atLeast {
		t.Errorf("after the command ended the lock has PTTL %v (%v), want the rest of %v", pttl, err, atLeast)
	}
	if status, _, _ := runLeash(t, store, runArgs(name, []string{"--no-wait", "--quiet"}, child(log, "-id", "second"))...); status != exitNotAcquired {
		t.Errorf("a second run within --at-least exited %d, want %d", status, exitNotAcquired)
	}
	if status, _, _ := runLeash(t, store, "unlock", "--force", name); status != 0 {
		t.Errorf("unlock --force exited %d", status)
	}
}

func TestRunMaxHold(t *testing.T) {
	srv := sharedRedis(t)
	name, log := lockName(t), logFile(t)
	status, _, stderr := runLeash(t, "redis://"+srv.Addr,
		runArgs(name, []string{"--max-hold", "2s", "--kill-after", "5s"}, child(log, "-sleep", "1m"))...)
	if status != exitLost {
		t.Errorf("leash run past --max-hold exited %d, want %d", status, exitLost)
	}
	if !strings.Contains(stderr, "max hold reached") || !strings.Contains(stderr, "SIGTERM") {
		t.Errorf("stderr = %q, want it to say the max hold was reached and the command got SIGTERM", stderr)
	}
	// A command still starting when --max-hold ran out (a slow machine) is
	// ended by SIGTERM's default action before it can log it; one that was
	// ready must have logged the signal.
	if hasLine(log, "ready child") {
		waitLog(t, log, "signal child SIGTERM", 0)
	}
	// The store still had the lock (its lease had not run out): leash released it.
	assertFree(t, newRDB(t, srv.Addr), name)
}

func TestRunLockTakenAway(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	for _, tc := range []struct {
		name   string
		reason string
		// take takes the lock away from the running leash.
		take func(t *testing.T, name string, proxy *faultproxy.Proxy)
	}{
		{"key deleted", "released elsewhere", func(t *testing.T, name string, _ *faultproxy.Proxy) {
			if err := rdb.Del(ctxFor(t), name).Err(); err != nil {
				t.Fatal(err)
			}
		}},
		{"force-unlocked by another leash", "revoked", func(t *testing.T, name string, _ *faultproxy.Proxy) {
			if status, out, stderr := runLeash(t, "redis://"+srv.Addr, "unlock", "--force", name); status != 0 || !strings.Contains(out, "revoked") {
				t.Fatalf("leash unlock --force = %d, %q, %q", status, out, stderr)
			}
		}},
		{"taken over by another owner", "taken over", func(t *testing.T, name string, _ *faultproxy.Proxy) {
			pipe := rdb.TxPipeline()
			pipe.Del(ctxFor(t), name)
			pipe.HSet(ctxFor(t), name, "00000000-0000-4000-8000-00000000beef:1", 1)
			pipe.PExpire(ctxFor(t), name, time.Minute) // outlives the test, however slow
			if _, err := pipe.Exec(ctxFor(t)); err != nil {
				t.Fatal(err)
			}
		}},
		{"connection black-holed", "", func(t *testing.T, _ string, proxy *faultproxy.Proxy) {
			proxy.Blackhole()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy, err := faultproxy.New(srv.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer proxy.Close()
			name, log := lockName(t), logFile(t)
			const lease = time.Second
			p := startLeash(t, "redis://"+proxy.Addr, runArgs(name,
				[]string{"--lease", lease.String(), "--kill-after", "300ms"},
				child(log, "-sleep", "1m", "-ignore-term", "-grandchild"))...)
			grandchild, _ := strconv.Atoi(strings.Fields(waitLog(t, log, "grandchild ", 30*time.Second))[1])
			waitLog(t, log, "ready ", 10*time.Second)
			taken := time.Now()
			tc.take(t, name, proxy)

			// Renewals run every lease/3; the local deadline is a lease
			// after the last one. Either way leash acts within a lease,
			// and its exit does not wait for black-holed pub/sub
			// connections (the store closes them: redisstore's
			// TestCloseBlackholedSubscription); the bound only catches a
			// hang.
			status := p.wait(t, 15*time.Second)
			if status != exitLost {
				t.Errorf("leash run exited %d when the lock was taken away, want %d; stderr:\n%s", status, exitLost, p.stderr.String())
			}
			stderr := p.stderr.String()
			if !strings.Contains(stderr, "lost ("+tc.reason) || !strings.Contains(stderr, "SIGKILL") {
				t.Errorf("stderr = %q, want it to say the lock was lost (%s) and the command was killed", stderr, tc.reason)
			}
			waitLog(t, log, "signal child SIGTERM", 0)
			for _, l := range readLog(log) {
				if strings.HasPrefix(l, "end ") {
					t.Errorf("the command ran to its end after the lock was lost: %q", l)
				}
			}
			if !processGone(grandchild) {
				t.Errorf("the command's grandchild %d (which ignores SIGTERM) outlived leash run", grandchild)
			}
			t.Logf("lost lock handled in %v", time.Since(taken))
			if tc.reason == "taken over" {
				if owners, _ := rdb.HKeys(ctxFor(t), name).Result(); len(owners) != 1 || owners[0] != "00000000-0000-4000-8000-00000000beef:1" {
					t.Errorf("the new owner's lock was touched: owners %q", owners)
				}
				return
			}
			// Black-holed, leash cannot release it: the lease frees it.
			eventually(t, lease+2*time.Second, "the lock is freed", func() bool {
				n, err := rdb.Exists(ctxFor(t), name).Result()
				return err == nil && n == 0
			})
		})
	}
}

func TestRunForwardsSignals(t *testing.T) {
	srv := sharedRedis(t)
	name, log := lockName(t), logFile(t)
	p := startLeash(t, "redis://"+srv.Addr, runArgs(name, nil, child(log, "-sleep", "1m"))...)
	waitLog(t, log, "ready ", 30*time.Second)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM} {
		if err := p.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		waitLog(t, log, "signal child "+signalName(sig), 10*time.Second)
	}
	// The child exits on SIGTERM, as a shell would report it.
	if status := p.wait(t, 10*time.Second); status != exitSignal+int(syscall.SIGTERM) {
		t.Errorf("leash run exited %d after the command exited on SIGTERM, want %d; stderr:\n%s", status, exitSignal+15, p.stderr.String())
	}
	assertFree(t, newRDB(t, srv.Addr), name)
}

func TestRunKeepsIgnoredSignalsIgnored(t *testing.T) {
	nohup, err := exec.LookPath("nohup")
	if err != nil {
		t.Skip("no nohup")
	}
	srv := sharedRedis(t)
	name, log := lockName(t), logFile(t)
	// nohup starts leash with SIGHUP ignored.
	p := startCommand(t, "redis://"+srv.Addr, append([]string{nohup, leashBinary(t)}, runArgs(name, nil, child(log, "-sleep", "1m"))...))
	waitLog(t, log, "ready ", 30*time.Second)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGUSR1} {
		if err := p.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	// Signals reach leash in order: once SIGUSR1 is through, SIGHUP would be.
	waitLog(t, log, "signal child SIGUSR1", 10*time.Second)
	for _, l := range readLog(log) {
		if l == "signal child SIGHUP" {
			t.Error("SIGHUP reached the command although leash runs under nohup")
		}
	}
	if p.exited() {
		t.Fatalf("leash exited on SIGHUP under nohup; stderr:\n%s", p.stderr.String())
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if status := p.wait(t, 10*time.Second); status != exitSignal+int(syscall.SIGTERM) {
		t.Errorf("leash exited %d, want %d", status, exitSignal+15)
	}
}

func TestRunSignalWhileWaiting(t *testing.T) {
	srv := sharedRedis(t)
	c := newClient(t, srv.Addr, nil)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2} {
		t.Run(signalName(sig), func(t *testing.T) {
			name, log := lockName(t), logFile(t)
			h, err := c.Mutex(name).Lock(ctxFor(t))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Unlock(context.Background())
			p := startLeash(t, "redis://"+srv.Addr, runArgs(name, nil, child(log))...)
			waitForWaiter(t, c, name)
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if status := p.wait(t, 10*time.Second); status != exitSignal+int(sig) {
				t.Errorf("leash run exited %d on %s while waiting, want %d", status, signalName(sig), exitSignal+int(sig))
			}
			if !strings.Contains(p.stderr.String(), "while waiting") {
				t.Errorf("stderr = %q, want it to say the signal came while waiting", p.stderr.String())
			}
			if lines := readLog(log); len(lines) != 0 {
				t.Errorf("the command ran: %q", lines)
			}
			if err := h.Err(); err != nil {
				t.Errorf("the holder lost its lock: %v", err)
			}
		})
	}
}

func TestRunNeverOverlaps(t *testing.T) {
	srv := sharedRedis(t)
	name, log := lockName(t), logFile(t)
	const runs = 4
	var ps []*proc
	for i := range runs {
		ps = append(ps, startLeash(t, "redis://"+srv.Addr,
			runArgs(name, nil, child(log, "-id", fmt.Sprint("run", i), "-sleep", "150ms"))...))
	}
	for _, p := range ps {
		if status := p.wait(t, 60*time.Second); status != 0 {
			t.Fatalf("leash run exited %d; stderr:\n%s", status, p.stderr.String())
		}
	}
	type span struct {
		id         string
		start, end int64
		fence      int64
	}
	spans := map[string]*span{}
	for _, l := range readLog(log) {
		f := strings.Fields(l)
		switch f[0] {
		case "start":
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			fence, _ := strconv.ParseInt(field(l, "fence"), 10, 64)
			spans[f[2]] = &span{id: f[2], start: ns, fence: fence}
		case "end":
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			spans[f[2]].end = ns
		}
	}
	if len(spans) != runs {
		t.Fatalf("%d commands ran, want %d; log:\n%s", len(spans), runs, strings.Join(readLog(log), "\n"))
	}
	var order []*span
	for _, s := range spans {
		order = append(order, s)
	}
	sort.Slice(order, func(i, j int) bool { return order[i].start < order[j].start })
	for i := 1; i < len(order); i++ {
		prev, cur := order[i-1], order[i]
		if cur.start < prev.end {
			t.Errorf("%s started %v before %s ended: two holders at once", cur.id, time.Duration(prev.end-cur.start), prev.id)
		}
		if cur.fence <= prev.fence {
			t.Errorf("%s has fence %d, not above %s's %d", cur.id, cur.fence, prev.id, prev.fence)
		}
	}
}

func TestRunLeashKilledTakesTheCommandWithIt(t *testing.T) {
	if !deathSignal {
		t.Skip("this system has no parent-death signal: a killed leash leaves its command running (leash help run)")
	}
	srv := sharedRedis(t)
	name, log := lockName(t), logFile(t)
	p := startLeash(t, "redis://"+srv.Addr, runArgs(name, []string{"--lease", "1s"}, child(log, "-sleep", "1m"))...)
	pid, _ := strconv.Atoi(field(waitLog(t, log, "start ", 30*time.Second), "pid"))
	waitLog(t, log, "ready ", 10*time.Second)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 10*time.Second)
	eventually(t, 5*time.Second, "the command dies with leash", func() bool { return processGone(pid) })
	// Nobody renews the lock any more: it frees itself within the lease.
	rdb := newRDB(t, srv.Addr)
	eventually(t, 3*time.Second, "the lock is freed within the lease", func() bool {
		n, err := rdb.Exists(ctxFor(t), name).Result()
		return err == nil && n == 0
	})
}

// A force-unlock wakes a waiting leash run at once, through the release
// notification. Both leases are far longer than the test may take, so
// neither the holder's expiry nor the waiter's fallback timer (at most its
// own lease) can be what let the waiter in, however slow the machine. How
// the old holder learns of the force-unlock is TestRunLockTakenAway's.
func TestForceUnlockWakesWaiterAtOnce(t *testing.T) {
	srv := sharedRedis(t)
	store := "redis://" + srv.Addr
	name, log := lockName(t), logFile(t)
	const lease = 10 * time.Minute
	startLeash(t, store, runArgs(name, []string{"--lease", lease.String()},
		child(log, "-id", "holder", "-sleep", "1h"))...)
	waitLog(t, log, "ready holder", time.Minute)
	c := newClient(t, srv.Addr, nil)
	waitRevokeListening(t, c, newRDB(t, srv.Addr), name) // else the revoked name waits out the lease
	waiter := startLeash(t, store, runArgs(name, []string{"--lease", lease.String()}, child(log, "-id", "waiter"))...)
	waitForWaiter(t, c, name)
	if status, _, stderr := runLeash(t, store, "unlock", "--force", name); status != 0 {
		t.Fatalf("unlock --force exited %d: %s", status, stderr)
	}
	if status := waiter.wait(t, lease/2); status != 0 {
		t.Errorf("the waiter exited %d; stderr:\n%s", status, waiter.stderr.String())
	}
}

// TestForceUnlockWaitsForTheCommand: after 'leash unlock --force', the
// next holder starts only once the old holder's command is gone, not as
// soon as it is sent SIGTERM. The old command ignores SIGTERM, so it runs
// until --kill-after (5 s) has passed; the waiter's command may start
// only after it was killed. Without AckRevokeOnUnlock the waiter started
// while the old command still ran.
func TestForceUnlockWaitsForTheCommand(t *testing.T) {
	srv := sharedRedis(t)
	store := "redis://" + srv.Addr
	name, log := lockName(t), logFile(t)
	const lease = 10 * time.Minute
	holder := startLeash(t, store, runArgs(name, []string{"--lease", lease.String(), "--kill-after", "5s"},
		child(log, "-id", "holder", "-sleep", "1h", "-ignore-term"))...)
	waitLog(t, log, "ready holder", time.Minute)
	var pid int
	for _, l := range readLog(log) {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "start" && f[2] == "holder" {
			pid, _ = strconv.Atoi(field(l, "pid"))
		}
	}
	if pid == 0 {
		t.Fatalf("no pid for the holder's command in the log:\n%s", strings.Join(readLog(log), "\n"))
	}
	c := newClient(t, srv.Addr, nil)
	waitRevokeListening(t, c, newRDB(t, srv.Addr), name)
	waiter := startLeash(t, store, runArgs(name, []string{"--lease", lease.String()}, child(log, "-id", "waiter"))...)
	waitForWaiter(t, c, name)
	if status, _, stderr := runLeash(t, store, "unlock", "--force", name); status != 0 {
		t.Fatalf("unlock --force exited %d: %s", status, stderr)
	}
	waitLog(t, log, "signal holder SIGTERM", time.Minute)
	waitLog(t, log, "ready waiter", 3*time.Minute)
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the waiter's command started while the revoked holder's command (pid %d) still ran", pid)
	}
	if status := holder.wait(t, time.Minute); status != exitLost {
		t.Errorf("the revoked holder exited %d, want %d; stderr:\n%s", status, exitLost, holder.stderr.String())
	}
	if status := waiter.wait(t, time.Minute); status != 0 {
		t.Errorf("the waiter exited %d; stderr:\n%s", status, waiter.stderr.String())
	}
}

// waitRevokeListening waits until the client that holds name listens for
// revocations (see redisstore's Revoke).
func waitRevokeListening(t *testing.T, c *leash.Client, rdb *redis.Client, name string) {
	t.Helper()
	info, err := c.Inspect(ctxFor(t), name)
	if err != nil || len(info.Owners) != 1 {
		t.Fatalf("Inspect(%q) = %+v, %v; want one holder", name, info, err)
	}
	ch := "leash_revoke__channel:" + driver.OwnerClient(info.Owners[0].Owner)
	eventually(t, 30*time.Second, "the holder to listen for revocations", func() bool {
		m, err := rdb.PubSubNumSub(ctxFor(t), ch).Result()
		return err == nil && m[ch] == 1
	})
}

// TestRunRevokedMeasure measures how soon 'leash run' stops its command
// (SIGTERM) after 'leash unlock --force' revokes its lock, and checks that
// the reason it gives is "revoked". The lease (10 minutes) is far longer
// than the test may take: only the revocation can stop the command. The
// figures are logged (go test -v -run TestRunRevokedMeasure), not asserted.
func TestRunRevokedMeasure(t *testing.T) {
	srv := sharedRedis(t)
	store := "redis://" + srv.Addr
	name, log := lockName(t), logFile(t)
	const lease = 10 * time.Minute
	p := startLeash(t, store, runArgs(name, []string{"--lease", lease.String()},
		child(log, "-id", "holder", "-sleep", "1h"))...)
	waitLog(t, log, "ready holder", time.Minute)
	waitRevokeListening(t, newClient(t, srv.Addr, nil), newRDB(t, srv.Addr), name)
	forced := time.Now()
	status, out, stderr := runLeash(t, store, "unlock", "--force", name)
	unlocked := time.Now()
	if status != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("leash unlock --force = %d, %q, %q", status, out, stderr)
	}
	waitLog(t, log, "signal holder SIGTERM", lease/2)
	termed := time.Now()
	if status := p.wait(t, lease/2); status != exitLost {
		t.Errorf("leash run exited %d, want %d; stderr:\n%s", status, exitLost, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "lost (revoked") {
		t.Errorf("stderr = %q, want the reason revoked", p.stderr.String())
	}
	t.Logf("leash unlock --force ran %v (process start included); its command got SIGTERM %v after it started (log polled every 10ms)",
		unlocked.Sub(forced).Round(time.Millisecond), termed.Sub(forced).Round(time.Millisecond))
}
