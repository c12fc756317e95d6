package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// Defaults for [Options].
const (
	// DefaultDriftFactor is the clock-rate error allowed for, as a fraction
	// of the lease: 1%, as antirez's Redlock and redsync use.
	DefaultDriftFactor = 0.01
	// DefaultDriftFixed is the fixed part of the drift allowance: timer and
	// expiry granularity of the members (Redis expires keys by the
	// millisecond).
	DefaultDriftFixed = 2 * time.Millisecond
	// DefaultMinMemberTimeout is the shortest default member timeout.
	DefaultMinMemberTimeout = 250 * time.Millisecond
)

// NoDrift, as Options.DriftFactor, turns the drift allowance off (its fixed
// part too): the lock is then safe only if every member's clock runs at the
// client's rate exactly. It exists for tests that show what the allowance
// is for.
const NoDrift = -1.0

// Options configures a [Store]. A nil *Options means all defaults; a zero
// field means that field's default. New copies the struct.
type Options struct {
	// DriftFactor is the largest rate by which a member's clock may run
	// ahead of the client's, as a fraction: a lock granted with lease L may
	// end on a member after L×(1−DriftFactor) of the client's time. Default
	// DefaultDriftFactor (1%). NoDrift turns the allowance off.
	DriftFactor float64
	// DriftFixed is added to the drift allowance for the members' timer
	// granularity. Default DefaultDriftFixed (2ms).
	DriftFixed time.Duration
	// MemberTimeout bounds how long each member may take to answer an
	// acquire, a renewal or a release: a member that has not answered by
	// then counts as a refusal (a renewal or release whose outcome is
	// unknown). Default: a twentieth of the lease, at least
	// DefaultMinMemberTimeout; an acquire never waits past its validity
	// budget (lease minus drift allowance), whatever this says.
	MemberTimeout time.Duration
}

// Store is a quorum lock over independent member stores: a [driver.Store]
// whose locks are held on a majority of its members. See the package
// documentation for what it guarantees. It is safe for concurrent use.
type Store struct {
	members []driver.Store
	quorum  int
	factor  float64
	fixed   time.Duration
	timeout time.Duration // 0: the default, from the lease
	// raisers are the members as driver.FenceRaisers; nil when a member is
	// not one, and the quorum's tokens are then only the largest of the
	// granting members' (see raise).
	raisers []driver.FenceRaiser
	hot     *hot // names refused lately, and members that failed lately
	// releasing marks owners whose release has begun, so that no renewal
	// takes their lock again (see releasing.go).
	releasing releasing
	// after runs a coalesced wake-up later (see coalescer): afterFunc, or a
	// test's.
	after func(time.Duration, func())
	// since is how long an acquire has taken since it started (checked
	// against the validity budget): time.Since, or a test's.
	since func(time.Time) time.Duration
}

// afterFunc runs f after d, as time.AfterFunc does.
func afterFunc(d time.Duration, f func()) { time.AfterFunc(d, f) }

// New returns a Store over members, which must be at least three, an odd
// number of them, each a different store (on a different server: the quorum
// is only as independent as its members). It makes no network call. Bad
// members or options are refused with an error matching
// leash.ErrInvalidArgument or leash.ErrInvalidOptions.
func New(members []driver.Store, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch n := len(members); {
	case n < 3:
		return nil, fmt.Errorf("%w: redlock: %d members: a quorum needs at least 3, since a majority of 2 is both of them and tolerates no failure", leash.ErrInvalidArgument, n)
	case n%2 == 0:
		return nil, fmt.Errorf("%w: redlock: %d members: use an odd number; %d members tolerate as few failures as %d", leash.ErrInvalidArgument, n, n, n-1)
	}
	for i, m := range members {
		if driver.IsNil(m) {
			return nil, fmt.Errorf("%w: redlock: member %d is nil", leash.ErrInvalidArgument, i)
		}
		for j := range i {
			if same(members[j], m) {
				return nil, fmt.Errorf("%w: redlock: members %d and %d are the same store (%s): a quorum needs independent members",
					leash.ErrInvalidArgument, j, i, driver.Describe(m))
			}
		}
	}
	s := &Store{members: append([]driver.Store(nil), members...), quorum: len(members)/2 + 1, timeout: o.MemberTimeout, raisers: raisers(members), hot: newHot(len(members)), after: afterFunc, since: time.Since}
	switch {
	case o.DriftFactor == NoDrift:
		s.factor, s.fixed = 0, 0
	case o.DriftFactor < 0 || o.DriftFactor >= 0.5:
		return nil, fmt.Errorf("%w: redlock: Options.DriftFactor = %v: must be in [0, 0.5), or NoDrift", leash.ErrInvalidOptions, o.DriftFactor)
	default:
		s.factor = o.DriftFactor
		if s.factor == 0 {
			s.factor = DefaultDriftFactor
		}
		s.fixed = o.DriftFixed
		switch {
		case s.fixed == 0:
			s.fixed = DefaultDriftFixed
		case s.fixed < 0:
			return nil, fmt.Errorf("%w: redlock: Options.DriftFixed = %v: must not be negative", leash.ErrInvalidOptions, s.fixed)
		}
	}
	if o.MemberTimeout < 0 {
		return nil, fmt.Errorf("%w: redlock: Options.MemberTimeout = %v: must be positive", leash.ErrInvalidOptions, o.MemberTimeout)
	}
	return s, nil
}

// same reports whether a and b are the same store value.
func same(a, b driver.Store) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && any(a) == any(b)
}

// Members returns how many members the Store has.
func (s *Store) Members() int { return len(s.members) }

// Quorum returns how many members must grant a lock: a majority.
func (s *Store) Quorum() int { return s.quorum }

// Drift returns the drift allowance for a lock of lease: DriftFactor×lease
// + DriftFixed. It implements driver.Drifter: a leash Client keeps each
// hold's validity deadline at least this long before its lease would end.
func (s *Store) Drift(lease time.Duration) time.Duration {
	return time.Duration(s.factor*float64(lease)) + s.fixed
}

// memberTimeout is how long each member may take to answer about a lock of
// lease.
func (s *Store) memberTimeout(lease time.Duration) time.Duration {
	if s.timeout > 0 {
		return s.timeout
	}
	return max(lease/20, DefaultMinMemberTimeout)
}

// String describes the Store and its members.
func (s *Store) String() string {
	names := make([]string, len(s.members))
	for i, m := range s.members {
		names[i] = driver.Describe(m)
	}
	return fmt.Sprintf("redlock(%d of %d: %s)", s.quorum, len(s.members), strings.Join(names, ", "))
}

// CheckName refuses a name any member refuses (see driver.NameChecker).
func (s *Store) CheckName(name string) error {
	for _, m := range s.members {
		if nc, ok := m.(driver.NameChecker); ok {
			if err := nc.CheckName(name); err != nil {
				return err
			}
		}
	}
	return nil
}

// Validate reports a member's construction error (see driver.Validator).
func (s *Store) Validate() error {
	for i, m := range s.members {
		if v, ok := m.(driver.Validator); ok {
			if err := v.Validate(); err != nil {
				return fmt.Errorf("redlock: member %d: %w", i, err)
			}
		}
	}
	return nil
}

// LeaseSlack is the longest a member may keep a lease past its end (see
// storetest.LeaseSlack).
func (s *Store) LeaseSlack(lease time.Duration) time.Duration {
	var d time.Duration
	for _, m := range s.members {
		if ls, ok := m.(interface {
			LeaseSlack(time.Duration) time.Duration
		}); ok {
			d = max(d, ls.LeaseSlack(lease))
		}
	}
	return d
}

// each runs op on every member (i its index) at once and returns their
// results when all have returned or ctx is done, whichever comes first: a
// member that has not answered by then gets late(ctx.Err()). Its op goes on
// in the background until it returns (a store honours ctx, and a go-redis
// client without ContextTimeoutEnabled its read timeout), and its result is
// dropped.
func each[T any](ctx context.Context, members []driver.Store, op func(ctx context.Context, i int, m driver.Store) T, late func(error) T) []T {
	type result struct {
		i int
		v T
	}
	ch := make(chan result, len(members)) // buffered: a late op never blocks
	for i, m := range members {
		// Owner: each. Stops when op returns; op is bounded by ctx.
		go func() { ch <- result{i, op(ctx, i, m)} }()
	}
	out := make([]T, len(members))
	answered := make([]bool, len(members))
	for range members {
		select {
		case r := <-ch:
			out[r.i], answered[r.i] = r.v, true
		case <-ctx.Done():
			for i, ok := range answered {
				if !ok {
					out[i] = late(fmt.Errorf("redlock: member %d did not answer in time: %w", i, ctx.Err()))
				}
			}
			return out
		}
	}
	return out
}

// refusal reports whether a member's Acquire error is a definite refusal,
// after which it granted nothing.
func refusal(err error) bool {
	return errors.Is(err, driver.ErrNotALock) || errors.Is(err, driver.ErrUpgrade) || errors.Is(err, driver.ErrUnsupported)
}

// Close closes every member that has a Close method: the Store owns its
// members, as a leash Client owns its store (Client.Close closes it).
func (s *Store) Close() error {
	var errs []error
	for i, m := range s.members {
		if c, ok := m.(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("redlock: close member %d: %w", i, err))
			}
		}
	}
	return errors.Join(errs...)
}
