//go:build !linux && !freebsd

package cli

import "syscall"

// deathSignal reports whether the system kills leash run's command when
// leash itself dies, even by SIGKILL. macOS, OpenBSD and NetBSD have no
// parent-death signal: a leash that is sent SIGKILL (or crashes) leaves its
// command running without the lock, which frees itself within one lease.
// Any other way leash ends (the command exits, a signal leash can catch, a
// lost lock) stops the command as on Linux.
const deathSignal = false

// setDeathSignal does nothing where the system has no parent-death signal.
func setDeathSignal(*syscall.SysProcAttr) {}
