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
// members as a majority needs beside those that issued t, and returns once a
// majority of members have a counter of at least t: the members that issued
// t, and those whose raise succeeded. It asks the members that granted the
// lock first, and for each raise that fails, another member that answered
// the acquire, while there is one. It returns an error when no majority can
// be reached.
func (s *Store) raise(ctx context.Context, req driver.Request, answers []answer, t int64) error {
	at := 0 // members whose counter is at least t
	var granted, others []int
	for i, a := range answers {
		switch {
		case a.err == nil && a.g.Acquired && a.g.Fence == t:
			at++
		case a.err == nil && a.g.Acquired:
			granted = append(granted, i)
		case a.err == nil && !a.skipped:
			others = append(others, i)
		}
	}
	if at >= s.quorum {
		return nil
	}
	ask := append(granted, others...)
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
