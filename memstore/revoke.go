package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

type revokeWatch struct{ revoked func(driver.Revocation) }

// Revoke implements [driver.Revoker]: the exclusive lock on n becomes its
// owner's tombstone, which keeps every grant off the name until it expires
// with the owner's lease or the owner acknowledges, and the owner's client
// is told.
func (s *Store) Revoke(ctx context.Context, n string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	st := s.look(n, time.Now())
	switch {
	case st.sem != nil && len(st.sem.permits) > 0, st.excl == nil && len(st.readers) > 0:
		s.mu.Unlock()
		return false, fmt.Errorf("memstore: revoke %q: %w: it is held by readers or permits; force release it",
			n, leash.ErrUnsupported)
	case st.excl == nil || st.excl.revoked:
		s.mu.Unlock()
		return false, nil
	}
	st.excl.revoked = true
	calls := s.revokesLocked(driver.Revocation{Name: n, Owner: st.excl.owner})
	s.mu.Unlock()
	for _, f := range calls {
		f()
	}
	return true, nil
}

// AckRevoke implements [driver.Revoker]: it deletes req.Owner's tombstone
// on req.Name and wakes every waiter.
func (s *Store) AckRevoke(ctx context.Context, req driver.Request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	st := s.look(req.Name, time.Now())
	var wakes []func()
	if e := st.excl; e != nil && e.revoked && e.owner == req.Owner {
		st.excl = nil
		wakes = s.wakesLocked(req.Name, []note{{driver.KindMutex, driver.Wake{To: driver.WakeAll}}, {driver.KindFair, driver.Wake{To: driver.WakeAll}},
			{driver.KindWrite, driver.Wake{To: driver.WakeAll}}})
	}
	s.mu.Unlock()
	for _, w := range wakes {
		w()
	}
	return nil
}

// WatchRevokes implements [driver.Revoker].
func (s *Store) WatchRevokes(ctx context.Context, client string, revoked func(driver.Revocation)) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return listen(&s.mu, s.revokes, client, &revokeWatch{revoked: revoked}), nil
}

// revokesLocked returns the calls that tell the owner's client of rv.
func (s *Store) revokesLocked(rv driver.Revocation) []func() {
	var out []func()
	for _, w := range s.revokes[driver.OwnerClient(rv.Owner)] {
		out = append(out, func() { w.revoked(rv) })
	}
	return out
}
