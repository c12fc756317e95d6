//go:build !linux && !freebsd

package testserver

import "syscall"

// serverProcAttr is empty where the system has no parent-death signal: a
// server outlives a test process that is killed before its cleanup runs
// (it still serves only its temporary directory and loopback port).
func serverProcAttr() *syscall.SysProcAttr { return nil }
