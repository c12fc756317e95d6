//go:build !linux

package cli

// childStopped reports whether the child pid has stopped. Only Linux
// reports it without reaping an exited child: elsewhere leash does not
// follow its command's stops (Ctrl-Z stops the command alone).
func childStopped(pid int) bool { return false }
