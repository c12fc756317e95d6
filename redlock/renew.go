package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

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
// When a majority renewed a lock, the members that had lost it (paused or
// cut off past the lease, or restarted) are asked to take it again for the
// same owner, so that it survives as many faults as when it was granted; a
// restarted member's restart grace refuses until every lease it may have
// forgotten has ended. It is not done once a release of the owner's lock
// has begun (a member may have answered RenewGone because that release
// freed it), and a lock taken again on a member while such a release began
// is given back there: a renewal round that overlaps a release never takes
// the lock again after it (see releasing.go). When a lock is lost on the
// majority, the members that still renewed it give it back, so that no
// stray copy outlives the loss by a lease.
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	out := make([]driver.RenewResult, len(reqs))
	if len(reqs) == 0 {
		return out
	}
	shortest := reqs[0].Lease
	for _, r := range reqs[1:] {
		shortest = min(shortest, r.Lease)
	}
	// The round runs, for the releases that begin meanwhile, until mend
	// has done with its rejoins.
	round := s.releasing.roundBegins()
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
	}, func(err error) []driver.RenewResult {
		late := make([]driver.RenewResult, len(reqs))
		for i := range late {
			late[i].Err = err
		}
		return late
	})
	var rejoin [][]int // per member: the requests to take again there
	var drop [][]int   // per member: the requests to give back there
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
			if gone > 0 {
				if rejoin == nil {
					rejoin = make([][]int, len(s.members))
				}
				for m, res := range per {
					if res[i].Err == nil && res[i].Status == driver.RenewGone {
						rejoin[m] = append(rejoin[m], i)
					}
				}
			}
		case gone+taken > len(s.members)-s.quorum:
			out[i].Status = driver.RenewGone
			if taken > 0 {
				out[i].Status = driver.RenewTaken
			}
			if renewed > 0 {
				// Lost on the majority: the members that renewed it
				// would keep a stray copy for a whole lease.
				if drop == nil {
					drop = make([][]int, len(s.members))
				}
				for m, res := range per {
					if res[i].Err == nil && res[i].Status == driver.Renewed {
						drop[m] = append(drop[m], i)
					}
				}
			}
		default:
			out[i].Err = fmt.Errorf("redlock: renewal of %q reached %d of %d members, %d needed: %w",
				r.Name, renewed, len(s.members), s.quorum, errors.Join(errs...))
		}
	}
	if rejoin == nil && drop == nil {
		s.releasing.roundEnds(round)
		return out
	}
	s.mend(rctx, reqs, rejoin, drop, round)
	return out
}

// mend brings the members in line with the majority after a renewal:
// it takes locks the majority still holds again on members that lost them
// (rejoin: a member that was paused or cut off past the lease, or
// restarted, whose restart grace refuses until no forgotten lease can still
// run), so that the lock again survives as many member faults as when it
// was granted; and it releases locks the majority lost on the members that
// still renewed them (drop). The fencing token stays the one granted; a
// member that refuses or does not answer is left to the next renewal, or to
// its lease. It ends the renewal round begun at round (see
// releasing.roundEnds) once every member's part is done, which may be after
// mend returns, when ctx is done before a member answers.
func (s *Store) mend(ctx context.Context, reqs []driver.Request, rejoin, drop [][]int, round uint64) {
	var left atomic.Int64 // the members' parts, and mend's
	left.Store(int64(len(s.members)) + 1)
	done := func() {
		if left.Add(-1) == 0 {
			s.releasing.roundEnds(round)
		}
	}
	defer done()
	each(ctx, s.members, func(ctx context.Context, m int, st driver.Store) struct{} {
		defer done()
		if rejoin != nil {
			for _, i := range rejoin[m] {
				if err := s.rejoin(ctx, st, reqs[i]); err != nil && ctx.Err() != nil {
					return struct{}{}
				}
			}
		}
		if drop != nil {
			for _, i := range drop[m] {
				if err := st.Release(ctx, reqs[i]); err != nil && ctx.Err() != nil {
					return struct{}{}
				}
			}
		}
		return struct{}{}
	}, func(error) struct{} { return struct{}{} })
}

// rejoin takes req's lock again on member st, which lost it while a
// majority still holds it, unless a release of req's owner has begun. A
// release that begins while the acquire is on its way may reach st before
// it: when the acquire granted the lock (or its answer was lost) and such a
// release has begun by the time it returns, the grant is given back. That
// check comes after the member's answer, and Release marks the owner before
// it sends anything, so either the check sees the mark or the release
// reaches st after the grant and frees it.
func (s *Store) rejoin(ctx context.Context, st driver.Store, req driver.Request) error {
	if s.releasing.marked(req.Name, req.Owner) {
		return nil
	}
	g, err := st.Acquire(ctx, req)
	if ((err == nil && g.Acquired) || (err != nil && !refusal(err))) && s.releasing.marked(req.Name, req.Owner) {
		// Given back even when ctx is done: it is a stray copy otherwise.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.memberTimeout(req.Lease))
		st.Release(rctx, req)
		cancel()
	}
	return err
}
