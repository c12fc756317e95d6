//go:build !linux

package cli

import "syscall"

// childStopped reports whether the child pid has stopped. Only Linux
// reports it without reaping an exited child: elsewhere leash does not
// follow its command's stops (Ctrl-Z stops the command alone).
func childStopped(pid int) (syscall.Signal, bool) { return 0, false }

// jobControlled reports whether leash's process group is a job that a
// shell continues once stopped; it is asked only when childStopped reports
// a stop, which it does only on Linux.
func jobControlled() bool { return false }
