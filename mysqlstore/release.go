package mysqlstore

import (
	"context"
	"fmt"

	"github.com/leash-go/leash/driver"
)

// Release implements driver.Store: one CALL of <table>_release, which frees
// the lock only if req.Owner holds it and tells whom that lets in; this
// Store's waiters are woken at once, with no round trip. One CALL that the
// driver does not resend: a retry cannot hide what the first attempt did.
func (s *Store) Release(ctx context.Context, req driver.Request) error {
	st, err := s.readyFor(ctx, req)
	if err != nil {
		return err
	}
	var (
		released                  bool
		refusal, wakeKind, wakeTo int
		head                      []byte
		kind                      int
	)
	err = st.release.QueryRowContext(ctx, int(req.Kind), []byte(req.Name), []byte(req.Owner)).Scan(&released, &refusal, &wakeKind, &wakeTo, &head, &kind)
	if err != nil {
		return fmt.Errorf("mysqlstore: release %q: %w", req.Name, err)
	}
	if err := refused(req.Name, refusal, kind); err != nil {
		return fmt.Errorf("%w (%w)", err, driver.ErrNotHeld)
	}
	if !released {
		return fmt.Errorf("mysqlstore: release %q by %q: %w", req.Name, req.Owner, driver.ErrNotHeld)
	}
	var notes []note
	if wakeKind >= 0 {
		notes = append(notes, note{driver.Kind(wakeKind), driver.Wake{To: driver.Waking(wakeTo), Head: string(head)}})
	}
	s.watch.released(req.Name, notes)
	return nil
}
