package pgstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/leash-go/leash/driver"
)

// Renew implements [driver.Store]: one statement per Options.BatchSize
// locks, a call of the Table+"_renew" function with the batch as arrays. It
// locks the batch's name rows in name order (so that concurrent renewals
// and acquires never deadlock), extends every lease still held, and reports
// each lock's outcome. A failed batch reports its error in its own results
// only.
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	res := make([]driver.RenewResult, len(reqs))
	if err := s.ready(ctx); err != nil {
		for i := range res {
			res[i].Err = err
		}
		return res
	}
	for start := 0; start < len(reqs); start += s.opts.BatchSize {
		end := min(start+s.opts.BatchSize, len(reqs))
		s.renewBatch(ctx, reqs[start:end], res[start:end])
	}
	return res
}

// renewBatch renews reqs in one statement and writes their results to res.
func (s *Store) renewBatch(ctx context.Context, reqs []driver.Request, res []driver.RenewResult) {
	n := len(reqs)
	names, owners := make([]string, n), make([]string, n)
	kinds, leases := make([]int16, n), make([]int64, n)
	for i, r := range reqs {
		names[i], owners[i], kinds[i], leases[i] = r.Name, r.Owner, int16(r.Kind), micros(r.Lease)
	}
	// Statuses are kept aside until the statement has completed: an error
	// after the rows (a failed commit, a cut connection) means the server
	// may have renewed none of them, so every result gets the error.
	fail := func(err error) {
		err = fmt.Errorf("pgstore: renew %d locks: %w", n, explain(err))
		for i := range res {
			res[i] = driver.RenewResult{Err: err}
		}
	}
	rows, err := s.pool.Query(ctx, s.sql.renew, names, owners, kinds, leases)
	if err != nil {
		fail(err)
		return
	}
	defer rows.Close()
	statuses := make([]driver.RenewStatus, n)
	for rows.Next() {
		var (
			i      int32
			status int16
		)
		if err := rows.Scan(&i, &status); err != nil {
			fail(err)
			return
		}
		if i < 1 || int(i) > n || status < int16(driver.Renewed) || status > int16(driver.RenewTaken) {
			fail(fmt.Errorf("unexpected result %d for request %d", status, i))
			return
		}
		statuses[i-1] = driver.RenewStatus(status)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		fail(err)
		return
	}
	if got := rows.CommandTag().RowsAffected(); got != int64(n) {
		fail(fmt.Errorf("%d results for %d requests", got, n))
		return
	}
	if i := slices.Index(statuses, 0); i >= 0 {
		fail(fmt.Errorf("no result for %q", reqs[i].Name))
		return
	}
	for i, st := range statuses {
		res[i] = driver.RenewResult{Status: st}
	}
}
