package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/leash-go/leash/driver"
)

// Acquire implements [driver.Store]: one statement, a call of the
// Table+"_acquire" function, which locks the name's row, drops its expired
// holds, and grants or refuses by the kind's rules (see [driver.KindStore]).
func (s *Store) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if req.Kind > driver.KindPermit {
		return driver.Grant{}, fmt.Errorf("pgstore: acquire %q: kind %v: %w", req.Name, req.Kind, driver.ErrUnsupported)
	}
	if err := s.ready(ctx); err != nil {
		return driver.Grant{}, err
	}
	var (
		acquired bool
		fence    int64
		rem      int64
		refused  *string
	)
	err := s.pool.QueryRow(ctx, s.sql.acquire, int16(req.Kind), req.Name, req.Owner, req.Parent,
		micros(req.Lease), max(req.Wait.Microseconds(), 0), int32(req.Permits)).Scan(&acquired, &fence, &rem, &refused)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("pgstore: acquire %q: %w", req.Name, explain(err))
	}
	if refused != nil {
		return driver.Grant{}, refusal(req.Name, *refused)
	}
	if acquired {
		return driver.Grant{Acquired: true, Fence: fence}, nil
	}
	return driver.Grant{Remaining: remaining(rem)}, nil
}

// refusal is the error for a definite refusal the functions report: an
// upgrade, or what the name holds when it is not a lock of the kind asked.
func refusal(name, refused string) error {
	if refused == "upgrade" {
		return fmt.Errorf("pgstore: acquire %q: %w", name, driver.ErrUpgrade)
	}
	return fmt.Errorf("pgstore: %w", &driver.NotALockError{Name: name, Found: refused})
}

// foundSemaphore is what a name holds when a lock is asked for on a
// semaphore's name.
const foundSemaphore = "a semaphore, not a mutex or readers-writer lock"

// remaining converts the functions' remaining lease (µs, -1 when unknown)
// to Grant.Remaining: negative when unknown, otherwise at least 1µs.
func remaining(us int64) time.Duration {
	if us < 0 {
		return -1
	}
	return fromMicros(max(us, 1))
}

// Partition implements [driver.MultiStore]: every name of one database can
// be taken together, in name order.
func (s *Store) Partition(names []string) [][]string {
	return [][]string{slices.Sorted(slices.Values(names))}
}

// AcquireMany implements [driver.MultiStore]: one statement, which locks the
// names' rows in name order (so that concurrent calls never deadlock) and
// grants every lock or none.
func (s *Store) AcquireMany(ctx context.Context, reqs []driver.Request) (driver.MultiGrant, error) {
	if len(reqs) == 0 {
		return driver.MultiGrant{Acquired: true, Fences: []int64{}}, nil
	}
	names := make([]string, len(reqs))
	leases := make([]int64, len(reqs))
	for i, r := range reqs {
		if r.Kind != driver.KindMutex {
			return driver.MultiGrant{}, fmt.Errorf("pgstore: acquire many: kind %v: %w", r.Kind, driver.ErrUnsupported)
		}
		names[i], leases[i] = r.Name, micros(r.Lease)
	}
	if err := s.ready(ctx); err != nil {
		return driver.MultiGrant{}, err
	}
	var (
		mg      driver.MultiGrant
		rem     int64
		refused *string
	)
	err := s.pool.QueryRow(ctx, s.sql.acquireMany, names, reqs[0].Owner, leases).Scan(&mg.Acquired, &mg.Fences, &rem, &refused)
	if err != nil {
		return driver.MultiGrant{}, fmt.Errorf("pgstore: acquire %q and %d more: %w", reqs[0].Name, len(reqs)-1, explain(err))
	}
	if refused != nil {
		return driver.MultiGrant{}, fmt.Errorf("pgstore: acquire many: %w", &driver.NotALockError{Name: *refused, Found: foundSemaphore})
	}
	if !mg.Acquired {
		return driver.MultiGrant{Remaining: remaining(rem)}, nil
	}
	return mg, nil
}
