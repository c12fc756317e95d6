package leash

// ExpireLocally moves h's validity deadline into the past without waking the
// scheduler, as a process pause does: the monotonic clock jumps while no
// goroutine runs.
func ExpireLocally(h *Hold) { h.t.validUntil.Store(h.t.c.now() - 1) }

// RevokesHeard returns a channel closed once c listens for revocations
// (after its first grant, on a store that revokes).
func RevokesHeard(c *Client) <-chan struct{} { return c.revokes.listening }

// SetHandoff turns the hand-off of locks by releases (handoff.go) on or off
// for c, as if its store had or lacked the capability. Call it before c is
// used.
func SetHandoff(c *Client, on bool) { c.caps.handoff = on }

// CountHandoffFromReceipt makes c count a handed-off lock's validity from
// when its wake-up arrived: the unsafe rule, for the negative control.
func CountHandoffFromReceipt(c *Client) { c.cfg.handoffFromReceipt = true }

// WatchLinger is how long a watch stays established after its last waiter
// left.
const WatchLinger = watchLinger

// WaitAcks waits for c's revocation acknowledgements in flight.
func WaitAcks(c *Client) { c.revokes.acks.Wait() }

// Unacked returns how many revoked tenures of c wait for their last Unlock
// to acknowledge (AckRevokeOnUnlock).
func Unacked(c *Client) int {
	c.revokes.mu.Lock()
	defer c.revokes.mu.Unlock()
	return len(c.revokes.unacked)
}
