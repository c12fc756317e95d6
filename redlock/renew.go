package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/leash-go/leash/driver"
)

// Renew renews every request on every member at once — one Renew call per
// member for the whole batch — and reports a lock renewed when a majority
// of members renewed it. A lock that a majority can no longer renew (it is
// gone or taken on more than a minority of members) is RenewGone, or
// RenewTaken when some member has given it to another owner; any other
// shortfall (members that did not answer in time) is an error, an unknown
// outcome: the holder keeps its lock until its validity deadline, and is
// told it lost it then unless a later renewal reaches a majority.
//
// A renewal never takes the lock again on a member that lost it (a member
// restarted without persistence, say): the lock lives on the majority that
// still holds it.
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	out := make([]driver.RenewResult, len(reqs))
	if len(reqs) == 0 {
		return out
	}
	shortest := reqs[0].Lease
	for _, r := range reqs[1:] {
		shortest = min(shortest, r.Lease)
	}
	rctx, cancel := context.WithTimeout(ctx, s.memberTimeout(shortest))
	defer cancel()
	per := each(rctx, s.members, func(ctx context.Context, _ int, m driver.Store) []driver.RenewResult {
		res := m.Renew(ctx, reqs)
		if len(res) != len(reqs) {
			bad := make([]driver.RenewResult, len(reqs))
			for i := range bad {
				bad[i].Err = fmt.Errorf("redlock: member returned %d renewal results for %d requests", len(res), len(reqs))
			}
			return bad
		}
		return res
	})
	for i, r := range reqs {
		var renewed, gone, taken int
		var errs []error
		for m, res := range per {
			switch rr := res[i]; {
			case rr.Err != nil:
				errs = append(errs, fmt.Errorf("member %d: %w", m, rr.Err))
			case rr.Status == driver.Renewed:
				renewed++
			case rr.Status == driver.RenewTaken:
				taken++
			default:
				gone++
			}
		}
		switch {
		case renewed >= s.quorum:
			out[i].Status = driver.Renewed
		case gone+taken > len(s.members)-s.quorum && taken > 0:
			out[i].Status = driver.RenewTaken
		case gone+taken > len(s.members)-s.quorum:
			out[i].Status = driver.RenewGone
		default:
			out[i].Err = fmt.Errorf("redlock: renewal of %q reached %d of %d members, %d needed: %w",
				r.Name, renewed, len(s.members), s.quorum, errors.Join(errs...))
		}
	}
	return out
}
