//go:build linux

// The pseudo-terminal is opened the Linux way (TIOCSPTLCK, /dev/pts/N).

package cli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestRunAtATerminal runs leash as an operator would at a shell: on a
// terminal whose foreground it is. The command, in its own process group,
// must still be able to read the terminal (not be stopped by SIGTTIN).
func TestRunAtATerminal(t *testing.T) {
	srv := sharedRedis(t)
	ptmx, pts := openPTY(t)
	name, log := lockName(t), logFile(t)
	cmd := exec.Command(leashBinary(t), runArgs(name, nil, child(log, "-read"))...)
	cmd.Env = append(os.Environ(), storeEnv+"=redis://"+srv.Addr, roleEnv+"=child", "GORACE=atexit_sleep_ms=0")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	// A new session whose controlling terminal is the pty: leash is its
	// foreground process group, as under an interactive shell.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	done := make(chan struct{})
	var waitErr error
	// Owner: this test. Stops when leash exits.
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	// Owner: this test. Stops when the pty closes, after leash exits.
	go func() { _, _ = io.Copy(io.Discard, ptmx) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		ptmx.Close()
	})
	waitLog(t, log, "ready ", 30*time.Second)
	if _, err := ptmx.Write([]byte("yes\n")); err != nil {
		t.Fatal(err)
	}
	waitLog(t, log, `read "yes" <nil>`, 10*time.Second)
	select {
	case <-done:
		if waitErr != nil {
			t.Errorf("leash run at a terminal: %v; log:\n%s", waitErr, readLog(log))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("leash run at a terminal did not exit")
	}
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
