package zkstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
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
// directory and judges its nodes (as Acquire does), and takes every lock in
// one multi-operation, whose compare-and-sets on every directory make it
// all or nothing. Every lock's token is the operation's zxid.
func (s *Store) AcquireMany(ctx context.Context, reqs []driver.Request) (driver.MultiGrant, error) {
	if len(reqs) == 0 {
		return driver.MultiGrant{Acquired: true}, nil
	}
	for _, r := range reqs {
		if err := s.checkLease(r); err != nil {
			return driver.MultiGrant{}, err
		}
	}
	if err := s.ensureRoot(ctx); err != nil {
		return driver.MultiGrant{}, err
	}
	client := driver.OwnerClient(reqs[0].Owner)
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
		cs, err := s.session(ctx, client)
		if err != nil {
			return driver.MultiGrant{}, err
		}
		if g, ok, again, err := s.refreshMany(ctx, reqs, client, cs, ds); ok || again || err != nil {
			if again {
				continue
			}
			return g, err
		}
		var drops []any
		var rem []int64
		blockedBy := false
		for i, r := range reqs {
			views, err := s.judge(ctx, r.Name, ds[i].nodes)
			if err != nil {
				return driver.MultiGrant{}, err
			}
			if b, ok := blocker(r, ds[i], views); ok {
				blockedBy = true
				rem = append(rem, int64(b.remaining))
			}
			for _, v := range views {
				if !v.gone && !v.alive {
					drops = append(drops, v.drop(s.dir(r.Name), s.clientPath(driver.OwnerClient(v.node.owner)))...)
				}
			}
		}
		if blockedBy {
			return driver.MultiGrant{Remaining: shortest(rem)}, nil
		}
		fence, again, err := s.grant(ctx, reqs, client, cs, ds, drops)
		if again {
			continue
		}
		if err != nil {
			return driver.MultiGrant{}, err
		}
		fences := make([]int64, len(reqs))
		for i := range fences {
			fences[i] = fence
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

// refreshMany is an AcquireMany by an owner that holds every lock already
// (a retry): ok reports that it does, and the grant is then its tokens.
func (s *Store) refreshMany(ctx context.Context, reqs []driver.Request, client string, cs *clientSession, ds []dirState) (g driver.MultiGrant, ok, again bool, err error) {
	if cs == nil {
		return g, false, false, nil
	}
	ops := make([]any, 0, len(reqs)+1)
	for i, r := range reqs {
		own, found := ds[i].own(r.Owner, kindsOf(r.Kind)...)
		if !found || own.epoch != cs.epoch {
			return g, false, false, nil
		}
		ops = append(ops, &zk.SetDataRequest{Path: s.dir(r.Name) + "/" + own.name, Data: nodeData(own.kind, r.Lease), Version: -1})
	}
	lease := reqs[0].Lease
	for _, r := range reqs {
		lease = max(lease, r.Lease)
	}
	sop, next := s.sessionOp(client, cs, lease)
	res, err := call(ctx, func() ([]zk.MultiResponse, error) { return s.conn.Multi(append(ops, sop)...) })
	if changed(err) {
		s.remember(client, nil)
		return g, false, true, nil
	}
	if err != nil {
		return g, false, false, fmt.Errorf("zkstore: acquire %d locks: %w", len(reqs), err)
	}
	now := res[0].Stat.Mtime
	afterSessionOp(&next, res[len(res)-1], false, now)
	if s.lapsed(client, cs, now) {
		if err := s.undo(ctx, client, next.version); err != nil {
			return g, false, false, err
		}
		return g, false, true, nil
	}
	s.remember(client, &next)
	s.granted(client, next.epoch, now)
	g.Acquired = true
	for _, r := range res[:len(reqs)] {
		g.Fences = append(g.Fences, r.Stat.Czxid)
	}
	return g, true, false, nil
}
