package mysqlstore

import (
	"context"
	"fmt"

	"github.com/leash-go/leash/driver"
)

// Release implements driver.Store: one UPDATE that frees the lock only if
// req.Owner holds it (a statement the driver does not resend, so a retry
// cannot hide what the first attempt did), then wakes this Store's waiters
// at once, with no round trip.
func (s *Store) Release(ctx context.Context, req driver.Request) error {
	if err := s.checkRequest(req); err != nil {
		return err
	}
	st, err := s.ready(ctx)
	if err != nil {
		return err
	}
	res, err := st.release.ExecContext(ctx, []byte(req.Name), []byte(req.Owner))
	if err != nil {
		return fmt.Errorf("mysqlstore: release %q: %w", req.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("mysqlstore: release %q: %w", req.Name, err)
	}
	if n == 0 {
		if err := s.refusal(ctx, st, req.Name); err != nil {
			return fmt.Errorf("%w (%w)", err, driver.ErrNotHeld)
		}
		return fmt.Errorf("mysqlstore: release %q by %q: %w", req.Name, req.Owner, driver.ErrNotHeld)
	}
	s.watch.released(req.Name, driver.Wake{To: driver.WakeOne})
	return nil
}

// refusal returns a NotALockError when name's row holds something that is
// not one of the store's locks, and nil otherwise (also when the row cannot
// be read: the caller's refusal then stands on its own).
func (s *Store) refusal(ctx context.Context, st *statements, name string) error {
	var (
		kind             int
		owner            string
		remaining, fence int64
	)
	if st.inspect.QueryRowContext(ctx, []byte(name)).Scan(&kind, &owner, &remaining, &fence) == nil && kind != 0 {
		return notALock(name, kind)
	}
	return nil
}
