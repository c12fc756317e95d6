package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/leash-go/leash/driver"
)

// Release releases req's lock on every member at once. It returns
//
//   - nil when every member answered and a majority released the lock (the
//     others did not hold it): the owner held it until now;
//   - an error matching driver.ErrNotHeld when every member answered but
//     fewer than a majority released it, none or a minority: the lock was
//     lost on the others (force-released or expired there, and maybe taken
//     by another owner), which a leash Client reports to the holder as a
//     *leash.LostError. It matches driver.ErrNotALock too when a member
//     holds something other than a lock under the name. The members that
//     still held the lock have released it all the same;
//   - any other error when a member did not answer or failed (an error
//     other than ErrNotHeld), whatever the others answered: the outcome is
//     unknown (that member may still hold the lock), and a leash Client
//     goes on releasing in the background until the lease would have ended,
//     and does not report the hold lost.
//
// A renewal round that is running when Release is called, or that begins
// before it returns, does not take the lock again for req.Owner on a member
// that lost it (see Renew and releasing.go).
func (s *Store) Release(ctx context.Context, req driver.Request) error {
	// Marked before any member is asked: see Store.rejoin.
	s.releasing.begin(req.Name, req.Owner)
	defer s.releasing.end(req.Name, req.Owner)
	rctx, cancel := context.WithTimeout(ctx, s.memberTimeout(req.Lease))
	defer cancel()
	errs := each(rctx, s.members, func(ctx context.Context, _ int, m driver.Store) error { return m.Release(ctx, req) },
		func(err error) error { return err })
	var (
		released int
		unknown  []error
		notALock error
	)
	for i, err := range errs {
		switch {
		case err == nil:
			released++
		case errors.Is(err, driver.ErrNotALock):
			if notALock == nil {
				notALock = err
			}
		case errors.Is(err, driver.ErrNotHeld):
		default:
			unknown = append(unknown, fmt.Errorf("member %d: %w", i, err))
		}
	}
	switch {
	case len(unknown) > 0:
		return fmt.Errorf("redlock: release %q: released on %d of %d members, %d did not answer: %w",
			req.Name, released, len(s.members), len(unknown), errors.Join(unknown...))
	case released >= s.quorum:
		return nil
	case released == 0 && notALock != nil:
		return notALock
	case released == 0:
		return fmt.Errorf("redlock: release %q: %w", req.Name, driver.ErrNotHeld)
	}
	// Released on a minority: the holder must hear that the lock was lost
	// on the others (a *leash.LostError on a single store).
	cause := driver.ErrNotHeld
	if notALock != nil {
		cause = notALock
	}
	return fmt.Errorf("redlock: release %q: released on %d of %d members, %d needed; the others did not hold it: %w",
		req.Name, released, len(s.members), s.quorum, cause)
}
