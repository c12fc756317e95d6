//go:build linux

// The pseudo-terminal is opened the Linux way (TIOCSPTLCK, /dev/pts/N).

package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/leash-go/leash"
)

// TestRunAtATerminal runs leash as an operator would at a shell: on a
// terminal whose foreground it is. The command, in its own process group,
// must still be able to read the terminal (not be stopped by SIGTTIN).
func TestRunAtATerminal(t *testing.T) {
	name, log := lockName(t), logFile(t)
	lt := startAtTerminal(t, runArgs(name, nil, child(log, "-read")))
	waitLog(t, log, "ready ", 30*time.Second)
	if _, err := lt.ptmx.Write([]byte("yes\n")); err != nil {
		t.Fatal(err)
	}
	waitLog(t, log, `read "yes" <nil>`, 10*time.Second)
	lt.exits(t, log)
}

// TestCtrlZStopsRunWithItsCommand: Ctrl-Z at the terminal stops the
// command's process group, the terminal's foreground; leash stops with it,
// so that the interactive shell waiting for leash gets its prompt back
// (leash went on waiting for the command before, and the shell hung), and
// says why. fg continues leash in the foreground: leash hands the command
// the terminal again and continues it, the command reads the terminal and
// ends, and fg reports leash's exit status 0.
func TestCtrlZStopsRunWithItsCommand(t *testing.T) {
	name, log := lockName(t), logFile(t)
	sh := startShell(t)
	cmdPid, leashPid := sh.runLeash(t, log, shellQuote(leashBinary(t), runArgs(name, nil, child(log, "-read"))...))
	sh.typeRaw(t, 0x1a) // Ctrl-Z: VSUSP
	eventually(t, 30*time.Second, "leash stopped with its command", func() bool { return procState(leashPid) == 'T' })
	sh.waitText(t, "stopped (SIGTSTP), with the command")
	sh.waitText(t, "Stopped") // the shell's job report: the prompt is back
	sh.fgThenRead(t, cmdPid, log)
	sh.lastStatus(t, 0)
}

// TestCtrlZStopsTheScriptThatRunsLeash: leash run from a script, which
// shares its process group (the shell's job): Ctrl-Z stops the command, and
// leash stops its whole group, the script too, so that the shell sees its
// job stopped and gives the prompt back (leash stopping alone left the
// script running and the shell waiting). fg continues all of it.
func TestCtrlZStopsTheScriptThatRunsLeash(t *testing.T) {
	name, log := lockName(t), logFile(t)
	sh := startShell(t)
	script := shellQuote(leashBinary(t), runArgs(name, nil, child(log, "-read"))...) + "; echo leash=$?"
	cmdPid, leashPid := sh.runLeash(t, log, shellQuote("bash", "-c", script))
	scriptPid := parentOf(leashPid)
	sh.typeRaw(t, 0x1a) // Ctrl-Z
	eventually(t, 30*time.Second, "leash and the script stopped", func() bool {
		return procState(leashPid) == 'T' && procState(scriptPid) == 'T'
	})
	sh.waitText(t, "Stopped")
	sh.fgThenRead(t, cmdPid, log)
	sh.waitText(t, "leash=0")
}

// TestCtrlZStopsEveryLeashOfTheJob: two leash runs in one pipeline, one
// job. Ctrl-Z stops the first one's command (it has the terminal); the
// job's stop reaches the second leash, which stops its own command before
// itself (stopped alone, it left its command running with no one renewing
// its lock). fg continues both commands.
func TestCtrlZStopsEveryLeashOfTheJob(t *testing.T) {
	name, logA, logB := lockName(t), logFile(t), logFile(t)
	sh := startShell(t)
	a := shellQuote(leashBinary(t), runArgs(name+"/a", nil, child(logA, "-read"))...)
	b := shellQuote(leashBinary(t), runArgs(name+"/b", nil, child(logB, "-id", "b", "-sleep", "10m"))...)
	sh.typeLine(t, a+" | "+b)
	cmdA := childPid(t, waitLog(t, logA, "start ", 30*time.Second))
	cmdB := childPid(t, waitLog(t, logB, "start ", 30*time.Second))
	waitLog(t, logA, "ready ", 30*time.Second)
	waitLog(t, logB, "ready ", 30*time.Second)
	leashA, leashB := parentOf(cmdA), parentOf(cmdB)
	sh.typeRaw(t, 0x1a) // Ctrl-Z
	eventually(t, 30*time.Second, "both leashes and both commands stopped", func() bool {
		return procState(leashA) == 'T' && procState(leashB) == 'T' && procState(cmdA) == 'T' && procState(cmdB) == 'T'
	})
	sh.waitText(t, "Stopped")
	sh.fgThenRead(t, cmdA, logA)
	eventually(t, 30*time.Second, "the second command continued by fg", func() bool {
		s := procState(cmdB)
		return s != 'T' && s != 0
	})
}

// TestBackgroundRunReadsAfterFg: leash run started in the background (&)
// with a command that reads the terminal. The command is stopped by
// SIGTTIN; leash stops its job with it, so the shell reports the job
// stopped, and fg brings it to the foreground: leash hands the command the
// terminal and continues it, and it reads its line (it stayed stopped
// before, with leash waiting for it and renewing the lock forever).
func TestBackgroundRunReadsAfterFg(t *testing.T) {
	name, log := lockName(t), logFile(t)
	sh := startShell(t)
	cmdPid, leashPid := sh.runLeash(t, log, shellQuote(leashBinary(t), runArgs(name, nil, child(log, "-read"))...)+" &")
	eventually(t, 30*time.Second, "leash stopped with its command", func() bool {
		return procState(leashPid) == 'T' && procState(cmdPid) == 'T'
	})
	sh.fgThenRead(t, cmdPid, log)
	sh.lastStatus(t, 0)
}

// TestBgThenExitLeavesTheShellItsTerminal: Ctrl-Z, then bg: the job runs
// on in the background, the terminal the shell's. When the command ends,
// leash must not take the terminal back from the shell (it did, and the
// shell, reading EIO, exited).
func TestBgThenExitLeavesTheShellItsTerminal(t *testing.T) {
	name, log := lockName(t), logFile(t)
	sh := startShell(t)
	_, leashPid := sh.runLeash(t, log, shellQuote(leashBinary(t), runArgs(name, nil, child(log, "-sleep", "2s"))...))
	sh.ctrlZ(t, leashPid)
	sh.typeLine(t, "bg")
	waitLog(t, log, "end ", 30*time.Second)
	eventually(t, 30*time.Second, "leash exited", func() bool { return processGone(leashPid) })
	sh.typeLine(t, "echo shell=alive")
	sh.waitText(t, "shell=alive")
}

// TestCtrlZLockDeletedWhileStopped: while leash is stopped with its
// command, its lock is deleted in the store (no message reaches a stopped
// leash, and its lease has long to run by its own clock). At fg, leash asks
// the store before the command runs again: the lock is gone, so the command
// is killed without running, and leash exits 76.
func TestCtrlZLockDeletedWhileStopped(t *testing.T) {
	name, log := lockName(t), logFile(t)
	sh := startShell(t)
	cmdPid, leashPid := sh.runLeash(t, log, shellQuote(leashBinary(t), runArgs(name, []string{"--lease", "1m"}, child(log, "-read", "-ignore-term"))...))
	sh.ctrlZ(t, leashPid)
	if n, err := newRDB(t, sharedRedis(t).Addr).Del(ctxFor(t), name).Result(); err != nil || n != 1 {
		t.Fatalf("DEL %s = %d, %v; want the lock deleted", name, n, err)
	}
	sh.fgKilledUnrun(t, cmdPid, log)
}

// TestCtrlZPastTheLease: a leash stopped with its command renews nothing;
// when they stay stopped past the lease, the lock lapses and another client
// takes it. Continued then (fg), leash must not let the command run again
// (not even to handle SIGTERM, beside the new holder): it kills it, stopped,
// and exits 76; the terminal is the shell's again.
func TestCtrlZPastTheLease(t *testing.T) {
	name, log := lockName(t), logFile(t)
	sh := startShell(t)
	cmdPid, leashPid := sh.runLeash(t, log, shellQuote(leashBinary(t), runArgs(name, []string{"--lease", "3s", "--kill-after", "5s"}, child(log, "-read", "-ignore-term"))...))
	sh.ctrlZ(t, leashPid)
	next := newClient(t, sharedRedis(t).Addr, nil)
	var h *leash.Hold
	eventually(t, 30*time.Second, "another client taking the lapsed lock", func() bool {
		var err error
		h, err = next.Mutex(name).TryLock(ctxFor(t))
		return err == nil
	})
	sh.fgKilledUnrun(t, cmdPid, log)
	if err := h.Err(); err != nil {
		t.Errorf("the new holder's lock after leash was continued: %v", err)
	}
	_ = h.Unlock(ctxFor(t))
}

// TestCtrlZWithoutJobControl: leash leads its own session at the terminal
// (no shell that would continue it): Ctrl-Z stops the command, but leash
// does not stop with it, since no one would ever continue leash. It says
// so and continues the command, which reads the terminal and ends.
func TestCtrlZWithoutJobControl(t *testing.T) {
	name, log := lockName(t), logFile(t)
	lt := startAtTerminal(t, runArgs(name, nil, child(log, "-read")))
	waitLog(t, log, "ready ", 30*time.Second)
	if _, err := lt.ptmx.Write([]byte{0x1a}); err != nil { // Ctrl-Z
		t.Fatal(err)
	}
	lt.waitText(t, "leash does not run under a shell's job control; it continues the command")
	if _, err := lt.ptmx.Write([]byte("yes\n")); err != nil {
		t.Fatal(err)
	}
	waitLog(t, log, `read "yes" <nil>`, 30*time.Second)
	lt.exits(t, log)
}

// lastStatus checks that the shell's last command (or fg) ends with status.
func (lt *leashAtTerminal) lastStatus(t *testing.T, status int) {
	t.Helper()
	lt.typeLine(t, "echo status=$?")
	lt.waitText(t, fmt.Sprintf("status=%d", status))
}

// fgKilledUnrun types fg for a job whose leash lost its lock while
// stopped: leash must exit 76, its command (cmdPid, logging to log) killed
// without running again, not even to handle SIGTERM.
func (lt *leashAtTerminal) fgKilledUnrun(t *testing.T, cmdPid int, log string) {
	t.Helper()
	// Typed at once: were the command given the terminal, it would read
	// the second line instead of the shell.
	lt.typeLine(t, "fg")
	lt.lastStatus(t, exitLost)
	for _, line := range readLog(log) {
		if strings.Contains(line, "read ") || strings.Contains(line, "SIGTERM") {
			t.Errorf("the command ran again after its lock was lost: %q; terminal:\n%s", line, lt.text())
		}
	}
	if !processGone(cmdPid) {
		t.Errorf("the command (pid %d) outlived leash", cmdPid)
	}
}

// runLeash types line, which runs leash with a command logging to log, at
// the shell, and waits until the command is ready; it returns the
// command's pid and leash's.
func (lt *leashAtTerminal) runLeash(t *testing.T, log, line string) (cmdPid, leashPid int) {
	t.Helper()
	lt.typeLine(t, line)
	cmdPid = childPid(t, waitLog(t, log, "start ", 30*time.Second))
	waitLog(t, log, "ready ", 30*time.Second)
	return cmdPid, parentOf(cmdPid)
}

// ctrlZ types Ctrl-Z, and waits until leash (leashPid) is stopped and the
// shell says its job is.
func (lt *leashAtTerminal) ctrlZ(t *testing.T, leashPid int) {
	t.Helper()
	lt.typeRaw(t, 0x1a) // VSUSP
	eventually(t, 30*time.Second, "leash stopped with its command", func() bool { return procState(leashPid) == 'T' })
	lt.waitText(t, "Stopped")
}

// fgThenRead types fg at the shell, waits until the command (cmdPid)
// runs again, and types the line it reads from the terminal.
func (lt *leashAtTerminal) fgThenRead(t *testing.T, cmdPid int, log string) {
	t.Helper()
	lt.typeLine(t, "fg")
	eventually(t, 30*time.Second, "the command continued by fg", func() bool {
		s := procState(cmdPid)
		return s != 'T' && s != 0
	})
	lt.typeLine(t, "yes")
	waitLog(t, log, `read "yes" <nil>`, 30*time.Second)
}

// childPid returns the pid=… of a child's start line.
func childPid(t *testing.T, start string) int {
	t.Helper()
	pid, err := strconv.Atoi(field(start, "pid"))
	if err != nil {
		t.Fatalf("no pid in %q", start)
	}
	return pid
}

// procState returns the state letter of process pid (R, S, T, Z…), or 0.
func procState(pid int) byte {
	f := statFields(pid)
	if len(f) < 1 {
		return 0
	}
	return f[0][0]
}

// A leashAtTerminal is a process that leads its own session on a
// pseudo-terminal, as its foreground process group: leash itself, or an
// interactive shell that runs leash as a job.
type leashAtTerminal struct {
	cmd  *exec.Cmd
	ptmx *os.File
	out  *lockedWriter // what was written to the terminal (see text)
	done chan struct{} // closed once the process has exited
	err  error         // cmd.Wait's, once done is closed
}

// startAtTerminal starts leash with args (on the shared Redis) as the
// leader of a new session whose controlling terminal is a pty, with no
// shell: no one continues leash if it stops.
func startAtTerminal(t *testing.T, args []string) *leashAtTerminal {
	t.Helper()
	return startInPTY(t, leashBinary(t), args...)
}

// startShell starts an interactive bash, with job control, on a pty, and
// waits for its prompt; what it runs uses the shared Redis.
func startShell(t *testing.T) *leashAtTerminal {
	t.Helper()
	sh := startInPTY(t, "bash", "--norc", "--noprofile", "-i")
	sh.waitText(t, "$ ")
	return sh
}

// startInPTY starts path with args in a new session whose controlling
// terminal is a pty; all processes left in that session are killed at
// cleanup.
func startInPTY(t *testing.T, path string, args ...string) *leashAtTerminal {
	t.Helper()
	srv := sharedRedis(t)
	ptmx, pts := openPTY(t)
	lt := &leashAtTerminal{ptmx: ptmx, out: &lockedWriter{w: &bytes.Buffer{}}, done: make(chan struct{})}
	lt.cmd = exec.Command(path, args...)
	lt.cmd.Env = append(os.Environ(), storeEnv+"=redis://"+srv.Addr, roleEnv+"=child", "GORACE=atexit_sleep_ms=0",
		"PS1=$ ", "TERM=dumb", "HISTFILE=")
	lt.cmd.Stdin, lt.cmd.Stdout, lt.cmd.Stderr = pts, pts, pts
	lt.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := lt.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	// Owner: this test. Stops when the process exits.
	go func() {
		lt.err = lt.cmd.Wait()
		close(lt.done)
	}()
	// Owner: this test. Stops when the pty closes, after the session ends.
	go func() { _, _ = io.Copy(lt.out, ptmx) }()
	sid := lt.cmd.Process.Pid
	t.Cleanup(func() {
		killSession(sid)
		<-lt.done
		ptmx.Close()
	})
	return lt
}

// killSession sends SIGKILL to every process of session sid.
func killSession(sid int) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := statFields(pid); len(f) > 3 && f[3] == strconv.Itoa(sid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// typeLine types line and Enter at the terminal.
func (lt *leashAtTerminal) typeLine(t *testing.T, line string) {
	t.Helper()
	lt.typeRaw(t, []byte(line+"\n")...)
}

// typeRaw types bytes at the terminal.
func (lt *leashAtTerminal) typeRaw(t *testing.T, b ...byte) {
	t.Helper()
	if _, err := lt.ptmx.Write(b); err != nil {
		t.Fatal(err)
	}
}

// waitText waits until the terminal shows s.
func (lt *leashAtTerminal) waitText(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(lt.text(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal did not show %q within 30s; it shows:\n%s", s, lt.text())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// shellQuote returns a shell command line that runs path with args.
func shellQuote(path string, args ...string) string {
	q := make([]string, 0, 1+len(args))
	for _, a := range append([]string{path}, args...) {
		q = append(q, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	return strings.Join(q, " ")
}

// exits checks that leash exits 0 within 10 s.
func (lt *leashAtTerminal) exits(t *testing.T, log string) {
	t.Helper()
	select {
	case <-lt.done:
		if lt.err != nil {
			t.Errorf("leash run at a terminal: %v; terminal:\n%s\nlog:\n%s", lt.err, lt.text(), readLog(log))
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("leash run at a terminal did not exit; terminal:\n%s", lt.text())
	}
}

// text returns what leash and its command wrote to the terminal so far.
func (lt *leashAtTerminal) text() string {
	lt.out.mu.Lock()
	defer lt.out.mu.Unlock()
	return lt.out.w.(*bytes.Buffer).String()
}

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	var unlock int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
		t.Fatalf("unlockpt: %v", errno)
	}
	var n uint32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Fatalf("ptsname: %v", errno)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pty's terminal: %v", err)
	}
	return ptmx, pts
}

// TestChildStoppedTellsTheSignal checks childStopped's reading of the
// stopping signal out of waitid's siginfo, for each stop leash tells apart.
func TestChildStoppedTellsTheSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGSTOP} {
		if signal.Ignored(sig) {
			// The child would inherit it, and never stop.
			t.Fatalf("%s is ignored in the test process (inherited, or left by an in-process leash run: see ignoreTTOU)", signalName(sig))
		}
		// In a group of its own, whose parent (this test) is in another
		// group of the session: a group that is not orphaned, which the
		// kernel stops on SIGTSTP, SIGTTIN and SIGTTOU (even when the test
		// runs under setsid).
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, ok := childStopped(cmd.Process.Pid); ok {
			t.Errorf("a running child reported stopped")
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		var got syscall.Signal
		eventually(t, 30*time.Second, "the child stopped by "+signalName(sig), func() bool {
			s, ok := childStopped(cmd.Process.Pid)
			got = s
			return ok
		})
		if got != sig {
			t.Errorf("childStopped after %s = %s (%d)", signalName(sig), signalName(got), int(got))
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}
