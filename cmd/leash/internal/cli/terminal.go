package cli

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// The command of leash run runs in its own process group, so that a lost
// lock stops all of it. When leash runs in the foreground of a terminal (an
// operator at a shell), that group must own the terminal, or a command that
// reads it would be stopped by SIGTTIN; leash hands the terminal to the
// command's group and takes it back when the command ends.

// foregroundTTY returns the fd of leash's standard input when it is a
// terminal whose foreground process group is leash's own, or -1.
func foregroundTTY() int {
	const stdin = 0
	pgrp, err := tcgetpgrp(stdin)
	if err != nil || pgrp != syscall.Getpgrp() {
		return -1
	}
	return stdin
}

// reclaimTTY makes leash's process group the foreground group of the
// terminal fd again, after the command's group had it.
func reclaimTTY(fd int) {
	// A process not in the foreground group may set it only while SIGTTOU
	// is ignored, as shells do.
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = tcsetpgrp(fd, syscall.Getpgrp())
}

// Job control. Ctrl-Z at the terminal stops its foreground group, which is
// the command's, not leash's; the shell, which waits for its job (leash's
// process group: leash, or the script or pipeline that runs it), would wait
// on while leash waited for the command. So when the command stops, leash
// takes the terminal back and stops its own process group, as Ctrl-Z would
// have, and the shell sees its job stopped; when the shell continues it (fg
// or bg), leash continues the command's group, handing it the terminal
// again when leash is in the foreground.

// stopWithCommand is called when the command's group (pgid) was stopped,
// with leash in the foreground of the terminal fd when it started the
// command: say reports that leash stops too, then leash stops until it is
// continued, and continues the command's group if held reports that the
// lock is still held. A stopped leash renews nothing: when the lock was lost
// meanwhile (it may be someone else's by now), the command must not run
// again, not even to handle SIGTERM; stopWithCommand then leaves it stopped
// and reports false, and the caller kills it.
func stopWithCommand(fd, pgid int, say func(), held func() bool) bool {
	if pgrp, err := tcgetpgrp(fd); err == nil && pgrp == pgid {
		// Stopped at the terminal: leash's group takes it back, as a shell
		// does. A command stopped in the background (after bg) leaves the
		// terminal where it is, with the shell.
		reclaimTTY(fd)
	}
	say()
	// The whole job stops, leash with it (kill of pid 0: leash's process
	// group); the stop may take effect a moment after kill returns, so wait
	// for the SIGCONT that ends it before looking at the lock.
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	_ = syscall.Kill(0, syscall.SIGSTOP)
	<-cont
	signal.Stop(cont)
	if !held() {
		return false
	}
	// Continued. In the foreground (fg), the command's group gets the
	// terminal back before it runs on.
	if pgrp, err := tcgetpgrp(fd); err == nil && pgrp == syscall.Getpgrp() {
		signal.Ignore(syscall.SIGTTOU)
		_ = tcsetpgrp(fd, pgid)
		signal.Reset(syscall.SIGTTOU)
	}
	_ = syscall.Kill(-pgid, syscall.SIGCONT)
	return true
}

// tcgetpgrp returns the foreground process group of the terminal fd.
func tcgetpgrp(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCGPGRP) }

// tcsetpgrp makes pgrp the foreground process group of the terminal fd.
func tcsetpgrp(fd, pgrp int) error { return unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, pgrp) }
