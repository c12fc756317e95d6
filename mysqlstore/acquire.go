package mysqlstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leash-go/leash/driver"
)

// Kinds implements driver.KindStore: every lock kind.
func (s *Store) Kinds() []driver.Kind {
	return []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindRead, driver.KindWrite, driver.KindPermit}
}

// Refusals the procedures report (see schema.sql).
const (
	refusedSemaphore = 1 // a lock was asked of a semaphore's name
	refusedLock      = 2 // a permit was asked of a lock's name
	refusedUpgrade   = 3 // the owner reads and asked to write
)

// Acquire implements driver.Store: one CALL of <table>_acquire, which locks
// the name's row, decides and commits server-side (see schema.sql).
func (s *Store) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := checkLease(req); err != nil {
		return driver.Grant{}, err
	}
	st, err := s.readyFor(ctx, req)
	if err != nil {
		return driver.Grant{}, err
	}
	var (
		granted, held             bool
		fence, remaining          int64
		refusal, kind, permitsArg int
	)
	if req.Kind == driver.KindPermit {
		permitsArg = req.Permits
	}
	err = st.acquire.QueryRowContext(ctx, int(req.Kind), []byte(req.Name), []byte(req.Owner), []byte(req.Parent),
		micros(req.Lease), micros(req.Wait), permitsArg).Scan(&granted, &fence, &remaining, &refusal, &held, &kind)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("mysqlstore: acquire %q: %w", req.Name, err)
	}
	if err := refused(req.Name, refusal, kind); err != nil {
		return driver.Grant{}, err
	}
	s.watch.sawFence(req.Name, fence)
	if granted {
		if req.Kind != driver.KindPermit {
			s.watch.observe(req.Name, groupOf(req.Kind), true, req.Lease)
		}
		return driver.Grant{Acquired: true, Fence: fence}, nil
	}
	rem := time.Duration(remaining) * time.Microsecond
	if remaining < 0 {
		rem = -1
	}
	if held {
		s.watch.observe(req.Name, groupOf(req.Kind), true, rem)
	}
	return driver.Grant{Remaining: rem}, nil
}

// refused turns a procedure's refusal into the error it means, or nil.
func refused(name string, refusal, kind int) error {
	switch {
	case refusal == 0:
		return nil
	case refusal == refusedUpgrade:
		return fmt.Errorf("mysqlstore: acquire %q: %w", name, driver.ErrUpgrade)
	case kind != 0 && kind != int(driver.KindPermit):
		return &driver.NotALockError{Name: name, Found: fmt.Sprintf("a row of kind %d in the lock table, which this version of mysqlstore does not know", kind)}
	case refusal == refusedSemaphore:
		return &driver.NotALockError{Name: name, Found: "a semaphore, not a mutex or readers-writer lock"}
	default:
		return &driver.NotALockError{Name: name, Found: "a mutex or readers-writer lock, not a semaphore"}
	}
}

// Withdraw implements driver.Withdrawer: one CALL of <table>_withdraw
// removes the owner's fair queue place and waiting-writer mark, and this
// Store's waiters that the removal lets in are woken at once.
func (s *Store) Withdraw(ctx context.Context, req driver.Request) error {
	st, err := s.readyFor(ctx, req)
	if err != nil {
		return err
	}
	var (
		head    []byte
		readers bool
	)
	if err := st.withdraw.QueryRowContext(ctx, []byte(req.Name), []byte(req.Owner)).Scan(&head, &readers); err != nil {
		return fmt.Errorf("mysqlstore: withdraw from %q: %w", req.Name, err)
	}
	var notes []note
	if len(head) > 0 {
		notes = append(notes, note{driver.KindFair, driver.Wake{To: driver.WakeHead, Head: string(head)}})
	}
	if readers {
		notes = append(notes, note{driver.KindWrite, driver.Wake{To: driver.WakeReaders}})
	}
	s.watch.released(req.Name, notes)
	return nil
}

// SetPermits implements driver.PermitSetter: one CALL of
// <table>_set_permits, then this Store's waiters for a permit are woken.
func (s *Store) SetPermits(ctx context.Context, name string, n int) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("mysqlstore: name of %d bytes: want 1 to %d", len(name), MaxNameLen)
	}
	if n < 0 || n > 1<<31-1 {
		return fmt.Errorf("mysqlstore: %d permits: want 0 to %d", n, 1<<31-1)
	}
	st, err := s.ready(ctx)
	if err != nil {
		return err
	}
	var refusal, kind int
	if err := st.setPermits.QueryRowContext(ctx, []byte(name), n).Scan(&refusal, &kind); err != nil {
		return fmt.Errorf("mysqlstore: set permits of %q: %w", name, err)
	}
	if err := refused(name, refusal, kind); err != nil {
		return err
	}
	s.watch.released(name, []note{{driver.KindPermit, driver.Wake{To: driver.WakeAll}}})
	return nil
}

// Partition implements driver.MultiStore: every name of one table can be
// taken in one step.
func (s *Store) Partition(names []string) [][]string {
	if len(names) == 0 {
		return nil
	}
	return [][]string{slices.Clone(names)}
}

// AcquireMany implements driver.MultiStore: one CALL of
// <table>_acquire_many takes the names' rows in name order and grants all or
// nothing.
func (s *Store) AcquireMany(ctx context.Context, reqs []driver.Request) (driver.MultiGrant, error) {
	if len(reqs) == 0 {
		return driver.MultiGrant{Acquired: true}, nil
	}
	for _, r := range reqs {
		if err := s.checkRequest(r); err != nil {
			return driver.MultiGrant{}, err
		}
		if err := checkLease(r); err != nil {
			return driver.MultiGrant{}, err
		}
		if r.Kind != driver.KindMutex {
			return driver.MultiGrant{}, fmt.Errorf("mysqlstore: AcquireMany of a %v lock: want mutexes", r.Kind)
		}
		if r.Owner != reqs[0].Owner {
			return driver.MultiGrant{}, fmt.Errorf("mysqlstore: AcquireMany with owners %q and %q: want one", reqs[0].Owner, r.Owner)
		}
	}
	order := sortedByName(reqs)
	items := make([][2]any, len(order))
	for i, j := range order {
		items[i] = [2]any{hex.EncodeToString([]byte(reqs[j].Name)), micros(reqs[j].Lease)}
	}
	arg, err := json.Marshal(items)
	if err != nil {
		return driver.MultiGrant{}, err
	}
	st, err := s.ready(ctx)
	if err != nil {
		return driver.MultiGrant{}, err
	}
	var (
		granted   bool
		fences    string
		remaining int64
		refusal   int
		name      []byte
	)
	if err := st.acquireMany.QueryRowContext(ctx, []byte(reqs[0].Owner), arg).Scan(&granted, &fences, &remaining, &refusal, &name); err != nil {
		return driver.MultiGrant{}, fmt.Errorf("mysqlstore: acquire %d names: %w", len(reqs), err)
	}
	if refusal != 0 {
		return driver.MultiGrant{}, fmt.Errorf("mysqlstore: acquire %d names: %w", len(reqs), refused(string(name), refusedSemaphore, refusal))
	}
	if !granted {
		rem := time.Duration(remaining) * time.Microsecond
		if remaining < 0 {
			rem = -1
		}
		return driver.MultiGrant{Remaining: rem}, nil
	}
	parts := strings.Split(fences, ",")
	if len(parts) != len(reqs) {
		return driver.MultiGrant{}, fmt.Errorf("mysqlstore: acquire %d names: the server returned %d tokens", len(reqs), len(parts))
	}
	out := make([]int64, len(reqs))
	for i, j := range order {
		f, err := strconv.ParseInt(parts[i], 10, 64)
		if err != nil {
			return driver.MultiGrant{}, fmt.Errorf("mysqlstore: acquire %d names: token %q: %w", len(reqs), parts[i], err)
		}
		out[j] = f
		s.watch.observe(reqs[j].Name, groupLock, true, reqs[j].Lease)
	}
	return driver.MultiGrant{Acquired: true, Fences: out}, nil
}

// sortedByName returns the indexes of reqs in the order of their names'
// bytes, which is the order of the tables' primary keys (VARBINARY): every
// statement that locks several rows locks them in this order, so no two
// wait for each other in a cycle.
func sortedByName(reqs []driver.Request) []int {
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := strings.Compare(reqs[a].Name, reqs[b].Name); c != 0 {
			return c
		}
		return strings.Compare(reqs[a].Owner, reqs[b].Owner)
	})
	return order
}
