package mysqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// SchemaVersion is the version of the schema this package uses, recorded in
// the <table>_schema table.
const SchemaVersion = 1

// Schema is the DDL of the schema, the text of schema.sql: the tables and
// procedures for the default table name, leash_locks, in the mysql client's
// syntax (DELIMITER lines around the procedures). Migrate applies it, with
// the names Options gives.
//
//go:embed schema.sql
var Schema string

// Errors about the schema. Each is returned, wrapped with the table's name,
// by every call of a Store whose schema is not ready.
var (
	// ErrNoSchema reports that the lock table does not exist: run
	// Store.Migrate, or apply schema.sql.
	ErrNoSchema = errors.New("mysqlstore: no leash schema")
	// ErrNotLeashTable reports a table of the lock table's name that is not
	// leash's (another application's): the Store neither reads nor writes
	// it, and Migrate creates nothing beside it.
	ErrNotLeashTable = errors.New("mysqlstore: table is not leash's")
	// ErrSchemaVersion reports a schema of another version than
	// SchemaVersion: an older one needs Migrate, a newer one a newer leash.
	ErrSchemaVersion = errors.New("mysqlstore: schema version mismatch")
	// ErrNotInnoDB reports a lock table whose engine is not InnoDB: the
	// store needs its row locks and transactions.
	ErrNotInnoDB = errors.New("mysqlstore: lock table is not InnoDB")
)

// names are the schema's identifiers for one Options.Database and Table,
// quoted for SQL.
type names struct {
	db        string // unquoted; "" means the connection's default database
	table     string // unquoted
	locks     string // quoted, qualified
	schema    string
	acquire   string
	acquireMn string
	renew     string
}

// identifierRef matches the identifiers of schema.sql that are named after
// the table.
var identifierRef = regexp.MustCompile("`leash_locks([a-z_]*)`")

// procedures are the suffixes of the procedures schema.sql creates.
var procedures = []string{"_acquire", "_acquire_many", "_renew"}

// maxTableLen keeps every derived identifier within MySQL's 64 characters.
const maxTableLen = 64 - len("_acquire_many")

// checkIdent reports whether s can name a database or table: 1 to max
// characters of UTF-8, no NUL, not ending in a space (MySQL's rules).
func checkIdent(what, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("mysqlstore: %s is empty", what)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return fmt.Errorf("mysqlstore: %s %q is not valid UTF-8 without NUL", what, s)
	case utf8.RuneCountInString(s) > max:
		return fmt.Errorf("mysqlstore: %s %q is longer than %d characters", what, s, max)
	case strings.HasSuffix(s, " "):
		return fmt.Errorf("mysqlstore: %s %q ends with a space, which MySQL does not allow", what, s)
	}
	return nil
}

// quoteIdent quotes an identifier with backticks, doubling any inside.
func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func newNames(db, table string) names {
	q := func(suffix string) string {
		if db == "" {
			return quoteIdent(table + suffix)
		}
		return quoteIdent(db) + "." + quoteIdent(table+suffix)
	}
	return names{
		db: db, table: table,
		locks: q(""), schema: q("_schema"),
		acquire: q("_acquire"), acquireMn: q("_acquire_many"), renew: q("_renew"),
	}
}

// schemaStatements returns the statements of schema.sql for these names,
// split as the mysql client splits them (honouring DELIMITER), without
// comments-only pieces.
func (n names) schemaStatements() []string {
	text := identifierRef.ReplaceAllStringFunc(Schema, func(ref string) string {
		suffix := identifierRef.FindStringSubmatch(ref)[1]
		return n.qualified(suffix)
	})
	return splitStatements(text)
}

func (n names) qualified(suffix string) string {
	switch suffix {
	case "":
		return n.locks
	case "_schema":
		return n.schema
	case "_acquire":
		return n.acquire
	case "_acquire_many":
		return n.acquireMn
	case "_renew":
		return n.renew
	}
	panic("mysqlstore: schema.sql names an unknown identifier suffix " + suffix)
}

// splitStatements splits a script into statements at its delimiter (";"
// until a DELIMITER line changes it), dropping comment lines outside
// statements.
func splitStatements(text string) []string {
	var (
		out   []string
		cur   strings.Builder
		delim = ";"
	)
	for line := range strings.SplitSeq(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if d, ok := strings.CutPrefix(trimmed, "DELIMITER "); ok && cur.Len() == 0 {
			delim = strings.TrimSpace(d)
			continue
		}
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "--")) {
			continue
		}
		if strings.HasSuffix(trimmed, delim) {
			cur.WriteString(strings.TrimSuffix(strings.TrimRight(line, " \t\r"), delim))
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// lockColumns and schemaColumns are the columns, in order, that make a
// table leash's.
var (
	lockColumns   = []string{"name", "kind", "owner", "expires_us", "fence", "acquired_us"}
	schemaColumns = []string{"app", "version"}
)

// schemaState is what the database holds under the Store's names.
type schemaState struct {
	database      string // the database the names live in
	locksEngine   string // "" when the lock table does not exist
	schemaEngine  string
	locksColumns  []string
	schemaColumns []string
	version       int // 0 when no leash row
	procedures    int // how many of the procedures exist
}

// readState reads the schema's state through q (a *sql.DB or *sql.Conn).
func (n names) readState(ctx context.Context, q querier) (schemaState, error) {
	var st schemaState
	var db sql.NullString
	if n.db != "" {
		db = sql.NullString{String: n.db, Valid: true}
	} else if err := q.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&db); err != nil {
		return st, err
	}
	if !db.Valid {
		return st, errors.New("mysqlstore: no database selected: name one in the DSN (/dbname) or in Options.Database")
	}
	st.database = db.String
	rows, err := q.QueryContext(ctx, "SELECT TABLE_NAME, COALESCE(ENGINE, '') FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN (?, ?)",
		st.database, n.table, n.table+"_schema")
	if err != nil {
		return st, err
	}
	for rows.Next() {
		var name, engine string
		if err := rows.Scan(&name, &engine); err != nil {
			rows.Close()
			return st, err
		}
		if name == n.table {
			st.locksEngine = engine
		} else {
			st.schemaEngine = engine
		}
	}
	if err := rows.Close(); err != nil {
		return st, err
	}
	rows, err = q.QueryContext(ctx, "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN (?, ?) ORDER BY TABLE_NAME, ORDINAL_POSITION",
		st.database, n.table, n.table+"_schema")
	if err != nil {
		return st, err
	}
	for rows.Next() {
		var table, col string
		if err := rows.Scan(&table, &col); err != nil {
			rows.Close()
			return st, err
		}
		if table == n.table {
			st.locksColumns = append(st.locksColumns, strings.ToLower(col))
		} else {
			st.schemaColumns = append(st.schemaColumns, strings.ToLower(col))
		}
	}
	if err := rows.Close(); err != nil {
		return st, err
	}
	if st.schemaEngine != "" && slices.Equal(st.schemaColumns, schemaColumns) {
		err := q.QueryRowContext(ctx, "SELECT `version` FROM "+n.schema+" WHERE `app` = 'leash'").Scan(&st.version)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return st, err
		}
	}
	procs := make([]any, 0, len(procedures)+1)
	procs = append(procs, st.database)
	for _, p := range procedures {
		procs = append(procs, n.table+p)
	}
	err = q.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ? AND ROUTINE_TYPE = 'PROCEDURE' AND ROUTINE_NAME IN (?, ?, ?)", procs...).Scan(&st.procedures)
	return st, err
}

// usable reports why the schema cannot be used as it is, or nil.
func (n names) usable(st schemaState) error {
	where := fmt.Sprintf("%s.%s", st.database, n.table)
	switch {
	case st.locksEngine == "" && st.schemaEngine == "":
		return fmt.Errorf("%w: table %s does not exist (run Store.Migrate, or apply schema.sql)", ErrNoSchema, where)
	case st.locksEngine != "" && !slices.Equal(st.locksColumns, lockColumns),
		st.schemaEngine != "" && !slices.Equal(st.schemaColumns, schemaColumns):
		return fmt.Errorf("%w: %s (or %s_schema) has columns %v / %v, not leash's %v / %v; leash leaves it untouched (choose another Options.Table)",
			ErrNotLeashTable, where, n.table, st.locksColumns, st.schemaColumns, lockColumns, schemaColumns)
	case st.locksEngine != "" && st.version == 0:
		return fmt.Errorf("%w: %s exists but %s_schema marks no leash schema; leash leaves it untouched (choose another Options.Table)",
			ErrNotLeashTable, where, n.table)
	case st.locksEngine == "":
		return fmt.Errorf("%w: table %s does not exist (run Store.Migrate, or apply schema.sql)", ErrNoSchema, where)
	case !strings.EqualFold(st.locksEngine, "InnoDB"):
		return fmt.Errorf("%w: %s uses %s", ErrNotInnoDB, where, st.locksEngine)
	case st.version != SchemaVersion:
		return fmt.Errorf("%w: %s has schema version %d, this leash uses %d (an older schema: run Store.Migrate; a newer one: upgrade leash)",
			ErrSchemaVersion, where, st.version, SchemaVersion)
	case st.procedures != len(procedures):
		return fmt.Errorf("%w: %s lacks %d of its %d procedures (run Store.Migrate, or apply schema.sql)",
			ErrNoSchema, where, len(procedures)-st.procedures, len(procedures))
	}
	return nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// migrateSQLMode is the sql_mode Migrate creates the procedures under: a
// procedure runs with the sql_mode it was created with, so no session
// setting of the user's changes what it does.
const migrateSQLMode = "STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION"

// Migrate creates the schema (schema.sql, with the names Options gives) if it
// does not exist, or brings an older version of it to SchemaVersion, and
// does nothing when it is current. It refuses, creating nothing, a table of
// the lock table's name that is not leash's (ErrNotLeashTable) and a schema
// newer than this package's (ErrSchemaVersion). Concurrent Migrates, from
// any process, take turns (GET_LOCK). It needs the privileges CREATE, DROP
// and INSERT on the database, and CREATE ROUTINE and ALTER ROUTINE; the
// Store then needs SELECT, INSERT and UPDATE on the two tables and EXECUTE
// on the procedures.
func (s *Store) Migrate(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mysqlstore: migrate: %w", err)
	}
	defer conn.Close()
	sum := sha256.Sum256([]byte(s.names.db + "\x00" + s.names.table))
	lockName := "leash-migrate-" + hex.EncodeToString(sum[:16])
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 60)", lockName).Scan(&got); err != nil {
		return fmt.Errorf("mysqlstore: migrate: %w", err)
	}
	if got.Int64 != 1 {
		return fmt.Errorf("mysqlstore: migrate: another Migrate of %s held the migration lock for 60s", s.names.table)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", lockName) //nolint:errcheck // the lock ends with the session anyway
	st, err := s.names.readState(ctx, conn)
	if err != nil {
		return fmt.Errorf("mysqlstore: migrate: %w", err)
	}
	err = s.names.usable(st)
	switch {
	case err == nil:
		s.markReady()
		return nil
	case errors.Is(err, ErrNotLeashTable), errors.Is(err, ErrNotInnoDB):
		return err
	case errors.Is(err, ErrSchemaVersion) && st.version > SchemaVersion:
		return err
	}
	var mode string
	if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		return fmt.Errorf("mysqlstore: migrate: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = '"+migrateSQLMode+"'"); err != nil {
		return fmt.Errorf("mysqlstore: migrate: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION sql_mode = ?", mode) //nolint:errcheck // best effort: the connection goes back to the pool
	for _, stmt := range s.names.schemaStatements() {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("mysqlstore: migrate: %w (in %.60q…)", err, stmt)
		}
	}
	if st, err = s.names.readState(ctx, conn); err != nil {
		return fmt.Errorf("mysqlstore: migrate: %w", err)
	}
	if err := s.names.usable(st); err != nil {
		return fmt.Errorf("mysqlstore: migrate: after applying schema.sql: %w", err)
	}
	s.markReady()
	return nil
}
