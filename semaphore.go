package leash

import (
	"context"
	"fmt"

	"github.com/leash-go/leash/driver"
)

// MaxPermits is the largest permit count a Semaphore accepts.
const MaxPermits = 1 << 20

// Semaphore limits how many holders may hold a name at once, obtained from
// [Client.Semaphore]. Every permit is a lease with its own id, renewed by the
// watchdog like a lock, with its own fencing token, context and loss signal:
// a holder that crashes returns its permit within one lease. A release wakes
// one waiter. The permit count lives on the server: SetPermits changes it for
// every client while permits are held.
//
// A Semaphore has no re-entry: each Acquire takes one more permit, whatever
// its context, and explicit owners (WithOwner) do not apply. Release a
// permit with its Hold's Unlock; releasing a permit you do not hold returns
// an error matching ErrNotHeld.
type Semaphore struct{ l locker }

// Semaphore returns the semaphore called name with permits permits: the
// count is used when the semaphore does not exist on the server yet;
// afterwards the server's count (see SetPermits) wins. opts, at most one,
// overrides the Client's lock options for its permits.
func (c *Client) Semaphore(name string, permits int, opts ...*LockOptions) *Semaphore {
	l := c.newLocker(driver.KindPermit, name, opts)
	l.permits = permits
	if l.err == nil && (permits < 1 || permits > MaxPermits) {
		l.err = fmt.Errorf("%w: Semaphore(%q, %d): the permit count must be between 1 and %d", ErrInvalidArgument, truncate(name), permits, MaxPermits)
	}
	return &Semaphore{l: l}
}

// Name returns the semaphore name.
func (s *Semaphore) Name() string { return s.l.name }

// Acquire takes a permit, waiting while all are held. See [Mutex.Lock] for
// ctx and errors (there is no re-entry).
func (s *Semaphore) Acquire(ctx context.Context) (*Hold, error) { return s.l.lock(ctx, true) }

// TryAcquire makes one attempt at a permit. When all are held, it returns a
// *NotAcquiredError whose Remaining is the time until the first permit's
// lease runs out.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Hold, error) { return s.l.lock(ctx, false) }

// SetPermits changes the permit count on the server, for every client, and
// wakes the waiters. Permits already held stay held, even above n. It returns
// an error matching ErrUnsupported if the store cannot do it, and one
// matching ErrNotALock if the name holds something other than a semaphore.
func (s *Semaphore) SetPermits(ctx context.Context, n int) error {
	c := s.l.c
	switch {
	case s.l.err != nil:
		return s.l.err
	case c.closed.Load():
		return ErrClosed
	case n < 1 || n > MaxPermits:
		return fmt.Errorf("%w: SetPermits(%d) on %q: the permit count must be between 1 and %d", ErrInvalidArgument, n, truncate(s.l.name), MaxPermits)
	}
	if c.caps.permits == nil {
		return fmt.Errorf("leash: semaphore %q: %w", s.l.name, driver.Unsupported(c.store, "semaphore resizing (driver.PermitSetter)"))
	}
	if err := c.caps.permits.SetPermits(ctx, s.l.name, n); err != nil {
		return fmt.Errorf("leash: semaphore %q: set permits: %w", s.l.name, err)
	}
	return nil
}
