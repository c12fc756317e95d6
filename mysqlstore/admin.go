package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leash-go/leash/driver"
)

// Inspect implements driver.Admin with one consistent (non-locking) read of
// the name's row.
func (s *Store) Inspect(ctx context.Context, name string) (driver.Info, error) {
	info := driver.Info{Name: name, Kind: driver.KindMutex, Remaining: -1, Waiters: -1}
	st, err := s.ready(ctx)
	if err != nil {
		return info, err
	}
	var (
		kind             int
		owner            string
		remaining, fence int64
	)
	err = st.inspect.QueryRowContext(ctx, []byte(name)).Scan(&kind, &owner, &remaining, &fence)
	if errors.Is(err, sql.ErrNoRows) {
		return info, nil
	}
	if err != nil {
		return info, fmt.Errorf("mysqlstore: inspect %q: %w", name, err)
	}
	if kind != 0 {
		return info, notALock(name, kind)
	}
	info.Fence = fence
	if owner != "" && remaining > 0 {
		info.Held = true
		info.Remaining = time.Duration(remaining) * time.Microsecond
		info.Owners = []driver.OwnerHolds{{Owner: owner, Holds: 1, Kind: driver.KindMutex, Remaining: -1}}
	}
	return info, nil
}

// List implements driver.Admin: the held locks whose names match pattern,
// read without locking. The pattern is narrowed with LIKE on the server and
// matched exactly (driver.Glob) here.
func (s *Store) List(ctx context.Context, pattern string) ([]string, error) {
	re, err := driver.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: list: %w", err)
	}
	if _, err := s.ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, "SELECT `name` FROM "+s.names.locks+
		" WHERE `kind` = 0 AND `owner` IS NOT NULL AND `expires_us` > "+now+" AND `name` LIKE ? ESCAPE '!' ORDER BY `name`",
		[]byte(likePattern(pattern)))
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: list: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name []byte
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("mysqlstore: list: %w", err)
		}
		if pattern == "" || re.Match(name) {
			out = append(out, string(name))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysqlstore: list: %w", err)
	}
	return out, nil
}

// likePattern turns a glob into a LIKE pattern (escape character '!') that
// matches every name the glob matches, and perhaps more: '?' becomes '%',
// since '_' matches one byte of a VARBINARY, not one character.
func likePattern(glob string) string {
	var b strings.Builder
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*', '?':
			b.WriteByte('%')
		case '\\':
			if i+1 < len(glob) {
				i++
				c = glob[i]
			}
			fallthrough
		default:
			if c == '%' || c == '_' || c == '!' {
				b.WriteByte('!')
			}
			b.WriteByte(c)
		}
	}
	if glob == "" {
		return "%"
	}
	return b.String()
}

// ForceRelease implements driver.Admin: one UPDATE frees the lock whoever
// holds it, keeping the row and its fencing counter, and this Store's
// waiters of the name are woken at once.
func (s *Store) ForceRelease(ctx context.Context, name string) (bool, error) {
	st, err := s.ready(ctx)
	if err != nil {
		return false, err
	}
	res, err := st.force.ExecContext(ctx, []byte(name))
	if err != nil {
		return false, fmt.Errorf("mysqlstore: force release %q: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("mysqlstore: force release %q: %w", name, err)
	}
	if n == 0 {
		if err := s.refusal(ctx, st, name); err != nil {
			return false, err
		}
		return false, nil
	}
	s.watch.released(name, driver.Wake{To: driver.WakeAll})
	return true, nil
}
