//go:build !linux

package cli

import "syscall"

// childStopped reports whether the child pid has stopped. Only Linux
// reports it without reaping an exited child: elsewhere leash does not
// follow its command's stops (Ctrl-Z stops the command alone).
func childStopped(pid int) (syscall.Signal, bool) { return 0, false }
