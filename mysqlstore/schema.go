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
// the <table>_schema table. Version 2 added the scheduled jobs' tables
// (<table>_jobs, <table>_runs) and procedures; Migrate brings a version-1
// schema to it.
const SchemaVersion = 2

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
	// ErrNotLeashProcedure reports a stored procedure of one of the names
	// leash's procedures take (<Table>_acquire, …) that is not leash's (its
	// comment is not leash's): the Store never calls it, and Migrate
	// neither drops nor replaces it, nor creates anything.
	ErrNotLeashProcedure = errors.New("mysqlstore: stored procedure is not leash's")
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
	db    string // unquoted; "" means the connection's default database
	table string // unquoted
	// locks, holders, clients, waiters and schema are the tables, quoted
	// and qualified.
	locks, holders, clients, waiters, schema string
}

// identifierRef matches the identifiers of schema.sql that are named after
// the table.
var identifierRef = regexp.MustCompile("`leash_locks([a-z_]*)`")

// procedures are the suffixes of the procedures schema.sql creates.
var procedures = []string{
	"_open", "_acquire", "_release", "_withdraw", "_set_permits", "_force_release",
	"_acquire_many", "_renew", "_put_client", "_waiting",
	"_job_held", "_claim_tick", "_end_run", "_add_runs", "_job_history",
}

// maxTableLen keeps every derived identifier within MySQL's 64 characters.
const maxTableLen = 64 - len("_force_release")

// ErrBadIdent reports an Options.Table or Options.Database (or a URL's
// leash_table) that leash does not accept; the error says why.
var ErrBadIdent = errors.New("mysqlstore: bad table or database name")

// checkIdent reports whether s can name a database or table: 1 to max
// characters of UTF-8, no NUL, not ending in a space (MySQL's rules), and no
// line break (Migrate splits schema.sql into statements at line ends, as
// the mysql client does). The error matches ErrBadIdent.
func checkIdent(what, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrBadIdent, what)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return fmt.Errorf("%w: %s %q is not valid UTF-8 without NUL", ErrBadIdent, what, s)
	case utf8.RuneCountInString(s) > max:
		return fmt.Errorf("%w: %s %q is longer than %d characters", ErrBadIdent, what, s, max)
	case strings.HasSuffix(s, " "):
		return fmt.Errorf("%w: %s %q ends with a space, which MySQL does not allow", ErrBadIdent, what, s)
	case strings.ContainsAny(s, "\n\r"):
		return fmt.Errorf("%w: %s %q holds a line break", ErrBadIdent, what, s)
	}
	return nil
}

// checkTable is checkIdent for the table name, which must also have no
// upper-case letter: a server with lower_case_table_names=1 (the default on
// Windows and macOS) stores table names lower-cased, and the Store finds its
// tables by exact name.
func checkTable(what, s string) error {
	if err := checkIdent(what, s, maxTableLen); err != nil {
		return err
	}
	if strings.ToLower(s) != s {
		return fmt.Errorf("%w: %s %q has upper-case letters; use %q (servers with lower_case_table_names=1 lower-case table names)",
			ErrBadIdent, what, s, strings.ToLower(s))
	}
	return nil
}

// quoteIdent quotes an identifier with backticks, doubling any inside.
func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func newNames(db, table string) names {
	n := names{db: db, table: table}
	n.locks, n.holders, n.clients, n.waiters, n.schema = n.qualified(""), n.qualified("_holders"), n.qualified("_clients"),
		n.qualified("_waiters"), n.qualified("_schema")
	return n
}

// qualified is the quoted, qualified name of the table or procedure with
// suffix.
func (n names) qualified(suffix string) string {
	if n.db == "" {
		return quoteIdent(n.table + suffix)
	}
	return quoteIdent(n.db) + "." + quoteIdent(n.table+suffix)
}

// schemaStatements returns the statements of schema.sql for these names,
// split as the mysql client splits them (honouring DELIMITER), without
// comments-only pieces.
func (n names) schemaStatements() []string {
	text := identifierRef.ReplaceAllStringFunc(Schema, func(ref string) string {
		return n.qualified(identifierRef.FindStringSubmatch(ref)[1])
	})
	return splitStatements(text)
}

// dropsOther reports whether stmt is schema.sql's DROP PROCEDURE of a
// procedure that st did not find to be leash's: Migrate skips it, so that
// a procedure another application creates between the state's reading and
// the DDL is never dropped. (MySQL's DDL is not transactional, and
// GET_LOCK only keeps other Migrates out.)
func (n names) dropsOther(stmt string, st schemaState) bool {
	for _, p := range procedures {
		if stmt == "DROP PROCEDURE IF EXISTS "+n.qualified(p) {
			return !st.ours[n.table+p]
		}
	}
	return false
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

// tables are the schema's tables, by suffix to the table name, and the
// columns, in order, that make each leash's.
var tables = []struct {
	suffix  string
	columns []string
}{
	{"", []string{"name", "kind", "owner", "write", "expires_us", "owner_fence", "fence", "permits"}},
	{"_holders", []string{"name", "owner", "role", "expires_us", "fence"}},
	{"_clients", []string{"id", "record", "expires_us"}},
	{"_waiters", []string{"name", "store", "expires_us"}},
	{"_jobs", []string{"name", "tick", "attempt", "outcome", "client", "spec", "seq"}},
	{"_runs", []string{"name", "seq", "tick", "attempt", "host", "pid", "client", "claim", "started_ms", "ended_ms", "outcome", "fence", "error"}},
	{"_schema", []string{"app", "version"}},
}

// schemaState is what the database holds under the Store's names.
type schemaState struct {
	database   string            // the database the names live in
	engines    map[string]string // by table suffix; absent when the table does not exist
	columns    map[string][]string
	version    int             // 0 when no leash row
	procedures int             // how many of leash's procedures exist
	ours       map[string]bool // leash's procedures that exist, by name
	foreign    []string        // procedures of leash's names that are not leash's
	autocommit bool
}

// readState reads the schema's state through q (a *sql.DB or *sql.Conn).
func (n names) readState(ctx context.Context, q querier) (schemaState, error) {
	st := schemaState{engines: map[string]string{}, columns: map[string][]string{}, ours: map[string]bool{}}
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
	if err := q.QueryRowContext(ctx, "SELECT @@SESSION.autocommit").Scan(&st.autocommit); err != nil {
		return st, err
	}
	args := []any{st.database}
	bySuffix := map[string]string{}
	for _, t := range tables {
		args = append(args, n.table+t.suffix)
		bySuffix[n.table+t.suffix] = t.suffix
	}
	rows, err := q.QueryContext(ctx, "SELECT t.TABLE_NAME, COALESCE(t.ENGINE, ''), c.COLUMN_NAME FROM information_schema.TABLES t"+
		" LEFT JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME"+
		" WHERE t.TABLE_SCHEMA = ? AND t.TABLE_NAME IN (?"+strings.Repeat(", ?", len(tables)-1)+") ORDER BY t.TABLE_NAME, c.ORDINAL_POSITION", args...)
	if err != nil {
		return st, err
	}
	for rows.Next() {
		var table, engine string
		var col sql.NullString
		if err := rows.Scan(&table, &engine, &col); err != nil {
			rows.Close()
			return st, err
		}
		suffix := bySuffix[table]
		st.engines[suffix] = engine
		if col.Valid {
			st.columns[suffix] = append(st.columns[suffix], strings.ToLower(col.String))
		}
	}
	if err := rows.Close(); err != nil {
		return st, err
	}
	if _, ok := st.engines["_schema"]; ok && slices.Equal(st.columns["_schema"], tables[len(tables)-1].columns) {
		err := q.QueryRowContext(ctx, "SELECT `version` FROM "+n.schema+" WHERE `app` = 'leash'").Scan(&st.version)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return st, err
		}
	}
	procs := []any{st.database}
	for _, p := range procedures {
		procs = append(procs, n.table+p)
	}
	rows, err = q.QueryContext(ctx, "SELECT ROUTINE_NAME, ROUTINE_COMMENT FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ? AND ROUTINE_TYPE = 'PROCEDURE' AND ROUTINE_NAME IN (?"+
		strings.Repeat(", ?", len(procedures)-1)+") ORDER BY ROUTINE_NAME", procs...)
	if err != nil {
		return st, err
	}
	for rows.Next() {
		var name, comment string
		if err := rows.Scan(&name, &comment); err != nil {
			rows.Close()
			return st, err
		}
		if isLeashComment(comment) {
			st.procedures++
			st.ours[name] = true
		} else {
			st.foreign = append(st.foreign, name)
		}
	}
	return st, rows.Close()
}

// isLeashComment reports whether a procedure's comment is one schema.sql
// gives its procedures: 'leash: … (github.com/leash-go/leash/mysqlstore)'.
func isLeashComment(c string) bool {
	return strings.HasPrefix(c, "leash: ") && strings.HasSuffix(c, " (github.com/leash-go/leash/mysqlstore)")
}

// ErrNoAutocommit reports a session with autocommit off (the DSN's
// autocommit=0): the Store's single statements would be left open in a
// transaction, holding their snapshots or locks.
var ErrNoAutocommit = errors.New("mysqlstore: the session runs with autocommit off; leash needs autocommit on (remove autocommit=0 from the DSN)")

// usable reports why the schema cannot be used as it is, or nil.
func (n names) usable(st schemaState) error {
	if !st.autocommit {
		return ErrNoAutocommit
	}
	where := fmt.Sprintf("%s.%s", st.database, n.table)
	if len(st.foreign) > 0 {
		return fmt.Errorf("%w: procedure %s.%s exists without leash's comment; leash leaves it untouched (drop or rename it, or choose another Options.Table)",
			ErrNotLeashProcedure, st.database, strings.Join(st.foreign, ", "))
	}
	if len(st.engines) == 0 {
		return fmt.Errorf("%w: table %s does not exist (run Store.Migrate, or apply schema.sql)", ErrNoSchema, where)
	}
	for _, t := range tables {
		if _, ok := st.engines[t.suffix]; ok && !slices.Equal(st.columns[t.suffix], t.columns) {
			return fmt.Errorf("%w: table %s%s has columns %v, not leash's %v; leash leaves it untouched (choose another Options.Table)",
				ErrNotLeashTable, where, t.suffix, st.columns[t.suffix], t.columns)
		}
	}
	if st.version == 0 {
		for _, t := range tables {
			if _, ok := st.engines[t.suffix]; ok && t.suffix != "_schema" {
				return fmt.Errorf("%w: table %s%s exists but %s_schema marks no leash schema; leash leaves it untouched (choose another Options.Table)",
					ErrNotLeashTable, where, t.suffix, n.table)
			}
		}
	}
	for _, t := range tables {
		if engine, ok := st.engines[t.suffix]; ok && !strings.EqualFold(engine, "InnoDB") {
			return fmt.Errorf("%w: %s%s uses %s", ErrNotInnoDB, where, t.suffix, engine)
		}
	}
	if st.version != 0 && st.version != SchemaVersion {
		return fmt.Errorf("%w: %s has schema version %d, this leash uses %d (an older schema: run Store.Migrate; a newer one: upgrade leash)",
			ErrSchemaVersion, where, st.version, SchemaVersion)
	}
	for _, t := range tables {
		if _, ok := st.engines[t.suffix]; !ok {
			return fmt.Errorf("%w: table %s%s does not exist (run Store.Migrate, or apply schema.sql)", ErrNoSchema, where, t.suffix)
		}
	}
	switch {
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
// the lock table's name that is not leash's (ErrNotLeashTable), a stored
// procedure of one of leash's procedures' names that is not leash's
// (ErrNotLeashProcedure: leash's carry a comment 'leash: …
// (github.com/leash-go/leash/mysqlstore)') and a schema
// newer than this package's (ErrSchemaVersion). It replaces only procedures
// it found to be leash's: one that another application creates while
// Migrate runs makes it fail, and is left as it is. Concurrent Migrates, from
// any process, take turns (GET_LOCK). See the package doc for the
// privileges it needs.
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
	if s.migrateRead != nil {
		s.migrateRead()
	}
	err = s.names.usable(st)
	switch {
	case err == nil:
		s.markReady()
		return nil
	case errors.Is(err, ErrNotLeashTable), errors.Is(err, ErrNotLeashProcedure), errors.Is(err, ErrNotInnoDB), errors.Is(err, ErrNoAutocommit):
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
		if s.names.dropsOther(stmt, st) {
			// The procedure did not exist when the state was read:
			// CREATE PROCEDURE alone fails, destroying nothing, if
			// another application created one of this name since.
			continue
		}
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
