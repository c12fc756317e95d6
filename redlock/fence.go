package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/leash-go/leash/driver"
)

// raisers returns the members as driver.FenceRaisers, or nil when one of
// them is not: the quorum keeps its tokens growing only when every member
// can take a fence floor (see the package documentation).
func raisers(members []driver.Store) []driver.FenceRaiser {
	out := make([]driver.FenceRaiser, len(members))
	for i, m := range members {
		r, ok := m.(driver.FenceRaiser)
		if !ok {
			return nil
		}
		out[i] = r
	}
	return out
}

// Floors reports whether the Store raises its members' fencing counters to
// each grant's token before it returns the grant: whether every member is a
// driver.FenceRaiser. Only then do its tokens grow from grant to grant
// whichever majority grants (see the package documentation).
func (s *Store) Floors() bool { return s.raisers != nil }

// raise raises to t, the quorum's token, the fencing counters of as many
// members that granted the lock as a majority needs beside those that
// issued t, one more for each raise that fails while there is one, and
// returns once a majority of members have a counter of at least t: the
// members that issued t, and those whose raise succeeded. It returns an
// error when no majority can be reached.
//
// Only members that granted the lock are raised: each of them holds it
// until after its raise, so its next grant, to anyone, comes after the
// raise and issues a token above t. A member that refused may have granted
// a contender, before the raise, a token below t that the contender could
// still complete into a majority with another member once this lock is
// released.
func (s *Store) raise(ctx context.Context, req driver.Request, answers []answer, t int64) error {
	at := 0 // members whose counter is at least t
	var ask []int
	for i, a := range answers {
		switch {
		case a.err == nil && a.g.Acquired && a.g.Fence == t:
			at++
		case a.err == nil && a.g.Acquired:
			ask = append(ask, i)
		}
	}
	if at >= s.quorum {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, s.memberTimeout(req.Lease))
	defer cancel()
	results := make(chan error, len(ask))
	next := 0
	send := func() {
		i := ask[next]
		next++
		// Owner: raise. Stops when the member's RaiseFence returns, bounded
		// by rctx, which raise cancels when it returns.
		go func() {
			err := s.raisers[i].RaiseFence(rctx, req.Name, t)
			if err != nil {
				err = fmt.Errorf("member %d: %w", i, err)
			}
			results <- err
		}()
	}
	for next < len(ask) && next < s.quorum-at {
		send()
	}
	var errs []error
	for inflight := next; inflight > 0; inflight-- {
		if err := <-results; err != nil {
			errs = append(errs, err)
			if next < len(ask) {
				send()
				inflight++
			}
			continue
		}
		if at++; at >= s.quorum {
			return nil
		}
	}
	return fmt.Errorf("redlock: %q: granted by a majority, but its fencing counter reached token %d on %d members, %d needed: %w",
		req.Name, t, at, s.quorum, errors.Join(errs...))
}
