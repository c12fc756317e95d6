package zkstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leash-go/leash/driver"
)

// Partition implements [driver.MultiStore]: one ZooKeeper multi-operation
// takes locks on any znodes, so every name is in one set.
func (s *Store) Partition(names []string) [][]string {
	if len(names) == 0 {
		return nil
	}
	return [][]string{append([]string(nil), names...)}
}

// AcquireMany implements [driver.MultiStore]: it reads every lock's
// directory and its nodes (as Acquire does), and takes every lock in one
// multi-operation on the Client's session, whose compare-and-sets on every
// directory make it all or nothing. Every new lock's token is the
// operation's zxid; a lock the owner holds already (a retry) keeps its
// token and is not blocked by its own hold.
func (s *Store) AcquireMany(ctx context.Context, reqs []driver.Request) (driver.MultiGrant, error) {
	if len(reqs) == 0 {
		return driver.MultiGrant{Acquired: true}, nil
	}
	from := mono()
	for _, r := range reqs {
		if err := s.checkLease(r); err != nil {
			return driver.MultiGrant{}, err
		}
	}
	if err := s.ensureRoot(ctx); err != nil {
		return driver.MultiGrant{}, err
	}
	lease := reqs[0].Lease
	for _, r := range reqs {
		lease = max(lease, r.Lease)
	}
	cs, err := s.openSession(ctx, driver.OwnerClient(reqs[0].Owner), lease)
	if err != nil {
		return driver.MultiGrant{}, err
	}
	for _, r := range reqs {
		if err := s.checkLease(r); err != nil { // the session is established now
			return driver.MultiGrant{}, err
		}
	}
	for range maxAttempts {
		ds := make([]dirState, len(reqs))
		errs := make([]error, len(reqs))
		var wg sync.WaitGroup
		for i, r := range reqs {
			// Owner: AcquireMany, which waits for it (wg.Wait); ctx bounds it.
			wg.Go(func() {
				ds[i], errs[i] = s.readDir(ctx, r.Name)
				if errs[i] == nil && !ds[i].exists {
					if errs[i] = s.createDir(ctx, r.Name, false, 0); errs[i] == nil {
						ds[i], errs[i] = s.readDir(ctx, r.Name)
					}
				}
				if errs[i] == nil {
					errs[i] = ds[i].wrongKind(r.Name, r.Kind)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return driver.MultiGrant{}, err
		}
		var drops []any
		var rem []int64
		blockedBy := false
		for i, r := range reqs {
			views, err := s.judge(ctx, r.Name, ds[i].nodes)
			if err != nil {
				return driver.MultiGrant{}, err
			}
			stale(views, cs)
			others := views[:0:0]
			for _, v := range views {
				if v.node.owner == r.Owner && v.node.epoch == cs.epoch() {
					continue // its own hold: a retry
				}
				others = append(others, v)
				if !v.gone && !v.alive {
					drops = append(drops, v.drop(s.dir(r.Name)))
				}
			}
			if b, ok := blocker(r, ds[i], others); ok {
				blockedBy = true
				rem = append(rem, int64(b.remaining))
			}
		}
		if blockedBy {
			return driver.MultiGrant{Remaining: shortest(rem)}, nil
		}
		fences, again, err := s.grant(ctx, reqs, cs, ds, drops, from)
		if again {
			continue
		}
		if errors.Is(err, errEnded) { // its timer ran out meanwhile: open another
			if cs, err = s.openSession(ctx, cs.client, lease); err != nil {
				return driver.MultiGrant{}, err
			}
			continue
		}
		if err != nil {
			return driver.MultiGrant{}, err
		}
		return driver.MultiGrant{Acquired: true, Fences: fences}, nil
	}
	return driver.MultiGrant{}, fmt.Errorf("zkstore: acquire %d locks: they changed under every one of %d attempts", len(reqs), maxAttempts)
}

func shortest(ds []int64) (d time.Duration) {
	for i, x := range ds {
		if i == 0 || time.Duration(x) < d {
			d = time.Duration(x)
		}
	}
	return d
}
