package pgstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// SchemaVersion is the version of the tables and functions this package
// uses, recorded in the Table+"_version" table. Version 2 added the
// scheduled jobs' tables and functions (Table+"_jobs", Table+"_runs");
// Migrate brings version-1 tables to it.
const SchemaVersion = 2

// v2Marker starts the part of schema.sql that version 2 added, which
// Migrate runs on version-1 tables.
const v2Marker = "-- ---- Schema version 2:"

// schemaSQL is the DDL for the default names, which DDL and Migrate rewrite
// for the Store's.
//
//go:embed schema.sql
var schemaSQL string

// ErrSchema reports that the store's tables are missing, are not leash's, or
// have another schema version. Nothing was written. The error says which
// and what to do.
var ErrSchema = errors.New("pgstore: the lock tables are not ready")

// schemaError is an ErrSchema with what is wrong.
type schemaError struct{ msg string }

func (e *schemaError) Error() string        { return "pgstore: " + e.msg }
func (e *schemaError) Is(target error) bool { return target == ErrSchema }

// defaultNameRE matches the names in schema.sql, each a table or function in
// schema public whose name starts with leash_locks.
var defaultNameRE = regexp.MustCompile(`public\.leash_locks(_[a-z_]+)?\b`)

// DDL returns the statements that create the store's tables and functions
// in schema, named after table (see Options): schema.sql, shipped with the
// package, with its names replaced. Migrate runs it; a DBA who creates the
// tables by hand runs its output, as the owner of the tables, for example
// with psql. The output is for a schema that does not hold the tables yet.
// schema and table must be names New accepts (see Options): for any other,
// DDL returns an error matching ErrBadName, since the names are written into
// the functions' $$-quoted bodies.
func DDL(schema, table string) (string, error) {
	if err := checkNames(schema, table); err != nil {
		return "", err
	}
	out := defaultNameRE.ReplaceAllStringFunc(schemaSQL, func(m string) string {
		return ident(schema, table+strings.TrimPrefix(m, "public.leash_locks"))
	})
	if schema != DefaultSchema {
		out = "CREATE SCHEMA IF NOT EXISTS " + pgx.Identifier{schema}.Sanitize() + ";\n\n" + out
	}
	return out, nil
}

// expectedColumns are the columns of each table, as format_type gives them.
var expectedColumns = map[string]string{
	"":         "name text, kind text, fence bigint, permits integer",
	"_holds":   "name text, role text, owner text, expires timestamp with time zone, fence bigint, seq bigint",
	"_clients": "id text, record jsonb, expires timestamp with time zone",
	"_version": "version integer",
	"_jobs":    "name text, tick bigint, attempt integer, outcome text, client text, spec text, seq bigint",
	"_runs": "name text, seq bigint, tick bigint, attempt integer, host text, pid integer, client text, claim text, " +
		"started timestamp with time zone, ended timestamp with time zone, outcome text, fence bigint, error text",
}

// tableSuffixes lists the tables by the suffix of their names, the lock
// table ("") first; the version-1 tables are the first four.
var tableSuffixes = [...]string{"", "_holds", "_clients", "_version", "_jobs", "_runs"}

// v1Tables is how many of tableSuffixes schema version 1 has.
const v1Tables = 4

// schemaState is what Check found.
type schemaState int

const (
	schemaReady   schemaState = iota // every table is leash's, at SchemaVersion
	schemaMissing                    // none of the tables exists
	schemaV1                         // leash's tables at version 1, which Migrate brings to 2
)

// queryer runs a query: a pool or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Check verifies that the store's tables exist, are leash's (the version
// table is there and every table has the columns leash gives it) and have
// the schema version this package uses. Its error matches ErrSchema and
// says what to do; a table that is not leash's is never written to. Every
// method of the Store checks this once, before its first statement.
func (s *Store) Check(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	state, err := s.schemaState(ctx, s.pool)
	if err != nil {
		return err
	}
	if state == schemaV1 {
		return &schemaError{fmt.Sprintf("the tables of %s have schema version 1; this pgstore uses version %d: bring them to it with pgstore's Store.Migrate (it adds the scheduled jobs' tables and functions, in one transaction, and changes nothing else)",
			s.sql.table, SchemaVersion)}
	}
	if state == schemaMissing {
		return &schemaError{fmt.Sprintf("table %s does not exist: create the tables with pgstore's Store.Migrate, or run the DDL of pgstore.DDL(%q, %q) (the package's schema.sql) as their owner",
			s.sql.table, s.opts.Schema, s.opts.Table)}
	}
	s.checked.Store(true)
	return nil
}

// schemaState reports whether the tables are all there and leash's, or all
// missing; anything else is an error.
func (s *Store) schemaState(ctx context.Context, q queryer) (schemaState, error) {
	names := make([]string, len(tableSuffixes))
	for i, suf := range tableSuffixes {
		names[i] = ident(s.opts.Schema, s.opts.Table+suf)
	}
	rows, err := q.Query(ctx, `
		SELECT n.i::int, string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
		FROM unnest($1::text[]) WITH ORDINALITY AS n(name, i)
		JOIN pg_attribute a ON a.attrelid = to_regclass(n.name) AND a.attnum > 0 AND NOT a.attisdropped
		GROUP BY n.i`, names)
	if err != nil {
		return 0, fmt.Errorf("pgstore: check the tables: %w", err)
	}
	found := map[string]string{} // suffix -> columns
	for rows.Next() {
		var i int
		var cols string
		if err := rows.Scan(&i, &cols); err != nil {
			rows.Close()
			return 0, fmt.Errorf("pgstore: check the tables: %w", err)
		}
		found[tableSuffixes[i-1]] = cols
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("pgstore: check the tables: %w", err)
	}
	if len(found) == 0 {
		return schemaMissing, nil
	}
	if _, ok := found["_version"]; !ok {
		var some string
		for _, suf := range tableSuffixes {
			if _, ok := found[suf]; ok {
				some = ident(s.opts.Schema, s.opts.Table+suf)
				break
			}
		}
		return 0, &schemaError{fmt.Sprintf("table %s exists but is not leash's (there is no %s table marking leash's tables): leash will not touch it; choose another table with Options.Table (or the URL's leash_table)",
			some, ident(s.opts.Schema, s.opts.Table+"_version"))}
	}
	if cols := found["_version"]; cols != expectedColumns["_version"] {
		return 0, &schemaError{fmt.Sprintf("table %s has columns (%s), not leash's (%s): leash will not touch it", s.sql.version, cols, expectedColumns["_version"])}
	}
	var version int
	err = q.QueryRow(ctx, "SELECT version FROM "+s.sql.version).Scan(&version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, &schemaError{fmt.Sprintf("table %s has no version row: the schema is incomplete", s.sql.version)}
	case err != nil:
		return 0, fmt.Errorf("pgstore: check the tables: %w", err)
	case version != SchemaVersion && version != 1:
		return 0, &schemaError{fmt.Sprintf("the tables have schema version %d; this pgstore uses version %d: use a pgstore release made for version %d", version, SchemaVersion, version)}
	}
	want := len(tableSuffixes)
	if version == 1 {
		want = v1Tables
	}
	for i, suf := range tableSuffixes {
		cols, ok := found[suf]
		name := ident(s.opts.Schema, s.opts.Table+suf)
		switch {
		case i >= want && ok:
			return 0, &schemaError{fmt.Sprintf("table %s exists but is not leash's (leash's tables are at schema version 1, which has no such table): leash will not touch it; drop or rename it, or choose another table with Options.Table (or the URL's leash_table)", name)}
		case i >= want:
		case !ok:
			return 0, &schemaError{fmt.Sprintf("table %s is missing beside %s: the schema is incomplete; recreate it with Migrate after dropping leash's tables, or restore it", name, ident(s.opts.Schema, s.opts.Table+"_version"))}
		case cols != expectedColumns[suf]:
			return 0, &schemaError{fmt.Sprintf("table %s has columns (%s), not leash's (%s): leash will not touch it", name, cols, expectedColumns[suf])}
		}
	}
	if version == 1 {
		return schemaV1, nil
	}
	return schemaReady, nil
}

// Migrate creates the store's tables and functions (the DDL of DDL) when
// none of them exists, or brings leash's tables at schema version 1 to
// version 2 (it creates the scheduled jobs' tables and functions, the part
// of schema.sql after its "Schema version 2" line, and sets the version),
// in one transaction, and checks them as Check does.
// It is safe to call at every start and from several processes at once:
// tables already at SchemaVersion are left as they are. It refuses, and
// changes nothing, when a table of one of the store's names exists but is
// not leash's. The user needs the right to create tables and functions in
// the schema (and the schema, if it does not exist).
func (s *Store) Migrate(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// Serialise concurrent migrations of the same tables.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "leash migrate "+s.channel); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	state, err := s.schemaState(ctx, tx)
	if err != nil {
		return err
	}
	if state == schemaMissing {
		ddl, err := DDL(s.opts.Schema, s.opts.Table)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, ddl, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("pgstore: migrate: create the tables: %w", err)
		}
	}
	if state == schemaV1 {
		ddl, err := DDL(s.opts.Schema, s.opts.Table)
		if err != nil {
			return err
		}
		_, v2, ok := strings.Cut(ddl, v2Marker)
		if !ok {
			return fmt.Errorf("pgstore: migrate: schema.sql has no %q line", v2Marker)
		}
		v2 = "UPDATE " + s.sql.version + " SET version = 2;\n" + v2Marker + v2
		if _, err := tx.Exec(ctx, v2, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("pgstore: migrate: from schema version 1 to 2: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	s.checked.Store(true)
	return nil
}

// ready checks the schema before the store's first statement (see Check).
func (s *Store) ready(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	if s.checked.Load() {
		return nil
	}
	return s.Check(ctx)
}

// statements are the store's SQL, with its table and function names.
type statements struct {
	table, holds, clients, version, jobs string // quoted names

	acquire, acquireMany, renew, release, withdraw, force, setPermits string
	inspect, list, putClient, getClient, deleteClient                 string
	claimTick, endRun, addRuns, jobHistory, jobList                   string
}

func newStatements(schema, table string) statements {
	name := func(suffix string) string { return ident(schema, table+suffix) }
	st := statements{table: name(""), holds: name("_holds"), clients: name("_clients"), version: name("_version")}
	st.acquire = "SELECT acquired, fence, remaining, refused FROM " + name("_acquire") + "($1, $2, $3, $4, $5, $6, $7)"
	st.acquireMany = "SELECT acquired, fences, remaining, refused FROM " + name("_acquire_many") + "($1, $2, $3)"
	st.renew = "SELECT i, status FROM " + name("_renew") + "($1, $2, $3, $4)"
	st.release = "SELECT released, refused FROM " + name("_release") + "($1, $2, $3, $4)"
	st.withdraw = "SELECT " + name("_withdraw") + "($1, $2, $3)"
	st.force = "SELECT deleted FROM " + name("_force") + "($1, $2)"
	st.setPermits = "SELECT refused FROM " + name("_set_permits") + "($1, $2, $3)"
	st.inspect = `WITH t AS MATERIALIZED (SELECT clock_timestamp() AS now)
		SELECT l.kind, l.fence, l.permits, h.role, h.owner, (extract(epoch FROM h.expires - t.now) * 1000000)::bigint
		FROM t CROSS JOIN ` + st.table + ` l
		LEFT JOIN ` + st.holds + ` h ON h.name = l.name AND h.expires > t.now
		WHERE l.name = $1`
	st.list = `SELECT DISTINCT name FROM ` + st.holds + `
		WHERE role IN ('x', 'w', 'r', 'p') AND expires > clock_timestamp() AND name LIKE $1 ESCAPE '\'`
	// A put also deletes up to ten records that expired long ago (their
	// clients died without deleting them), skipping rows others are
	// writing: records of dead clients do not pile up, and no one waits.
	st.putClient = `WITH gone AS (
			DELETE FROM ` + st.clients + ` WHERE id IN (
				SELECT id FROM ` + st.clients + ` WHERE expires < clock_timestamp() - interval '1 hour' AND id <> $1
				LIMIT 10 FOR UPDATE SKIP LOCKED))
		INSERT INTO ` + st.clients + ` (id, record, expires) VALUES ($1, $2, clock_timestamp() + $3 * interval '1 microsecond')
		ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record, expires = EXCLUDED.expires`
	st.jobs = name("_jobs")
	st.claimTick = "SELECT * FROM " + name("_claim_tick") + "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
	st.endRun = "SELECT o_updated FROM " + name("_end_run") + "($1, $2, $3, $4, $5, $6, $7)"
	st.addRuns = "SELECT " + name("_add_runs") + "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
	st.jobHistory = "SELECT * FROM " + name("_job_history") + "($1, $2)"
	st.jobList = "SELECT name FROM " + st.jobs + ` WHERE name LIKE $1 ESCAPE '\'`
	st.getClient = "SELECT record FROM " + st.clients + " WHERE id = $1 AND expires > clock_timestamp()"
	st.deleteClient = "DELETE FROM " + st.clients + " WHERE id = $1"
	return st
}
