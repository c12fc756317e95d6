package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/leash-go/leash/driver"
)

// Holder roles in <table>_holders (see schema.sql): the lock kind each
// row is a part of.
const (
	rolePlace  = int(driver.KindFair)   // a fair queue place
	roleReader = int(driver.KindRead)   // an RWMutex reader
	roleMark   = int(driver.KindWrite)  // a waiting writer's mark
	rolePermit = int(driver.KindPermit) // a semaphore's permit
)

// inspectQuery reads a name's row, its live holder rows and the count of
// its waiting clients in one consistent (non-locking) statement: the count
// first (role -2), then the row (role -1).
func inspectQuery(n names) string {
	return "SELECT -2, COUNT(*), '', 0, 0, 0, 0 FROM " + n.waiters + " WHERE `name` = ? AND `expires_us` > " + now +
		" UNION ALL SELECT -1, `kind`, COALESCE(`owner`, ''), `write`, `expires_us` - " + now + ", `fence`, `permits` FROM " + n.locks + " WHERE `name` = ?" +
		" UNION ALL SELECT `role`, 0, `owner`, 0, `expires_us` - " + now + ", `fence`, 0 FROM " + n.holders +
		" WHERE `name` = ? AND `expires_us` > " + now + " ORDER BY 1, 3"
}

// listQuery finds the names that hold a live lock, lease, permit or place,
// narrowed by a LIKE pattern (escape character '!').
func listQuery(n names) string {
	return "SELECT l.`name` FROM " + n.locks + " l WHERE l.`name` LIKE ? ESCAPE '!' AND l.`kind` IN (0, 4) AND" +
		" (l.`owner` IS NOT NULL AND l.`expires_us` > " + now +
		" OR EXISTS (SELECT 1 FROM " + n.holders + " h WHERE h.`name` = l.`name` AND h.`expires_us` > " + now + "))" +
		" ORDER BY l.`name`"
}

// Inspect implements driver.Admin with one consistent (non-locking) read.
// Waiters counts the Stores that poll the name for waiters of theirs (see
// Watch).
func (s *Store) Inspect(ctx context.Context, name string) (driver.Info, error) {
	info := driver.Info{Name: name, Kind: driver.KindMutex, Remaining: -1}
	st, err := s.ready(ctx)
	if err != nil {
		return info, err
	}
	rows, err := st.inspect.QueryContext(ctx, []byte(name), []byte(name), []byte(name))
	if err != nil {
		return info, fmt.Errorf("mysqlstore: inspect %q: %w", name, err)
	}
	defer rows.Close()
	var readers bool
	for rows.Next() {
		var (
			role, kind, permits int
			write               bool
			owner               []byte
			remaining, fence    int64
		)
		if err := rows.Scan(&role, &kind, &owner, &write, &remaining, &fence, &permits); err != nil {
			return info, fmt.Errorf("mysqlstore: inspect %q: %w", name, err)
		}
		rem := time.Duration(remaining) * time.Microsecond
		switch role {
		case -2:
			info.Waiters = kind
		case -1:
			switch kind {
			case 0:
			case int(driver.KindPermit):
				info.Kind, info.Permits = driver.KindPermit, permits
			default:
				return info, refused(name, refusedSemaphore, kind)
			}
			info.Fence = fence
			if len(owner) > 0 && remaining > 0 {
				if write {
					info.Kind = driver.KindWrite
				}
				info.Owners = append(info.Owners, driver.OwnerHolds{Owner: string(owner), Holds: 1, Kind: info.Kind, Remaining: -1})
				info.Remaining = rem
			}
		case rolePlace, roleMark:
			info.Queued++
		case roleReader, rolePermit:
			info.Owners = append(info.Owners, driver.OwnerHolds{Owner: string(owner), Holds: 1, Kind: driver.Kind(role), Remaining: rem})
			info.Remaining = max(info.Remaining, rem)
			readers = readers || role == roleReader
		}
	}
	if err := rows.Err(); err != nil {
		return info, fmt.Errorf("mysqlstore: inspect %q: %w", name, err)
	}
	if readers && info.Kind == driver.KindMutex && len(info.Owners) > 0 && info.Owners[0].Kind == driver.KindRead {
		info.Kind = driver.KindRead
	}
	info.Held = len(info.Owners) > 0
	return info, nil
}

// List implements driver.Admin: the names that hold a lock, a lease, a
// permit or a waiting place, read without locking. The pattern is narrowed
// with LIKE on the server and matched exactly (driver.Glob) here.
func (s *Store) List(ctx context.Context, pattern string) ([]string, error) {
	return s.matching(ctx, "list", func(st *statements) *sql.Stmt { return st.list }, pattern)
}

// matching runs the statement stmt picks, of one LIKE parameter, that
// returns names, for pattern (a driver.Glob; "" matches every name), and
// checks each name again with driver.Glob; what names the operation in
// errors.
func (s *Store) matching(ctx context.Context, what string, stmt func(*statements) *sql.Stmt, pattern string) ([]string, error) {
	re, err := driver.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: %s: %w", what, err)
	}
	st, err := s.ready(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := stmt(st).QueryContext(ctx, []byte(likePattern(pattern)))
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: %s: %w", what, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name []byte
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("mysqlstore: %s: %w", what, err)
		}
		if pattern == "" || re.Match(name) {
			out = append(out, string(name))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysqlstore: %s: %w", what, err)
	}
	return out, nil
}

// likePattern turns a glob into a LIKE pattern (escape character '!') that
// matches every name the glob matches, and perhaps more: '?' becomes '%',
// since '_' matches one byte of a VARBINARY, not one character.
func likePattern(glob string) string {
	if glob == "" {
		return "%"
	}
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
	return b.String()
}

// ForceRelease implements driver.Admin: one CALL of <table>_force_release
// frees the name of every lock, lease, permit and place, keeping its row and
// fencing counter, and this Store's waiters of the name are woken at once.
func (s *Store) ForceRelease(ctx context.Context, name string) (bool, error) {
	st, err := s.ready(ctx)
	if err != nil {
		return false, err
	}
	var (
		freed bool
		kind  int
	)
	if err := st.force.QueryRowContext(ctx, []byte(name)).Scan(&freed, &kind); err != nil {
		return false, fmt.Errorf("mysqlstore: force release %q: %w", name, err)
	}
	if kind != 0 && kind != int(driver.KindPermit) {
		return false, refused(name, refusedSemaphore, kind)
	}
	if freed {
		all := driver.Wake{To: driver.WakeAll}
		s.watch.released(name, []note{{driver.KindMutex, all}, {driver.KindFair, all}, {driver.KindWrite, all}, {driver.KindPermit, all}})
	}
	return freed, nil
}
