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

// raise raises to t, the quorum's token, the fencing counter of every member
// that answered the acquire and did not itself issue t, and returns once a
// majority of members have a counter of at least t: the members that issued
// t, and those whose raise succeeded. The raises still under way then go on
// in the background, each bounded by the member timeout. It returns an error
// when no majority can be reached.
func (s *Store) raise(ctx context.Context, req driver.Request, answers []answer, t int64) error {
	at := 0 // members whose counter is at least t
	var ask []int
	for i, a := range answers {
		switch {
		case a.err == nil && a.g.Acquired && a.g.Fence == t:
			at++
		case a.err == nil && !a.skipped:
			ask = append(ask, i)
		}
	}
	if at >= s.quorum {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, s.memberTimeout(req.Lease))
	results := make(chan error, len(ask)) // buffered: a raise that ends after raise returned never blocks
	for _, i := range ask {
		// Owner: raise. Stops when the member's RaiseFence returns, bounded
		// by rctx, which the last of them cancels.
		go func() {
			err := s.raisers[i].RaiseFence(rctx, req.Name, t)
			if err != nil {
				err = fmt.Errorf("member %d: %w", i, err)
			}
			results <- err
		}()
	}
	var errs []error
	for n := range ask {
		if err := <-results; err != nil {
			errs = append(errs, err)
		} else {
			at++
		}
		if at >= s.quorum {
			// Owner: raise. Cancels rctx once the remaining raises return.
			go func() {
				for range len(ask) - n - 1 {
					<-results
				}
				cancel()
			}()
			return nil
		}
	}
	cancel()
	return fmt.Errorf("redlock: %q: granted by a majority, but its fencing counter reached token %d on %d members, %d needed: %w",
		req.Name, t, at, s.quorum, errors.Join(errs...))
}
