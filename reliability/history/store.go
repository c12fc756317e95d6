package history

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/leash-go/leash/driver"
)

// Store is a driver.Store that records every call to the store it wraps:
// one operation per acquire and release, and one per lock of a batched
// renewal. It passes Validate, CheckName and Close through.
type Store struct {
	inner driver.Store
	rec   *Recorder
}

// Wrap returns a Store that records inner's operations in rec. inner must
// have every capability Store passes through (redisstore does).
func Wrap(inner driver.Store, rec *Recorder) *Store { return &Store{inner: inner, rec: rec} }

var _ driver.Store = (*Store)(nil)

// Acquire implements driver.Store.
func (s *Store) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	id := s.rec.Begin(Op{Kind: StoreAcquire, Lock: req.Name, Owner: req.Owner, Lease: int64(req.Lease)})
	g, err := s.inner.Acquire(ctx, req)
	s.rec.End(id, func(o *Op) {
		if err != nil {
			failed(o, err)
			return
		}
		o.OK, o.Fence = g.Acquired, g.Fence
	})
	return g, err
}

// Renew implements driver.Store.
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	ids := make([]int64, len(reqs))
	call := Now()
	for i, r := range reqs {
		ids[i] = s.rec.Begin(Op{Kind: StoreRenew, Lock: r.Name, Owner: r.Owner, Lease: int64(r.Lease), Call: call})
	}
	res := s.inner.Renew(ctx, reqs)
	for i, id := range ids {
		s.rec.End(id, func(o *Op) {
			if i >= len(res) {
				o.Ambiguous = true
				return
			}
			if res[i].Err != nil {
				failed(o, res[i].Err)
				return
			}
			switch res[i].Status {
			case driver.Renewed:
				o.OK, o.Status = true, Renewed
			case driver.RenewGone:
				o.Status = Gone
			case driver.RenewTaken:
				o.Status = Taken
			default:
				o.Ambiguous = true
			}
		})
	}
	return res
}

// Release implements driver.Store.
func (s *Store) Release(ctx context.Context, req driver.Request) error {
	id := s.rec.Begin(Op{Kind: StoreRelease, Lock: req.Name, Owner: req.Owner, Lease: int64(req.Lease)})
	err := s.inner.Release(ctx, req)
	s.rec.End(id, func(o *Op) {
		switch {
		case errors.Is(err, driver.ErrNotHeld):
			o.Status = NotHeld
		case err != nil:
			failed(o, err)
		default:
			o.OK, o.Status = true, Freed
		}
	})
	return err
}

// refused are the Redis error prefixes that mean the command was not run.
var refused = []string{"BUSY ", "LOADING ", "NOSCRIPT ", "MASTERDOWN ", "READONLY "}

// failed records err on o: Failed when the server certainly did not run the
// command, Ambiguous otherwise (a timeout or a reset may come after it ran).
func failed(o *Op, err error) {
	o.Err = err.Error()
	for _, p := range refused {
		if strings.Contains(o.Err, ": "+p) {
			o.Status = Failed
			return
		}
	}
	o.Ambiguous = true
}

// The capabilities below pass through to the wrapped store, which must have
// them: the suite wraps redisstore.

// Kinds implements driver.KindStore.
func (s *Store) Kinds() []driver.Kind { return s.inner.(driver.KindStore).Kinds() }

// Withdraw implements driver.Withdrawer: a waiter leaving a queue, no hold
// changes, so nothing is recorded.
func (s *Store) Withdraw(ctx context.Context, req driver.Request) error {
	return s.inner.(driver.Withdrawer).Withdraw(ctx, req)
}

// Watch implements driver.Watcher.
func (s *Store) Watch(ctx context.Context, kind driver.Kind, name string, wake func(driver.Wake)) (func(), error) {
	return s.inner.(driver.Watcher).Watch(ctx, kind, name, wake)
}

// Inspect implements driver.Admin.
func (s *Store) Inspect(ctx context.Context, name string) (driver.Info, error) {
	return s.inner.(driver.Admin).Inspect(ctx, name)
}

// List implements driver.Admin.
func (s *Store) List(ctx context.Context, pattern string) ([]string, error) {
	return s.inner.(driver.Admin).List(ctx, pattern)
}

// ForceRelease implements driver.Admin.
func (s *Store) ForceRelease(ctx context.Context, name string) (bool, error) {
	return s.inner.(driver.Admin).ForceRelease(ctx, name)
}

// Validate passes the wrapped store's construction error through.
func (s *Store) Validate() error {
	if v, ok := s.inner.(driver.Validator); ok {
		return v.Validate()
	}
	return nil
}

// CheckName passes the wrapped store's name check through.
func (s *Store) CheckName(name string) error {
	if nc, ok := s.inner.(driver.NameChecker); ok {
		return nc.CheckName(name)
	}
	return nil
}

// Close closes the wrapped store if it has a Close method.
func (s *Store) Close() error {
	if c, ok := s.inner.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
