package leash

// ExpireLocally moves h's validity deadline into the past without waking the
// scheduler, as a process pause does: the monotonic clock jumps while no
// goroutine runs.
func ExpireLocally(h *Hold) { h.t.validUntil.Store(h.t.c.now() - 1) }
