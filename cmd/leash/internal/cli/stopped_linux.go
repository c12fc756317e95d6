package cli

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

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
