package pgstore

import (
	"context"
	"fmt"

	"github.com/leash-go/leash/driver"
)

// Release implements [driver.Store]: one statement, a call of the
// Table+"_release" function, which deletes the owner's hold and notifies
// the waiters it lets in (pg_notify, delivered when the statement commits).
// A release whose answer was lost is not resent by pgx, so it needs no
// latch.
func (s *Store) Release(ctx context.Context, req driver.Request) error {
	if req.Kind > driver.KindPermit {
		return fmt.Errorf("pgstore: release %q: kind %v: %w", req.Name, req.Kind, driver.ErrUnsupported)
	}
	if err := s.ready(ctx); err != nil {
		return err
	}
	var (
		released bool
		refused  *string
	)
	err := s.pool.QueryRow(ctx, s.sql.release, int16(req.Kind), req.Name, req.Owner, s.channel).Scan(&released, &refused)
	switch {
	case err != nil:
		return fmt.Errorf("pgstore: release %q: %w", req.Name, explain(err))
	case refused != nil:
		return fmt.Errorf("pgstore: release %q: %w: %w", req.Name, driver.ErrNotHeld, &driver.NotALockError{Name: req.Name, Found: *refused})
	case !released:
		return fmt.Errorf("pgstore: release %q: %w", req.Name, driver.ErrNotHeld)
	}
	return nil
}

// Withdraw implements [driver.Withdrawer]: one statement, which removes the
// owner's fair-queue place and waiting-writer mark on the name and wakes
// whoever that lets in.
func (s *Store) Withdraw(ctx context.Context, req driver.Request) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.sql.withdraw, req.Name, req.Owner, s.channel); err != nil {
		return fmt.Errorf("pgstore: withdraw from %q: %w", req.Name, explain(err))
	}
	return nil
}
