package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/leash-go/leash/driver"
)

// Release releases req's lock on every member at once. It succeeds when
// some member released it and every member answered; it returns an error
// matching driver.ErrNotHeld when no member held it; and any other error
// when a member did not answer (its outcome is unknown: a leash Client then
// goes on releasing in the background until the lease would have ended).
func (s *Store) Release(ctx context.Context, req driver.Request) error {
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
	case released > 0:
		return nil
	case notALock != nil:
		return notALock
	}
	return fmt.Errorf("redlock: release %q: %w", req.Name, driver.ErrNotHeld)
}
