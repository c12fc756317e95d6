//go:build linux

// The pseudo-terminal is opened the Linux way (TIOCSPTLCK, /dev/pts/N).

package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
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
// so that the shell waiting for leash gets its prompt back (leash went on
// waiting for the command before, and the shell hung), and says why. When
// continued in the foreground (fg: the shell sends SIGCONT, leash's group
// holding the terminal), leash hands the command the terminal again and
// continues it: the command reads the terminal and ends, and leash exits 0.
func TestCtrlZStopsRunWithItsCommand(t *testing.T) {
	name, log := lockName(t), logFile(t)
	lt := startAtTerminal(t, runArgs(name, nil, child(log, "-read")))
	waitLog(t, log, "ready ", 30*time.Second)
	if _, err := lt.ptmx.Write([]byte{0x1a}); err != nil { // Ctrl-Z: VSUSP
		t.Fatal(err)
	}
	pid := lt.cmd.Process.Pid
	eventually(t, 30*time.Second, "leash stopped with its command", func() bool { return procState(pid) == 'T' })
	eventually(t, 10*time.Second, "leash saying why it stopped", func() bool {
		return strings.Contains(lt.text(), "the command was stopped, and leash stops with it")
	})
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil { // fg
		t.Fatal(err)
	}
	if _, err := lt.ptmx.Write([]byte("yes\n")); err != nil {
		t.Fatal(err)
	}
	waitLog(t, log, `read "yes" <nil>`, 30*time.Second)
	lt.exits(t, log)
}

// TestCtrlZPastTheLease: a leash stopped with its command renews nothing;
// when they stay stopped past the lease, the lock lapses and another client
// takes it. Continued then, leash must not let the command run again (not
// even to handle SIGTERM, beside the new holder): it kills it, stopped, and
// exits 76.
func TestCtrlZPastTheLease(t *testing.T) {
	name, log := lockName(t), logFile(t)
	lt := startAtTerminal(t, runArgs(name, []string{"--lease", "1s", "--kill-after", "5s"}, child(log, "-read", "-ignore-term")))
	waitLog(t, log, "ready ", 30*time.Second)
	if _, err := lt.ptmx.Write([]byte{0x1a}); err != nil { // Ctrl-Z
		t.Fatal(err)
	}
	pid := lt.cmd.Process.Pid
	eventually(t, 30*time.Second, "leash stopped with its command", func() bool { return procState(pid) == 'T' })
	next := newClient(t, sharedRedis(t).Addr, nil)
	var h *leash.Hold
	eventually(t, 30*time.Second, "another client taking the lapsed lock", func() bool {
		var err error
		h, err = next.Mutex(name).TryLock(ctxFor(t))
		return err == nil
	})
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil { // fg
		t.Fatal(err)
	}
	if _, err := lt.ptmx.Write([]byte("yes\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lt.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("leash did not exit after it was continued past its lease; terminal:\n%s", lt.text())
	}
	var ee *exec.ExitError
	if !errors.As(lt.err, &ee) || ee.ExitCode() != exitLost {
		t.Errorf("leash continued past its lease: %v, want exit status %d; terminal:\n%s", lt.err, exitLost, lt.text())
	}
	for _, line := range readLog(log) {
		if strings.Contains(line, "read ") || strings.Contains(line, "SIGTERM") {
			t.Errorf("the command ran again after the lock was lost: %q; terminal:\n%s", line, lt.text())
		}
	}
	if err := h.Err(); err != nil {
		t.Errorf("the new holder's lock after leash was continued: %v", err)
	}
	_ = h.Unlock(ctxFor(t))
}

// procState returns the state letter of process pid (R, S, T, Z…), or 0.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state …: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// A leashAtTerminal is leash started as a shell would start it: the
// foreground process group of a terminal.
type leashAtTerminal struct {
	cmd  *exec.Cmd
	ptmx *os.File
	out  *lockedWriter // what leash and its command wrote to the terminal (see text)
	done chan struct{} // closed once leash has exited
	err  error         // cmd.Wait's, once done is closed
}

// startAtTerminal starts leash with args (on the shared Redis) in a new
// session whose controlling terminal is a pty, as its foreground process
// group; leash is killed at cleanup if still running.
func startAtTerminal(t *testing.T, args []string) *leashAtTerminal {
	t.Helper()
	srv := sharedRedis(t)
	ptmx, pts := openPTY(t)
	lt := &leashAtTerminal{ptmx: ptmx, out: &lockedWriter{w: &bytes.Buffer{}}, done: make(chan struct{})}
	lt.cmd = exec.Command(leashBinary(t), args...)
	lt.cmd.Env = append(os.Environ(), storeEnv+"=redis://"+srv.Addr, roleEnv+"=child", "GORACE=atexit_sleep_ms=0")
	lt.cmd.Stdin, lt.cmd.Stdout, lt.cmd.Stderr = pts, pts, pts
	// A new session whose controlling terminal is the pty: leash is its
	// foreground process group, as under an interactive shell.
	lt.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := lt.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	// Owner: this test. Stops when leash exits.
	go func() {
		lt.err = lt.cmd.Wait()
		close(lt.done)
	}()
	// Owner: this test. Stops when the pty closes, after leash exits.
	go func() { _, _ = io.Copy(lt.out, ptmx) }()
	t.Cleanup(func() {
		_ = lt.cmd.Process.Kill()
		<-lt.done
		ptmx.Close()
	})
	return lt
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
