package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/leash-go/leash/driver"
)

// An answer is one member's reply to an acquire.
type answer struct {
	g       driver.Grant
	err     error
	skipped bool // not asked: an ordered attempt stopped at its first member
}

// Acquire takes req's lock on a majority of the members (antirez's
// Redlock): it sends the request to every member at once, waits for their
// answers up to the member timeout (never past the validity budget, lease
// minus drift allowance), and grants when a majority granted and the
// budget is not spent. The fencing token is the largest the granting
// members issued; when every member is a driver.FenceRaiser, the grant is
// returned only once a majority's counters are at least that token (see
// raise), and an error when they cannot be. When it does not grant, it
// releases the lock on every member that granted it or did not answer, so
// that a partial grant does not block others; it returns an error
// (unknown outcome) only when the members whose release failed make a
// majority. A refusal in which it was
// granted some members but not a majority (contenders acquiring at once
// split the members) is tried again, a few times, after a random pause of
// a few milliseconds.
//
// Only KindMutex is supported.
func (s *Store) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if req.Kind != driver.KindMutex {
		return driver.Grant{}, driver.Unsupported(s, req.Kind.String()+" locks")
	}
	budget := req.Lease - s.Drift(req.Lease)
	if budget <= 0 {
		return driver.Grant{}, fmt.Errorf("%w: redlock: a lease of %v is shorter than the drift allowance %v",
			driver.ErrUnsupported, req.Lease, s.Drift(req.Lease))
	}
	// The first attempt asks every member at once, or, for a hot name,
	// its leader first (see hot).
	first := s.hot.leader(req.Name)
	for attempt := 0; ; attempt++ {
		g, split, alone, err := s.attempt(ctx, req, budget, &first)
		if err == nil && !g.Acquired {
			s.hot.refused(req.Name, alone)
			if alone && g.Remaining > hotFor {
				// Refused by one member: the others may be free (a
				// contender that crashed left its partial grant there).
				// Look again, at every member, within a second.
				g.Remaining = hotFor
			}
		}
		if err != nil || g.Acquired || !split || attempt == splitRetries || ctx.Err() != nil {
			return g, err
		}
		// Contenders split the members between them, and each gave its
		// share back. Try again after a random pause, asking first one
		// member that answered (the name's leader if it did, else the
		// lowest-numbered): only the contender it grants goes on to the
		// others, so the next round has a winner.
		t := time.NewTimer(rand.N(time.Millisecond << attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return g, nil
		}
	}
}

// splitRetries is how many times Acquire tries again after a split vote.
const splitRetries = 4

// attempt is one round of Acquire. When *first is a member's index, that
// member is asked alone first, and the others only if it grants; a refusal
// there (but one in its restart grace) ends the round, and alone reports
// it. split reports a refusal in which this caller was granted some members
// but not a majority: most likely a contender acquiring at the same time
// took the others. On return *first is the
// member to ask first in an ordered next round: the name's leader (see hot)
// if it answered, else the lowest-numbered member that answered (-1 if none
// did).
func (s *Store) attempt(ctx context.Context, req driver.Request, budget time.Duration, first *int) (g driver.Grant, split, alone bool, err error) {
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, min(s.memberTimeout(req.Lease), budget))
	ask := func(ctx context.Context, m driver.Store) answer {
		g, err := m.Acquire(ctx, req)
		return answer{g: g, err: err}
	}
	var lead answer
	stop, leader := false, *first // leader: read by each's goroutines, which may outlive this call
	if leader >= 0 {
		lead = ask(actx, s.members[leader])
		// A refusal in the member's restart grace says nothing of
		// contenders: the others are asked.
		stop = lead.err == nil && !lead.g.Acquired && !lead.g.Grace
	}
	answers := each(actx, s.members, func(ctx context.Context, i int, m driver.Store) answer {
		switch {
		case i == leader:
			return lead
		case stop:
			return answer{skipped: true}
		}
		return ask(ctx, m)
	}, func(err error) answer { return answer{err: err} })
	cancel()
	elapsed := s.since(start)

	granted, grace := 0, false
	var fence int64
	*first = -1
	if l := s.hot.pick(req.Name, start); l >= 0 && answers[l].err == nil && !answers[l].skipped {
		*first = l
	}
	for i, a := range answers {
		if a.err == nil && !a.skipped && *first < 0 {
			*first = i
		}
		if a.err != nil && !refusal(a.err) && ctx.Err() == nil { // not the caller's cancellation
			s.hot.fail(i)
		}
		if a.err == nil && a.g.Acquired {
			granted++
			fence = max(fence, a.g.Fence)
		}
		grace = grace || a.g.Grace
	}
	if granted >= s.quorum && elapsed < budget {
		if s.raisers == nil {
			return driver.Grant{Acquired: true, Fence: fence}, false, false, nil
		}
		// Before the grant is returned, a majority's counters must be at
		// its token, so that whichever majority grants next issues a larger
		// one. The raise must also end within the budget, as the grant did.
		rerr := s.raise(ctx, req, answers, fence)
		if rerr == nil && s.since(start) < budget {
			return driver.Grant{Acquired: true, Fence: fence}, false, false, nil
		}
		g, err = s.notGranted(ctx, req, answers)
		if rerr != nil {
			return driver.Grant{}, false, false, errors.Join(rerr, err)
		}
		return g, false, false, err
	}
	g, err = s.notGranted(ctx, req, answers)
	// Not a split when a member refused in its restart grace: trying again
	// soon cannot help, and the caller must hear of the grace.
	return g, granted > 0 && granted < s.quorum && !grace, stop, err
}

// notGranted gives back a failed acquire's partial grants and says when to
// try again.
func (s *Store) notGranted(ctx context.Context, req driver.Request, answers []answer) (driver.Grant, error) {
	// Release wherever the lock may have been taken: members that granted
	// it, and members whose answer was lost (they may have granted it).
	// The caller's cancellation does not stop the release.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.memberTimeout(req.Lease))
	undo := each(rctx, s.members, func(ctx context.Context, i int, m driver.Store) error {
		if a := answers[i]; !a.skipped && ((a.err == nil && a.g.Acquired) || (a.err != nil && !refusal(a.err))) {
			return m.Release(ctx, req)
		}
		return nil
	}, func(err error) error { return err })
	cancel()

	var (
		maybe    int     // members that may still hold the lock for req.Owner
		lost     []error // why they may
		free     int     // members that hold nothing for anyone now
		grace    int
		waits    []time.Duration
		notALock error
	)
	skipped := false
	for i, a := range answers {
		switch {
		case a.skipped:
			skipped = true
		case undo[i] != nil && !errors.Is(undo[i], driver.ErrNotHeld):
			maybe++
			lost = append(lost, fmt.Errorf("member %d: %w", i, errors.Join(a.err, undo[i])))
		case a.err == nil && a.g.Acquired:
			free++
		case a.err != nil:
			if errors.Is(a.err, driver.ErrNotALock) && notALock == nil {
				notALock = a.err
			}
		case a.g.Grace:
			grace++
			waits = append(waits, a.g.Remaining)
		case a.g.Remaining >= 0:
			waits = append(waits, a.g.Remaining)
		}
	}
	if maybe >= s.quorum {
		return driver.Grant{}, fmt.Errorf("redlock: %q: no majority granted in time, and %d members may still hold the lock: %w",
			req.Name, maybe, errors.Join(lost...))
	}
	if notALock != nil && maybe == 0 {
		return driver.Grant{}, notALock
	}
	g := driver.Grant{Remaining: -1, Grace: grace > 0 && free+grace >= s.quorum}
	// A majority is free once the need-th shortest of the refusing
	// members' remaining leases has run out.
	need := s.quorum - free
	slices.Sort(waits)
	switch {
	case need <= 0:
		g.Remaining = 0 // free members enough: the budget ran out, or others' partial grants were in the way
	case need <= len(waits):
		g.Remaining = waits[need-1]
	case skipped && len(waits) > 0:
		g.Remaining = waits[len(waits)-1] // an ordered round stopped at a member held until then
	}
	return g, nil
}
