package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// Exit statuses of the leash command.
//
// "leash run" exits with the command's own status when the command ran and
// the lock held throughout (128+N when a signal N ended the command, as in a
// shell). leash's own statuses lie in the sysexits range 64–78, where a
// command's own statuses rarely fall, plus the shell's 126 and 127; whenever
// leash exits with one of its own statuses it prints one line on stderr
// saying why.
const (
	exitOK = 0
	// exitUsage: bad command line: flags, durations, lock name, a missing
	// "--", a malformed store URL, an unknown store scheme, a store flag the
	// store does not take, an unreadable certificate file, or a store that
	// lacks what the command needs (ls, show and unlock need administration;
	// mark-fresh and demo a Redis store). Reported before any network call,
	// but for a limit only the server knows (a ZooKeeper session timeout
	// the server granted shorter than --lease): retrying cannot help.
	exitUsage = 64 // EX_USAGE
	// exitNotALock: the name holds something that is not a lock of the kind
	// asked for: another application's data (a string, a list, a plain
	// hash...) under the same key, or a semaphore where a lock is asked for
	// and the reverse. leash changed nothing: it never deletes, alters or
	// extends what is not its lock. The command did not run.
	exitNotALock = 65 // EX_DATAERR
	// exitStore: the store cannot be reached or failed: connection refused,
	// timed out, unknown host, or an error from the server.
	exitStore = 69 // EX_UNAVAILABLE
	// exitFailure: leash itself failed in an unexpected way (and the demo did
	// not show what it should).
	exitFailure = 70 // EX_SOFTWARE
	// exitNotAcquired: someone else held the lock, or the store was in its
	// restart grace, and leash gave up: at once with --no-wait, or when
	// --wait ran out. The command did not run.
	exitNotAcquired = 75 // EX_TEMPFAIL
	// exitLost: the lock was lost while the command ran (taken away, expired,
	// store unreachable, --max-hold reached): the command was stopped, and
	// whatever it did was not protected by the lock to the end. Never 0.
	exitLost = 76
	// exitAuth: the store refused leash's credentials or permissions (ACL),
	// or its TLS certificate could not be verified.
	exitAuth = 77 // EX_NOPERM
	// exitCannotRun: the command was found but could not be run.
	exitCannotRun = 126
	// exitNotFound: the command was not found.
	exitNotFound = 127
	// exitSignal + N: leash was stopped by signal N before the command ran,
	// or the command was ended by signal N.
	exitSignal = 128
)

// exitStatuses documents every status, in the order help prints them.
var exitStatuses = []struct {
	status string
	means  string
}{
	{"any other", "run: the command's own status; it ran and the lock held to the end"},
	{fmt.Sprint(exitUsage), "bad command line, lock name or store URL, or a store that lacks what the command needs (before any network call, but for a ZooKeeper session timeout the server granted shorter than --lease)"},
	{fmt.Sprint(exitNotALock), "the name holds something that is not a lock (another application's data); leash changed nothing"},
	{fmt.Sprint(exitStore), "the store cannot be reached, or failed, or is not safe for locks (it may evict keys)"},
	{fmt.Sprint(exitFailure), "leash failed unexpectedly"},
	{fmt.Sprint(exitNotAcquired), "run: the lock was held by someone else, or the restart grace refused it (said on stderr even with --quiet); the command did not run"},
	{fmt.Sprint(exitLost), "run: the lock was lost while the command ran; the command was stopped"},
	{fmt.Sprint(exitAuth), "the store refused the credentials or permissions, or its TLS certificate did not verify"},
	{fmt.Sprint(exitCannotRun), "run: the command cannot be executed"},
	{fmt.Sprint(exitNotFound), "run: the command was not found"},
	{"128+N", "run: signal N ended the command, or stopped leash before the command ran"},
}

// printExitStatuses writes the exit status table, indented for help texts.
func printExitStatuses(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range exitStatuses {
		fmt.Fprintf(tw, "  %s\t%s\n", s.status, s.means)
	}
	tw.Flush()
}

// exitStatusText returns the exit status table as printExitStatuses writes it.
func exitStatusText() string {
	var b strings.Builder
	printExitStatuses(&b)
	return b.String()
}

// exitError is an error that carries leash's exit status for it.
type exitError struct {
	status int
	err    error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withStatus returns err carrying the exit status.
func withStatus(status int, err error) error { return &exitError{status: status, err: err} }

// usageErrorf returns a bad-command-line error (exitUsage).
func usageErrorf(format string, args ...any) error {
	return withStatus(exitUsage, fmt.Errorf(format, args...))
}

// statusOf returns the exit status for err.
func statusOf(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.status
	case errors.Is(err, leash.ErrInvalidArgument), errors.Is(err, driver.ErrUnsupported):
		return exitUsage
	case errors.Is(err, leash.ErrNotALock):
		return exitNotALock
	case errors.Is(err, leash.ErrNotAcquired):
		return exitNotAcquired
	case errors.Is(err, leash.ErrLost):
		return exitLost
	}
	return exitFailure
}
