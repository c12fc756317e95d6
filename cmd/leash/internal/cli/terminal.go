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
// terminal fd again while the command's group (pgid) has it; not once the
// shell has taken it (after bg, say): a shell whose terminal is taken from
// it reads EIO, and exits.
func reclaimTTY(fd, pgid int) {
	if ttyIs(fd, pgid) {
		ignoreTTOU()
		_ = tcsetpgrp(fd, syscall.Getpgrp())
	}
}

// giveTTYTo makes the command's group (pgid) the foreground group of the
// terminal fd, if leash's group has it.
func giveTTYTo(fd, pgid int) {
	if ttyIs(fd, syscall.Getpgrp()) {
		ignoreTTOU()
		_ = tcsetpgrp(fd, pgid)
	}
}

// ignoreTTOU ignores SIGTTOU: a process not in the foreground group may set
// the terminal's foreground group only then (shells do the same), and a
// write of leash's from the background would stop leash alone (see
// supervise). It stays ignored: Go cannot give an ignored signal its
// default action back (signal.Reset leaves it ignored), and leash exits
// once its command has ended. Call it only once the command has started,
// which would inherit it.
func ignoreTTOU() { signal.Ignore(syscall.SIGTTOU) }

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
// suspended machine's sleep and by one that does not (see bootTime); if so,
// the command's group is continued, given the terminal first when giveTTY
// (it had it, or stopped for want of it) and leash's group has it. A
// stopped leash renews nothing: when the lock was lost meanwhile (it may be
// someone else's by now), the command must not run again, not even to
// handle SIGTERM; stopJob then leaves it stopped and reports false, and the
// caller kills it.
func stopJob(fd, pgid int, giveTTY bool, say func(), held func(stopped, awake time.Duration) bool) bool {
	boot, mono := bootTime(), time.Now()
	// SIGSTOP, which no process can catch: a command that handles or
	// ignores SIGTSTP stops all the same, since nothing renews its lock.
	_ = syscall.Kill(-pgid, syscall.SIGSTOP)
	if fd >= 0 {
		reclaimTTY(fd, pgid)
	}
	// Continued by a SIGCONT, heard from before the stop so that it is
	// not missed.
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	say()
	select {
	case <-cont: // continued already
	default:
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		<-cont
	}
	if !held(bootTime()-boot, time.Since(mono)) {
		return false
	}
	if fd >= 0 && giveTTY {
		giveTTYTo(fd, pgid)
	}
	_ = syscall.Kill(-pgid, syscall.SIGCONT)
	return true
}

// writesToTTY reports whether leash's standard output or error is a
// terminal it could be stopped for writing to from the background.
func writesToTTY() bool {
	for _, fd := range []int{1, 2} {
		if _, err := tcgetpgrp(fd); err == nil {
			return true
		}
	}
	return false
}

// ttyIs reports whether pgid is the foreground group of the terminal fd.
func ttyIs(fd, pgid int) bool {
	pgrp, err := tcgetpgrp(fd)
	return err == nil && pgrp == pgid
}

// tcgetpgrp returns the foreground process group of the terminal fd.
func tcgetpgrp(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCGPGRP) }

// tcsetpgrp makes pgrp the foreground process group of the terminal fd.
func tcsetpgrp(fd, pgrp int) error { return unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, pgrp) }
