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

// Acquire implements driver.Store: one CALL of <table>_acquire, which takes
// the name's row lock, decides and commits server-side (see schema.sql).
func (s *Store) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := s.checkRequest(req); err != nil {
		return driver.Grant{}, err
	}
	st, err := s.ready(ctx)
	if err != nil {
		return driver.Grant{}, err
	}
	var (
		granted          bool
		fence, remaining int64
		kind             int
	)
	err = st.acquire.QueryRowContext(ctx, []byte(req.Name), []byte(req.Owner), micros(req.Lease)).Scan(&granted, &fence, &remaining, &kind)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("mysqlstore: acquire %q: %w", req.Name, err)
	}
	if kind != 0 {
		return driver.Grant{}, notALock(req.Name, kind)
	}
	if granted {
		s.watch.observe(req.Name, true, fence, req.Lease)
		return driver.Grant{Acquired: true, Fence: fence}, nil
	}
	rem := time.Duration(remaining) * time.Microsecond
	s.watch.observe(req.Name, true, fence, rem)
	return driver.Grant{Remaining: rem}, nil
}

// notALock is the refusal of a name whose row holds another kind than the
// store's locks (a kind a later schema version may add).
func notALock(name string, kind int) error {
	return &driver.NotALockError{Name: name, Found: fmt.Sprintf("a row of kind %d in the lock table, which this version of mysqlstore does not know", kind)}
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
		kind      int
	)
	if err := st.acquireMany.QueryRowContext(ctx, []byte(reqs[0].Owner), arg).Scan(&granted, &fences, &remaining, &kind); err != nil {
		return driver.MultiGrant{}, fmt.Errorf("mysqlstore: acquire %d names: %w", len(reqs), err)
	}
	if kind != 0 {
		return driver.MultiGrant{}, notALock(reqs[0].Name, kind)
	}
	if !granted {
		return driver.MultiGrant{Remaining: time.Duration(remaining) * time.Microsecond}, nil
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
		s.watch.observe(reqs[j].Name, true, f, reqs[j].Lease)
	}
	return driver.MultiGrant{Acquired: true, Fences: out}, nil
}

// sortedByName returns the indexes of reqs in the order of their names'
// bytes, which is the order of the table's primary key (VARBINARY): every
// statement that locks several rows locks them in this order, so no two
// wait for each other in a cycle.
func sortedByName(reqs []driver.Request) []int {
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(reqs[a].Name, reqs[b].Name) })
	return order
}
