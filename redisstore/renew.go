package redisstore

import (
	"context"
	"fmt"

	"github.com/leash-go/leash/driver"
	"github.com/redis/go-redis/v9"
)

// Renew implements [driver.Store]. It groups the requests by script (locks
// held in the name's hash: Mutex, FairMutex; writers, whose hash also covers
// their readers; per-owner leases: readers, permits) and by Cluster hash slot
// (a single server is one slot group), cuts each group into batches of
// BatchSize, and runs every batch's script in one pipeline: one round trip
// per node, nodes in parallel. A batch that fails (a node down, a timeout)
// reports its error in its own results only; with the replication guard
// on, so does a batch whose renewals too few replicas acknowledged.
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	res := make([]driver.RenewResult, len(reqs))
	if s.err != nil {
		for i := range res {
			res[i].Err = s.err
		}
		return res
	}
	batches := s.batches(reqs)
	cmds, verdict := evalPipelined(ctx, s.rdb, s.guard, len(batches), func(i int) (*redis.Script, []string, []any) {
		return batches[i].script, batches[i].keys, batches[i].args
	})
	for i, b := range batches {
		v, err := cmds[i].Result()
		var st []driver.RenewStatus
		if err == nil {
			st, err = parseRenew(v, len(b.idx))
		} else {
			s.reloadSlots(ctx, err)
		}
		for j, k := range b.idx {
			switch {
			case err != nil:
				res[k].Err = fmt.Errorf("redisstore: renew %d locks: %w", len(b.idx), err)
			case st[j] == driver.Renewed && verdict != nil:
				// Renewed on the primary only: a failover could lose it.
				res[k].Err = fmt.Errorf("redisstore: renew %d locks: %w", len(b.idx), verdict)
			default:
				res[k].Status = st[j]
			}
		}
	}
	s.recheck(ctx)
	return res
}

// A batch is the requests one renewal script handles.
type batch struct {
	script *redis.Script
	idx    []int // positions in the request slice
	keys   []string
	args   []any
}

// renewScriptFor returns the script that renews a kind's holds.
func renewScriptFor(k driver.Kind) *redis.Script {
	switch k {
	case driver.KindRead, driver.KindPermit: // per-owner leases in a zset
		return renewLeaseScript
	case driver.KindWrite: // the hash, kept as long as its readers
		return renewWriteScript
	default: // the hash
		return renewScript
	}
}

// batches groups reqs by script and hash slot, and cuts groups into batches.
func (s *Store) batches(reqs []driver.Request) []batch {
	type group struct {
		script *redis.Script
		slot   int
	}
	groups := map[group][]int{}
	var order []group
	for i, r := range reqs {
		g := group{script: renewScriptFor(r.Kind)}
		if s.cluster {
			g.slot = slot(s.key(r.Name))
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	var out []batch
	for _, g := range order {
		idx := groups[g]
		for len(idx) > 0 {
			n := min(len(idx), s.batch)
			b := batch{script: g.script, idx: idx[:n], args: make([]any, 0, 2*n)}
			for _, k := range b.idx {
				r := reqs[k]
				n := s.key(r.Name)
				switch r.Kind {
				case driver.KindRead: // the reader's lease, the hash kept alive as long, its timeout key
					b.keys = append(b.keys, readersKey(n), n, readerTimeoutKey(n, r.Owner))
				case driver.KindWrite: // the hash, and the readers it must outlive
					b.keys = append(b.keys, n, readersKey(n))
				case driver.KindPermit: // the permit's lease, in the semaphore's own zset
					b.keys = append(b.keys, n, n, n)
				default:
					b.keys = append(b.keys, n)
				}
				b.args = append(b.args, r.Owner, ms(r.Lease))
			}
			out = append(out, b)
			idx = idx[n:]
		}
	}
	return out
}
