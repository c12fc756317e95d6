//go:build linux || freebsd

package cli

import "syscall"

// deathSignal reports whether the system kills leash run's command when
// leash itself dies, even by SIGKILL (a parent-death signal).
const deathSignal = true

// setDeathSignal makes the command get SIGKILL when leash dies: nobody
// renews the lock after that, so the command must not run on without it.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
