//go:build linux || freebsd

package testserver

import "syscall"

// serverProcAttr makes a server die with the process that started it, even
// when that process crashes or is killed.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
