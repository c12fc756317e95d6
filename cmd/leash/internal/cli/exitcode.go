package cli

// Exit statuses of the leash command. "leash run" passes the command's own
// status through when the command ran and the lock held; these are the
// statuses of leash itself.
const (
	exitOK = 0
	// exitFailure: an unexpected failure (the demo did not show what it should).
	exitFailure = 1
	// exitUsage: bad command line or flags.
	exitUsage = 2
	// exitStore: the store URL is wrong, or the store cannot be reached.
	exitStore = 69 // EX_UNAVAILABLE
)
