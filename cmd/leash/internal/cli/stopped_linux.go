package cli

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// followsStops is whether leash run follows its command's stops and its
// job's (see stopJob).
const followsStops = true

// cldStopped is si_code CLD_STOPPED: the child was stopped by a signal.
const cldStopped = 5

// childStopped reports whether the child pid has stopped, and by which
// signal (SIGTSTP at the terminal, SIGSTOP…), consuming that report. It
// never waits, and never reaps a child that has exited: cmd.Wait does that.
func childStopped(pid int) (syscall.Signal, bool) {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOHANG, nil)
	if err != nil || info.Signo != int32(syscall.SIGCHLD) || info.Code != cldStopped {
		return 0, false
	}
	// si_status, the stopping signal: after si_pid and si_uid in the
	// union that follows si_signo, si_errno and si_code, aligned as a
	// pointer is (x/sys/unix leaves the union opaque).
	union := (3*4 + unsafe.Sizeof(uintptr(0)) - 1) &^ (unsafe.Sizeof(uintptr(0)) - 1)
	status := *(*int32)(unsafe.Add(unsafe.Pointer(&info), union+8))
	return syscall.Signal(status), true
}

// jobControlled reports whether leash's process group is a job that a
// shell's job control continues once it has stopped: a group that is not
// orphaned, in POSIX's terms, for a member (leash, or the script or
// pipeline member that started it) has its parent in the same session but
// in another group, as an interactive shell is to its jobs. Without one
// (leash leads its session, was left to init, or everything above it shares
// its group), a stopped leash would wait for a SIGCONT that no one sends.
// It follows leash's own line of ancestors within its group.
func jobControlled() bool {
	pgrp, pid, sid := syscall.Getpgrp(), os.Getpid(), sessionID()
	if sid < 0 {
		return false
	}
	for range 64 {
		ppid := parentOf(pid)
		if ppid <= 0 {
			return false // a PID namespace's init is in no session of leash's: below
		}
		ppg, err := syscall.Getpgid(ppid)
		if err != nil {
			return false
		}
		if ppg != pgrp {
			psid, err := unix.Getsid(ppid)
			return err == nil && psid == sid
		}
		pid = ppid
	}
	return false
}

// parentOf returns the parent of process pid, or 0.
func parentOf(pid int) int {
	if pid == os.Getpid() {
		return os.Getppid()
	}
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// statFields returns the fields of /proc/<pid>/stat after the command name
// (state, ppid, pgrp, session…), or nil.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	// pid (comm) state …: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// controllingTTY returns 0 when leash's standard input is its controlling
// terminal, in the foreground or not, and -1 otherwise.
func controllingTTY() int {
	sid, err := unix.IoctlGetInt(0, unix.TIOCGSID)
	if err != nil || sid != sessionID() {
		return -1
	}
	return 0
}

// sessionID returns leash's session id, or -1.
func sessionID() int {
	sid, err := unix.Getsid(0)
	if err != nil {
		return -1
	}
	return sid
}

// bootTime returns the time since boot, suspended time included (which
// Go's monotonic clock leaves out).
func bootTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
