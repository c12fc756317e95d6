package etcdstore

import (
	"context"
	"slices"

	"github.com/leash-go/leash/driver"
)

var _ driver.MultiStore = (*Store)(nil)

// multiMost is the most names one AcquireMany takes. Its transaction
// compares four keys per name, and, while a name's fence key is unknown,
// nests a second transaction that compares them again; etcd counts a nested
// transaction's operations against what its parent leaves of the limit of
// 128 per transaction (--max-txn-ops, by default): 8 × 16 = 128.
const multiMost = 16

// Partition implements driver.MultiStore: the names, sorted, in sets of at
// most 16, each of which AcquireMany takes in one transaction.
func (s *Store) Partition(names []string) [][]string {
	sorted := slices.Sorted(slices.Values(names))
	var sets [][]string
	for len(sorted) > 0 {
		n := min(len(sorted), multiMost)
		sets = append(sets, sorted[:n:n])
		sorted = sorted[n:]
	}
	return sets
}

// AcquireMany implements driver.MultiStore: one transaction creates every
// lock key (and stamps every fence key) if all are absent, as Acquire does
// for one. Each token is its lock key's create revision: the grant's
// revision, the same for every name of a fresh grant.
func (s *Store) AcquireMany(ctx context.Context, reqs []driver.Request) (driver.MultiGrant, error) {
	return s.acquire(ctx, reqs)
}
