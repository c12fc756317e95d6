package pgstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leash-go/leash/driver"
)

// Defaults for Options.
const (
	// DefaultSchema is the PostgreSQL schema of the tables.
	DefaultSchema = "public"
	// DefaultTable is the name of the lock table; the other tables and the
	// functions are named after it (leash_locks_holds, …).
	DefaultTable = "leash_locks"
	// DefaultBatchSize is how many locks one renewal statement renews.
	DefaultBatchSize = 1000
	// MaxBatchSize is the largest BatchSize accepted.
	MaxBatchSize = 10000
	// DefaultListenTimeout bounds Watch's wait for the listening connection.
	DefaultListenTimeout = 5 * time.Second
	// DefaultHealthCheck is how often the idle listening connection is
	// checked.
	DefaultHealthCheck = 2 * time.Second
	// MaxTableLen is the longest Options.Table accepted, in bytes: the
	// longest name derived from it (Table+"_acquire_many") must fit
	// PostgreSQL's 63-byte identifiers.
	MaxTableLen = 50
)

// Options configures a Store. A nil *Options means all defaults; a zero
// field means that field's default.
type Options struct {
	// Schema is the PostgreSQL schema that holds the tables: a letter or
	// '_', then letters, digits and '_' (ErrBadName otherwise), at most 63
	// bytes. Default DefaultSchema ("public").
	Schema string
	// Table is the name of the lock table; the store's other tables and
	// functions are named after it (Table+"_holds", Table+"_acquire", …).
	// Like Schema, a letter or '_', then letters, digits and '_', and at
	// most MaxTableLen bytes. Default DefaultTable ("leash_locks").
	Table string
	// BatchSize is how many locks one renewal statement renews. Default
	// DefaultBatchSize (1000); at most MaxBatchSize.
	BatchSize int
	// ListenTimeout bounds how long Watch waits for the listening
	// connection to be up and LISTENing; when it passes, the waiting Lock
	// falls back to trying again at the holder's remaining lease. Default
	// DefaultListenTimeout (5s).
	ListenTimeout time.Duration
	// HealthCheck is how often the listening connection is checked when no
	// notification arrives; one that does not answer within HealthCheck is
	// replaced, and every waiter woken. Default DefaultHealthCheck (2s).
	HealthCheck time.Duration
}

// Store is a PostgreSQL lock store. Create it with New; it is safe for
// concurrent use. A Store belongs to one leash.Client, which closes it (its
// listening connection, not the pool you passed) on Close.
type Store struct {
	pool *pgxpool.Pool
	opts Options
	err  error // construction error, reported by Validate and every call

	// channel is the NOTIFY channel of the store's tables.
	channel string
	// sql holds the statements, with the store's table and function names.
	sql statements

	// checked is set once the schema has been checked and found right.
	checked atomic.Bool

	notify notifier
}

var (
	_ driver.Store          = (*Store)(nil)
	_ driver.Watcher        = (*Store)(nil)
	_ driver.KindStore      = (*Store)(nil)
	_ driver.Withdrawer     = (*Store)(nil)
	_ driver.PermitSetter   = (*Store)(nil)
	_ driver.MultiStore     = (*Store)(nil)
	_ driver.Admin          = (*Store)(nil)
	_ driver.ClientRecorder = (*Store)(nil)
	_ driver.Validator      = (*Store)(nil)
)

// New returns a Store on pool, whose tables are in opts.Schema, named after
// opts.Table. It makes no network call: a nil pool and bad options are
// reported by Validate, which leash.New calls; the schema is checked on first
// use (see Check), and created by Migrate.
func New(pool *pgxpool.Pool, opts *Options) *Store {
	s := &Store{pool: pool}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Schema == "" {
		s.opts.Schema = DefaultSchema
	}
	if s.opts.Table == "" {
		s.opts.Table = DefaultTable
	}
	switch {
	case pool == nil:
		s.err = errors.New("pgstore: New: the pool is nil; pass one from pgxpool.New(ctx, \"postgres://user@host/db\")")
	case checkNames(s.opts.Schema, s.opts.Table) != nil:
		s.err = checkNames(s.opts.Schema, s.opts.Table)
	case s.opts.BatchSize < 0 || s.opts.BatchSize > MaxBatchSize:
		s.err = fmt.Errorf("pgstore: Options.BatchSize = %d: must be between 1 and %d (zero means %d)", s.opts.BatchSize, MaxBatchSize, DefaultBatchSize)
	case s.opts.ListenTimeout < 0:
		s.err = fmt.Errorf("pgstore: Options.ListenTimeout = %v: must be positive (zero means %v)", s.opts.ListenTimeout, DefaultListenTimeout)
	case s.opts.HealthCheck < 0:
		s.err = fmt.Errorf("pgstore: Options.HealthCheck = %v: must be positive (zero means %v)", s.opts.HealthCheck, DefaultHealthCheck)
	}
	if s.opts.BatchSize == 0 {
		s.opts.BatchSize = DefaultBatchSize
	}
	if s.opts.ListenTimeout == 0 {
		s.opts.ListenTimeout = DefaultListenTimeout
	}
	if s.opts.HealthCheck == 0 {
		s.opts.HealthCheck = DefaultHealthCheck
	}
	s.channel = channelName(s.opts.Schema, s.opts.Table)
	s.sql = newStatements(s.opts.Schema, s.opts.Table)
	s.notify.init(s)
	return s
}

// identRE matches the schema and table names a Store accepts. The names go
// into the DDL's function bodies (quoted with $$) and into the notification
// channel "leash:schema.table", so nothing but these characters may occur:
// no '$', no quote, and no '.', which separates them in the channel.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkNames reports a schema or table name a Store does not accept, with
// an error matching ErrBadName.
func checkNames(schema, table string) error {
	if !identRE.MatchString(table) || len(table) > MaxTableLen {
		return fmt.Errorf("pgstore: Options.Table = %q: %w: want a letter or '_', then letters, digits and '_', at most %d bytes (the names derived from it must fit PostgreSQL's 63-byte identifiers)", table, ErrBadName, MaxTableLen)
	}
	if !identRE.MatchString(schema) || len(schema) > 63 {
		return fmt.Errorf("pgstore: Options.Schema = %q: %w: want a letter or '_', then letters, digits and '_', at most 63 bytes", schema, ErrBadName)
	}
	return nil
}

// channelName is the NOTIFY channel of a store's tables: "leash:schema.table",
// or, when that would not fit a 63-byte identifier, "leash:" and a hash of it.
// Channels are per database, so the schema is part of it; neither name can
// contain '.' (see identRE), so two stores' channels never coincide.
func channelName(schema, table string) string {
	ch := "leash:" + schema + "." + table
	if len(ch) <= 63 {
		return ch
	}
	sum := sha256.Sum256([]byte(schema + "." + table))
	return "leash:" + hex.EncodeToString(sum[:16])
}

// Validate reports a construction error: a nil pool or bad options.
func (s *Store) Validate() error { return s.err }

// Kinds implements [driver.KindStore]: the Store grants every kind.
func (s *Store) Kinds() []driver.Kind {
	return []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindRead, driver.KindWrite, driver.KindPermit}
}

// String names the store in messages: "postgres", the server's address and
// database, and the table.
func (s *Store) String() string {
	if s.pool == nil {
		return "postgres"
	}
	cc := s.pool.Config().ConnConfig
	return fmt.Sprintf("postgres %s:%d/%s table %s", cc.Host, cc.Port, cc.Database, s.sql.table)
}

// Pool returns the pool the Store runs its statements on.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close ends the Store's listening connection. It does not close the pool
// passed to New.
func (s *Store) Close() error {
	s.notify.close()
	return nil
}

// ident quotes a schema-qualified name.
func ident(schema, name string) string { return pgx.Identifier{schema, name}.Sanitize() }

// micros converts a duration to whole microseconds, at least 1.
func micros(d time.Duration) int64 { return max(d.Microseconds(), 1) }

// fromMicros converts microseconds from the server to a duration; a negative
// count stays negative.
func fromMicros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
