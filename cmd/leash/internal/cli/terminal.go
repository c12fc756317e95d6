package cli

import (
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

// tcgetpgrp returns the foreground process group of the terminal fd.
func tcgetpgrp(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCGPGRP) }

// tcsetpgrp makes pgrp the foreground process group of the terminal fd.
func tcsetpgrp(fd, pgrp int) error { return unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, pgrp) }
