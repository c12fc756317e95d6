package cli

import (
	"os"
	"os/signal"
	"syscall"
	"time"

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
// on while leash waited for the command. So leash (on Linux) follows two
// events. When its command stops from the terminal, leash sends SIGTSTP to
// its own process group, as Ctrl-Z would have, so that the whole job stops
// and the shell sees it stopped. When leash's process group gets a stop
// signal (that SIGTSTP, Ctrl-Z when leash's group has the terminal, or
// SIGTTIN when a member of the job reads the terminal from the background),
// leash stops its command's group, then itself (stopJob); another leash run
// in the same job does the same with its own command. When the shell
// continues the job (fg or bg), leash continues its command, handing it the
// terminal again when leash's group is in the foreground.

// stopJob stops the command's group (pgid) and then leash, when leash's
// process group got a stop signal: say reports it; fd is leash's
// controlling terminal (-1: none), taken back from the command's group if
// that has it. Once leash is continued, held reports whether the lock is
// still held, given how long leash was stopped by a clock that counts a
// suspended machine's sleep (see bootTime); if so, the command's group gets
// the terminal back (when leash's group is in the foreground) and is
// continued. A stopped leash renews nothing: when the lock was lost
// meanwhile (it may be someone else's by now), the command must not run
// again, not even to handle SIGTERM; stopJob then leaves it stopped and
// reports false, and the caller kills it.
func stopJob(fd, pgid int, say func(), held func(stopped time.Duration) bool) bool {
	// SIGSTOP, which no process can catch: a command that handles or
	// ignores SIGTSTP stops all the same, since nothing renews its lock.
	_ = syscall.Kill(-pgid, syscall.SIGSTOP)
	if fd >= 0 {
		if pgrp, err := tcgetpgrp(fd); err == nil && pgrp == pgid {
			// Leash's group takes the terminal back, as a shell does.
			reclaimTTY(fd)
		}
	}
	// Continued by a SIGCONT, which may come at once: heard from before the
	// stop, so that it is not missed.
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	say()
	start := bootTime()
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	<-cont
	signal.Stop(cont)
	if !held(bootTime() - start) {
		return false
	}
	if fd >= 0 {
		if pgrp, err := tcgetpgrp(fd); err == nil && pgrp == syscall.Getpgrp() {
			signal.Ignore(syscall.SIGTTOU)
			_ = tcsetpgrp(fd, pgid)
			signal.Reset(syscall.SIGTTOU)
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGCONT)
	return true
}

// tcgetpgrp returns the foreground process group of the terminal fd.
func tcgetpgrp(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCGPGRP) }

// tcsetpgrp makes pgrp the foreground process group of the terminal fd.
func tcsetpgrp(fd, pgrp int) error { return unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, pgrp) }
