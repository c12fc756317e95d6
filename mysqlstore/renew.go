package mysqlstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/leash-go/leash/driver"
)

// Renew implements driver.Store: one CALL of <table>_renew per batch of
// Options.BatchSize locks, which renews the batch in one UPDATE and reads
// each lock's outcome after it. Batches are sorted by name, the store's
// locking order. A failed batch reports its error in its own results only.
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	out := make([]driver.RenewResult, len(reqs))
	st, err := s.ready(ctx)
	if err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	order := sortedByName(reqs)
	for start := 0; start < len(order); start += s.opts.BatchSize {
		s.renewBatch(ctx, st, reqs, order[start:min(start+s.opts.BatchSize, len(order))], out)
	}
	return out
}

// renewBatch renews reqs[i] for each i of batch and fills out[i].
func (s *Store) renewBatch(ctx context.Context, st *statements, reqs []driver.Request, batch []int, out []driver.RenewResult) {
	fail := func(err error) {
		for _, i := range batch {
			out[i].Err = err
		}
	}
	items := make([][3]any, 0, len(batch))
	sent := make([]int, 0, len(batch)) // the request index of each item
	for _, i := range batch {
		r := reqs[i]
		if err := s.checkRequest(r); err != nil {
			out[i].Err = err
			continue
		}
		items = append(items, [3]any{hex.EncodeToString([]byte(r.Name)), hex.EncodeToString([]byte(r.Owner)), micros(r.Lease)})
		sent = append(sent, i)
	}
	if len(items) == 0 {
		return
	}
	arg, err := json.Marshal(items)
	if err != nil {
		fail(err)
		return
	}
	rows, err := st.renew.QueryContext(ctx, arg)
	if err != nil {
		fail(fmt.Errorf("mysqlstore: renew %d locks: %w", len(items), err))
		return
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var item, status int
		if err := rows.Scan(&item, &status); err != nil {
			fail(fmt.Errorf("mysqlstore: renew %d locks: %w", len(items), err))
			return
		}
		if item < 1 || item > len(sent) {
			fail(fmt.Errorf("mysqlstore: renew %d locks: the server answered for item %d", len(items), item))
			return
		}
		i := sent[item-1]
		switch status {
		case 1:
			out[i].Status = driver.Renewed
			s.watch.observe(reqs[i].Name, true, -1, reqs[i].Lease)
		case 3:
			out[i].Status = driver.RenewTaken
		default: // 2: no lock; 4: not a lock, left as it is
			out[i].Status = driver.RenewGone
		}
		seen++
	}
	if err := rows.Err(); err != nil || seen != len(sent) {
		if err == nil {
			err = fmt.Errorf("the server answered %d of them", seen)
		}
		fail(fmt.Errorf("mysqlstore: renew %d locks: %w", len(items), err))
	}
}
