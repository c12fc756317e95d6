package mysqlstore

import (
	"context"
	"fmt"
	"slices"

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
	s.watch.released(req.Name, append(notes, othersToWake(req.Kind, notes)...))
	return nil
}

// othersToWake are the wake-ups a release of kind adds, beside notes, for
// the Store's waiters of the other kinds on the name: locks and semaphores
// share one name space, so a waiter of any kind may have been blocked by
// what was released (a Mutex waiter by a reader). A waiter of a kind the
// notes address gets those; of the released kind's own watch, only those
// (a reader's release with readers left lets no writer in); of any other
// kind, one wake-up: it tries again, at the cost of one round trip if it
// is still blocked.
func othersToWake(kind driver.Kind, notes []note) []note {
	var out []note
	for _, k := range []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindWrite, driver.KindPermit} {
		if k == watchKind(kind) || slices.ContainsFunc(notes, func(n note) bool { return watchKind(n.kind) == k }) {
			continue
		}
		out = append(out, note{k, freed(k)})
	}
	return out
}
