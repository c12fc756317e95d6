package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/leash-go/leash/driver"
)

// Inspect implements [driver.Admin]: one read-only statement. Waiters is -1:
// PostgreSQL does not tell who LISTENs.
func (s *Store) Inspect(ctx context.Context, name string) (driver.Info, error) {
	info := driver.Info{Name: name, Remaining: -1, Waiters: -1}
	if err := s.ready(ctx); err != nil {
		return info, err
	}
	rows, err := s.pool.Query(ctx, s.sql.inspect, name)
	if err != nil {
		return info, fmt.Errorf("pgstore: inspect %q: %w", name, err)
	}
	defer rows.Close()
	var (
		kind              string
		excl              []driver.OwnerHolds
		readers, permits  []driver.OwnerHolds
		exclRemaining     int64 = -1
		longest           int64 = -1
		permitCount       int32
		role, owner       *string
		remainingOfHolder *int64
	)
	for rows.Next() {
		if err := rows.Scan(&kind, &info.Fence, &permitCount, &role, &owner, &remainingOfHolder); err != nil {
			return info, fmt.Errorf("pgstore: inspect %q: %w", name, err)
		}
		if role == nil {
			continue // the name's row, without any hold
		}
		rem := fromMicros(max(*remainingOfHolder, 1))
		switch *role {
		case "x", "w":
			k := driver.KindMutex
			if *role == "w" {
				k = driver.KindWrite
			}
			excl = append(excl, driver.OwnerHolds{Owner: *owner, Holds: 1, Kind: k, Remaining: -1})
			exclRemaining = max(*remainingOfHolder, 1)
		case "r":
			readers = append(readers, driver.OwnerHolds{Owner: *owner, Holds: 1, Kind: driver.KindRead, Remaining: rem})
			longest = max(longest, *remainingOfHolder, 1)
		case "p":
			permits = append(permits, driver.OwnerHolds{Owner: *owner, Holds: 1, Kind: driver.KindPermit, Remaining: rem})
			longest = max(longest, *remainingOfHolder, 1)
		case "q", "m":
			info.Queued++
		}
	}
	if err := rows.Err(); err != nil {
		return info, fmt.Errorf("pgstore: inspect %q: %w", name, err)
	}
	byOwner := func(a, b driver.OwnerHolds) int { return strings.Compare(a.Owner, b.Owner) }
	slices.SortFunc(readers, byOwner)
	slices.SortFunc(permits, byOwner)
	switch {
	case kind == "s":
		info.Kind, info.Permits, info.Owners = driver.KindPermit, int(permitCount), permits
	case len(excl) > 0:
		info.Kind = excl[0].Kind
		info.Owners = append(excl, readers...)
		longest = max(longest, exclRemaining)
	default:
		if len(readers) > 0 {
			info.Kind = driver.KindRead
		}
		info.Owners = readers
	}
	if len(info.Owners) > 0 {
		info.Held = true
		info.Remaining = fromMicros(longest)
	}
	return info, nil
}

// List implements [driver.Admin]: one statement, the pattern turned into a
// LIKE pattern for the server and checked again with driver.Glob. It lists
// the names held (a lock, a read lease, a permit), not those with only
// waiting places.
func (s *Store) List(ctx context.Context, pattern string) ([]string, error) {
	return s.matching(ctx, "list", s.sql.list, pattern)
}

// matching runs query, a statement of one LIKE parameter that returns
// names, for pattern (a driver.Glob; "" matches every name), checks each
// name again with driver.Glob, and returns them sorted; what names the
// operation in errors.
func (s *Store) matching(ctx context.Context, what, query, pattern string) ([]string, error) {
	if pattern == "" {
		pattern = "*"
	}
	re, err := driver.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %s: %w", what, err)
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, query, likePattern(pattern))
	if err != nil {
		return nil, fmt.Errorf("pgstore: %s: %w", what, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("pgstore: %s: %w", what, err)
		}
		if re.MatchString(name) {
			out = append(out, name)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: %s: %w", what, err)
	}
	slices.Sort(out) // byte order, whatever the database's collation
	return out, nil
}

// likePattern turns a driver.Glob pattern into a LIKE pattern with escape
// character '\': '*' is '%', '?' is '_', and every other character, '%' and
// '_' included, is itself.
func likePattern(glob string) string {
	var b strings.Builder
	escaped := false
	for _, r := range glob {
		switch {
		case escaped:
			escaped = false
			if r == '%' || r == '_' || r == '\\' {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		case r == '\\':
			escaped = true
		case r == '*':
			b.WriteByte('%')
		case r == '?':
			b.WriteByte('_')
		case r == '%' || r == '_':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ForceRelease implements [driver.Admin]: one statement that deletes every
// hold, place and mark on name, keeps its fencing counter, and wakes every
// waiter. Holders learn of it at their next renewal.
func (s *Store) ForceRelease(ctx context.Context, name string) (bool, error) {
	if err := s.ready(ctx); err != nil {
		return false, err
	}
	var deleted bool
	if err := s.pool.QueryRow(ctx, s.sql.force, name, s.channel).Scan(&deleted); err != nil {
		return false, fmt.Errorf("pgstore: force release %q: %w", name, explain(err))
	}
	return deleted, nil
}

// SetPermits implements [driver.PermitSetter]: one statement.
func (s *Store) SetPermits(ctx context.Context, name string, n int) error {
	if n < 0 || n > 1<<31-1 {
		return fmt.Errorf("pgstore: set permits of %q to %d: %w", name, n, errors.New("want 0 to 2147483647"))
	}
	if err := s.ready(ctx); err != nil {
		return err
	}
	var refused *string
	if err := s.pool.QueryRow(ctx, s.sql.setPermits, name, int32(n), s.channel).Scan(&refused); err != nil {
		return fmt.Errorf("pgstore: set permits of %q: %w", name, explain(err))
	}
	if refused != nil {
		return fmt.Errorf("pgstore: set permits: %w", &driver.NotALockError{Name: name, Found: *refused})
	}
	return nil
}
