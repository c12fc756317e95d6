package pgstore

import (
	"context"
	"fmt"

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
	fail := func(err error) {
		err = fmt.Errorf("pgstore: renew %d locks: %w", n, err)
		for i := range res {
			if res[i].Status == 0 {
				res[i].Err = err
			}
		}
	}
	rows, err := s.pool.Query(ctx, s.sql.renew, names, owners, kinds, leases)
	if err != nil {
		fail(err)
		return
	}
	defer rows.Close()
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
		res[i-1].Status = driver.RenewStatus(status)
	}
	if err := rows.Err(); err != nil {
		fail(err)
		return
	}
	for i := range res {
		if res[i].Status == 0 {
			res[i].Err = fmt.Errorf("pgstore: renew %q: no result for it", reqs[i].Name)
		}
	}
}
