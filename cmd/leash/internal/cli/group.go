package cli

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// startGroup starts cmd in a process group of its own, so that a lost lock
// stops all of it, whose processes get SIGKILL if leash dies, since then
// nobody renews the lock (where the system can: see deathsig.go).
func startGroup(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setDeathSignal(cmd.SysProcAttr)
	cmd.WaitDelay = time.Second
	return cmd.Start()
}

// A groupStop stops a command's process group when its lock is lost (or its
// run must end): SIGTERM, then SIGKILL once killAfter has passed (at once
// when killAfter is 0). leash run and leash cron share it.
type groupStop struct {
	pgid      int
	killAfter time.Duration
	// timer fires when SIGKILL is due; nil before term and after kill.
	timer  <-chan time.Time
	termed bool
	killed bool
	// say reports what is sent and why ("SIGTERM", "SIGKILL"): a line
	// of the caller's.
	say func(format string, a ...any)
}

// term sends SIGTERM to the group (SIGKILL when killAfter is 0) and arms
// the SIGKILL timer.
func (g *groupStop) term() {
	if g.termed || g.killed {
		return
	}
	g.termed = true
	if g.killAfter == 0 {
		g.kill()
		return
	}
	_ = syscall.Kill(-g.pgid, syscall.SIGTERM)
	g.timer = time.After(g.killAfter)
}

// kill sends SIGKILL to the group.
func (g *groupStop) kill() {
	_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
	g.killed, g.timer = true, nil
}

// clear makes sure nothing of the group outlives the lock once its leader
// has exited: processes left in it get SIGTERM (unless they had it) and
// SIGKILL when killAfter has passed. Signals from sigs (nil: none) are
// passed on to the group meanwhile. It returns when no process is left, or
// killWait after the SIGKILL at most (a killed process its parent has not
// reaped yet still counts).
func (g *groupStop) clear(sigs <-chan os.Signal) {
	if !groupAlive(g.pgid) {
		return
	}
	if !g.killed {
		g.term()
	}
	for !g.killed && groupAlive(g.pgid) {
		select {
		case sig := <-sigs:
			_ = syscall.Kill(-g.pgid, sig.(syscall.Signal))
		case <-g.timer:
			g.say("processes of the command outlived --kill-after %v; sending SIGKILL", g.killAfter)
			g.kill()
		case <-time.After(50 * time.Millisecond):
		}
	}
	// SIGKILL is delivered at once, but the processes are gone only once
	// the kernel has torn them down: the lock is released after that.
	for end := time.Now().Add(killWait); groupAlive(g.pgid) && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond) // polls the group; killWait bounds it
	}
}

// killWait bounds how long clear waits for a killed group to be gone.
const killWait = 2 * time.Second

// groupAlive reports whether any process of the process group is left.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }
