package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leash-go/leash/driver"
)

// Inspect reports name as a majority of the members see it (see
// driver.Admin): held by the owner that a majority of members record, with
// the lease the lock has left on a majority (after it, fewer than a majority
// hold it); free, with no owner, when no owner holds a majority. Fence is
// the largest token any member issued for the name (a partial grant that
// was given back counts too). Waiters is -1. Every member must be an
// Admin, and a majority must answer.
func (s *Store) Inspect(ctx context.Context, name string) (driver.Info, error) {
	type reply struct {
		info driver.Info
		err  error
	}
	replies, err := adminEach(ctx, s, func(ctx context.Context, a driver.Admin) reply {
		info, err := a.Inspect(ctx, name)
		return reply{info, err}
	}, func(err error) reply { return reply{err: err} }, func(r reply) error { return r.err })
	if err != nil {
		return driver.Info{}, fmt.Errorf("redlock: inspect %q: %w", name, err)
	}
	out := driver.Info{Name: name, Kind: driver.KindMutex, Remaining: -1, Waiters: -1}
	byOwner := map[string][]time.Duration{} // per owner: the remaining lease on each member that records it
	holds := map[string]int{}
	for _, r := range replies {
		if r.err != nil {
			continue
		}
		out.Fence = max(out.Fence, r.info.Fence)
		for _, o := range r.info.Owners {
			byOwner[o.Owner] = append(byOwner[o.Owner], r.info.Remaining)
			holds[o.Owner] = max(holds[o.Owner], o.Holds)
		}
	}
	for owner, left := range byOwner {
		if len(left) < s.quorum {
			continue
		}
		slices.Sort(left)
		slices.Reverse(left)
		out.Held = true
		out.Remaining = left[s.quorum-1]
		out.Owners = []driver.OwnerHolds{{Owner: owner, Holds: holds[owner], Kind: driver.KindMutex, Remaining: -1}}
	}
	return out, nil
}

// List returns, sorted, the names matching pattern that a majority of the
// members list (see driver.Admin). Every member must answer.
func (s *Store) List(ctx context.Context, pattern string) ([]string, error) {
	type reply struct {
		names []string
		err   error
	}
	replies, err := adminEach(ctx, s, func(ctx context.Context, a driver.Admin) reply {
		names, err := a.List(ctx, pattern)
		return reply{names, err}
	}, func(err error) reply { return reply{err: err} }, func(r reply) error { return r.err })
	if err == nil {
		for i, r := range replies {
			if r.err != nil {
				err = fmt.Errorf("member %d: %w", i, r.err)
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("redlock: list %q: %w", pattern, err)
	}
	count := map[string]int{}
	for _, r := range replies {
		for _, n := range r.names {
			count[n]++
		}
	}
	var out []string
	for n, c := range count {
		if c >= s.quorum {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ForceRelease force-releases name on every member (see driver.Admin) and
// reports whether any member had something to delete, also when it returns
// an error: a member that does not answer makes it an error (run it again),
// and so does one that holds something other than a lock under the name
// (driver.ErrNotALock: that member is left untouched, the others are
// force-released all the same).
func (s *Store) ForceRelease(ctx context.Context, name string) (bool, error) {
	type reply struct {
		ok  bool
		err error
	}
	replies, err := adminEach(ctx, s, func(ctx context.Context, a driver.Admin) reply {
		ok, err := a.ForceRelease(ctx, name)
		return reply{ok, err}
	}, func(err error) reply { return reply{err: err} }, func(r reply) error { return r.err })
	found := false
	var errs []error
	for i, r := range replies {
		found = found || r.ok
		if r.err != nil {
			errs = append(errs, fmt.Errorf("member %d: %w", i, r.err))
		}
	}
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		return found, fmt.Errorf("redlock: force release %q: %w", name, err)
	}
	return found, nil
}

// adminEach runs op on every member, which must all be Admins, at once,
// each bounded by the default member timeout. It fails when a member is
// not an Admin, when a member refuses the name (not a lock), or when fewer
// than a majority answered; but for the first, it returns the members'
// replies with the error, for what they did (see ForceRelease).
func adminEach[T any](ctx context.Context, s *Store, op func(ctx context.Context, a driver.Admin) T, late func(error) T, errOf func(T) error) ([]T, error) {
	for _, m := range s.members {
		if _, ok := m.(driver.Admin); !ok {
			return nil, driver.Unsupported(s, "administration (a member has none: "+driver.Describe(m)+")")
		}
	}
	actx, cancel := context.WithTimeout(ctx, DefaultMinMemberTimeout*4)
	defer cancel()
	out := each(actx, s.members, func(ctx context.Context, _ int, m driver.Store) T { return op(ctx, m.(driver.Admin)) }, late)
	answered := 0
	for _, r := range out {
		err := errOf(r)
		if errors.Is(err, driver.ErrNotALock) {
			return out, err
		}
		if err == nil {
			answered++
		}
	}
	if answered < s.quorum {
		var errs []error
		for _, r := range out {
			errs = append(errs, errOf(r))
		}
		return out, fmt.Errorf("%d of %d members answered, %d needed: %w", answered, len(s.members), s.quorum, errors.Join(errs...))
	}
	return out, nil
}
