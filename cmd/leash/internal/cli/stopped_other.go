//go:build !linux

package cli

import (
	"syscall"
	"time"
)

// followsStops is whether leash run follows its command's stops and its
// job's (see stopJob): only on Linux, where childStopped can tell.
const followsStops = false

// childStopped reports whether the child pid has stopped. Only Linux
// reports it without reaping an exited child: elsewhere leash does not
// follow its command's stops (Ctrl-Z stops the command alone).
func childStopped(pid int) (syscall.Signal, bool) { return 0, false }

// jobControlled reports whether leash's process group is a job that a
// shell continues once stopped; it is asked only when childStopped reports
// a stop, which it does only on Linux.
func jobControlled() bool { return false }

// controllingTTY is used only where followsStops.
func controllingTTY() int { return -1 }

// bootTime is used only where followsStops.
func bootTime() time.Duration { return 0 }
