package redisstore

import (
	"context"
	"fmt"

	"github.com/leash-go/leash"
	"github.com/redis/go-redis/v9"
)

// Renew implements [leash.Store]. It groups the requests by Cluster hash slot
// (a single server is one group), cuts each group into batches of BatchSize,
// and runs every batch's script in one pipeline: one round trip per node,
// nodes in parallel. A batch that fails (a node down, a timeout) reports its
// error in its own results only.
func (s *Store) Renew(ctx context.Context, reqs []leash.Request) []leash.RenewResult {
	res := make([]leash.RenewResult, len(reqs))
	if s.err != nil {
		for i := range res {
			res[i].Err = s.err
		}
		return res
	}
	batches := s.batches(reqs)
	cmds := make([]*redis.Cmd, len(batches))
	run := func(eval func(pipe redis.Pipeliner, b batch) *redis.Cmd, which []int) {
		pipe := s.rdb.Pipeline()
		for _, i := range which {
			cmds[i] = eval(pipe, batches[i])
		}
		_, _ = pipe.Exec(ctx) // errors are read per command
	}
	all := make([]int, len(batches))
	for i := range all {
		all[i] = i
	}
	run(func(pipe redis.Pipeliner, b batch) *redis.Cmd {
		return renewScript.EvalSha(ctx, pipe, b.keys, b.args...)
	}, all)
	var reload []int
	for i, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			reload = append(reload, i)
		}
	}
	if len(reload) > 0 {
		run(func(pipe redis.Pipeliner, b batch) *redis.Cmd {
			return renewScript.Eval(ctx, pipe, b.keys, b.args...)
		}, reload)
	}
	for i, b := range batches {
		v, err := cmds[i].Result()
		var st []leash.RenewStatus
		if err == nil {
			st, err = parseRenew(v, len(b.idx))
		}
		for j, k := range b.idx {
			if err != nil {
				res[k].Err = fmt.Errorf("redisstore: renew %d locks: %w", len(b.idx), err)
			} else {
				res[k].Status = st[j]
			}
		}
	}
	return res
}

// A batch is the requests one renewal script handles.
type batch struct {
	idx  []int // positions in the request slice
	keys []string
	args []any
}

// batches groups reqs by hash slot (on Cluster) and cuts groups into batches.
func (s *Store) batches(reqs []leash.Request) []batch {
	groups := map[int][]int{}
	var order []int
	for i, r := range reqs {
		sl := 0
		if s.cluster {
			sl = slot(r.Name)
		}
		if _, ok := groups[sl]; !ok {
			order = append(order, sl)
		}
		groups[sl] = append(groups[sl], i)
	}
	var out []batch
	for _, sl := range order {
		idx := groups[sl]
		for len(idx) > 0 {
			n := min(len(idx), s.batch)
			b := batch{idx: idx[:n], keys: make([]string, n), args: make([]any, 0, 2*n)}
			for j, k := range b.idx {
				b.keys[j] = reqs[k].Name
				b.args = append(b.args, reqs[k].Owner, ms(reqs[k].Lease))
			}
			out = append(out, b)
			idx = idx[n:]
		}
	}
	return out
}
