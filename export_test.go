package leash

// ExpireLocally moves h's validity deadline into the past without waking the
// scheduler, as a process pause does: the monotonic clock jumps while no
// goroutine runs.
func ExpireLocally(h *Hold) { h.t.validUntil.Store(h.t.c.now() - 1) }

// RevokesHeard returns a channel closed once c listens for revocations
// (after its first grant, on a store that revokes).
func RevokesHeard(c *Client) <-chan struct{} { return c.revokes.listening }
