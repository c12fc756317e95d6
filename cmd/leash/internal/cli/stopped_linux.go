package cli

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// cldStopped is si_code CLD_STOPPED: the child was stopped by a signal.
const cldStopped = 5

// childStopped reports whether the child pid has stopped (SIGTSTP at the
// terminal, or SIGSTOP), consuming that report. It never waits, and never
// reaps a child that has exited: cmd.Wait does that.
func childStopped(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOHANG, nil)
	return err == nil && info.Signo == int32(syscall.SIGCHLD) && info.Code == cldStopped
}
