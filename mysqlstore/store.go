package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leash-go/leash/driver"
)

// Defaults and limits of Options.
const (
	// DefaultTable is the lock table's name.
	DefaultTable = "leash_locks"
	// DefaultBatchSize is how many locks one renewal call renews.
	DefaultBatchSize = 500
	// MaxBatchSize is the largest BatchSize accepted.
	MaxBatchSize = 5000
	// DefaultPollMin is the first interval of a waiting name's poll.
	DefaultPollMin = 10 * time.Millisecond
	// DefaultPollMax is the longest interval of a waiting name's poll.
	DefaultPollMax = time.Second
)

// Limits of what the schema stores.
const (
	// MaxOwnerLen is the longest owner string the lock table holds, in
	// bytes; leash's owners ("<client-id>:<n>@<explicit owner>") fit.
	MaxOwnerLen = 255
	// MaxNameLen is the longest lock name the table holds, in bytes: the
	// same as leash.MaxNameLen.
	MaxNameLen = 512
)

// Options configures a Store. A nil *Options means all defaults; a zero
// field means that field's default.
type Options struct {
	// Database is the database (schema) that holds the lock table. Default
	// "": the connection's default database, the DSN's /dbname.
	Database string
	// Table is the lock table's name; its companion table and procedures are
	// named after it (<Table>_schema, <Table>_acquire, …). Any name MySQL
	// accepts, up to 51 characters; it is quoted with backticks. Default
	// DefaultTable ("leash_locks").
	Table string
	// BatchSize is how many locks one renewal call (one CALL, one UPDATE)
	// renews. Default DefaultBatchSize (500); at most MaxBatchSize.
	BatchSize int
	// PollMin and PollMax bound the interval at which a waiting name is
	// polled (see Watch): the first poll comes PollMin after a wait starts,
	// and the interval doubles up to PollMax, and never runs past the
	// holder's lease. Defaults DefaultPollMin (10ms) and DefaultPollMax
	// (1s).
	PollMin, PollMax time.Duration
}

// Store is a MySQL or MariaDB lock store. Create it with New; it is safe for
// concurrent use. Its Close stops its pollers; it does not close the
// *sql.DB, which stays the caller's.
type Store struct {
	db    *sql.DB
	opts  Options
	names names
	err   error // construction error, reported by Validate and every call

	mu      sync.Mutex // guards ready and the prepared statements
	isReady bool
	stmts   statements

	watch pollers
}

// statements are the Store's prepared statements, made once the schema is
// known to be usable.
type statements struct {
	acquire, acquireMany, renew, release, poll, inspect, force *sql.Stmt
}

var _ interface {
	driver.Store
	driver.Watcher
	driver.Admin
	driver.MultiStore
	driver.Validator
	driver.NameChecker
} = (*Store)(nil)

// New returns a Store on db, a *sql.DB of go-sql-driver/mysql. It makes no
// network call; the first call that needs the schema checks it (see
// Migrate). A nil db or bad Options are reported by Validate, which
// leash.New calls, and by every method.
func New(db *sql.DB, opts *Options) *Store {
	s := &Store{db: db}
	if opts != nil {
		s.opts = *opts
	}
	o := &s.opts
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.PollMin == 0 {
		o.PollMin = DefaultPollMin
	}
	if o.PollMax == 0 {
		o.PollMax = DefaultPollMax
	}
	switch {
	case db == nil:
		s.err = errors.New("mysqlstore: New with a nil *sql.DB")
	case o.BatchSize < 1 || o.BatchSize > MaxBatchSize:
		s.err = fmt.Errorf("mysqlstore: Options.BatchSize %d is not in [1, %d]", o.BatchSize, MaxBatchSize)
	case o.PollMin < 0 || o.PollMax < o.PollMin:
		s.err = fmt.Errorf("mysqlstore: Options.PollMin %v and PollMax %v: want 0 < PollMin <= PollMax", o.PollMin, o.PollMax)
	}
	if err := checkIdent("Options.Table", o.Table, maxTableLen); err != nil && s.err == nil {
		s.err = err
	}
	if o.Database != "" {
		if err := checkIdent("Options.Database", o.Database, 64); err != nil && s.err == nil {
			s.err = err
		}
	}
	s.names = newNames(o.Database, o.Table)
	s.watch.init(s)
	return s
}

// Validate reports a construction error: a nil *sql.DB or bad Options.
func (s *Store) Validate() error { return s.err }

// String describes the store for messages: the lock table it uses.
func (s *Store) String() string { return "mysqlstore(" + s.names.locks + ")" }

// Close stops the Store's pollers and frees its prepared statements. It
// does not close the *sql.DB. It is safe to call more than once.
func (s *Store) Close() error {
	s.watch.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.stmts.all() {
		if st != nil {
			st.Close()
		}
	}
	s.stmts, s.isReady = statements{}, false
	return nil
}

func (st *statements) all() []*sql.Stmt {
	return []*sql.Stmt{st.acquire, st.acquireMany, st.renew, st.release, st.poll, st.inspect, st.force}
}

// CheckName refuses names longer than the table holds (leash's own limit is
// the same).
func (s *Store) CheckName(name string) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("longer than %d bytes", MaxNameLen)
	}
	return nil
}

// markReady records that the schema was found usable.
func (s *Store) markReady() {
	s.mu.Lock()
	s.isReady = true
	s.mu.Unlock()
}

// now is the server's clock in microseconds since the epoch, as every
// statement computes it: UTC wall time, whatever the session's time_zone.
const now = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"

// ready checks the schema on first use and prepares the statements. An
// error is returned to the caller and the check is made again next time.
func (s *Store) ready(ctx context.Context) (*statements, error) {
	if s.err != nil {
		return nil, s.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stmts.acquire != nil {
		return &s.stmts, nil
	}
	if !s.isReady {
		st, err := s.names.readState(ctx, s.db)
		if err != nil {
			return nil, fmt.Errorf("mysqlstore: checking the schema: %w", err)
		}
		if err := s.names.usable(st); err != nil {
			return nil, err
		}
		s.isReady = true
	}
	n := s.names
	var st statements
	for _, p := range []struct {
		dst  **sql.Stmt
		text string
	}{
		{&st.acquire, "CALL " + n.acquire + "(?, ?, ?)"},
		{&st.acquireMany, "CALL " + n.acquireMn + "(?, ?)"},
		{&st.renew, "CALL " + n.renew + "(?)"},
		// A release is one UPDATE: atomic on its own, and it changes
		// nothing unless the owner still holds the lock.
		{&st.release, "UPDATE " + n.locks + " SET `owner` = NULL, `expires_us` = 0 WHERE `name` = ? AND `kind` = 0 AND `owner` = ? AND `expires_us` > " + now},
		// Polls and inspections are consistent (non-locking) reads: they
		// never wait for a row lock, nor hold one.
		{&st.poll, "SELECT `owner` IS NOT NULL AND `expires_us` > " + now + ", `fence`, `expires_us` - " + now + " FROM " + n.locks + " WHERE `name` = ?"},
		{&st.inspect, "SELECT `kind`, COALESCE(`owner`, ''), `expires_us` - " + now + ", `fence` FROM " + n.locks + " WHERE `name` = ?"},
		{&st.force, "UPDATE " + n.locks + " SET `owner` = NULL, `expires_us` = 0 WHERE `name` = ? AND `kind` = 0 AND `owner` IS NOT NULL AND `expires_us` > " + now},
	} {
		stmt, err := s.db.PrepareContext(ctx, p.text)
		if err != nil {
			for _, done := range st.all() {
				if done != nil {
					done.Close()
				}
			}
			return nil, fmt.Errorf("mysqlstore: prepare: %w", err)
		}
		*p.dst = stmt
	}
	s.stmts = st
	return &s.stmts, nil
}

// checkRequest refuses, before any round trip, what the schema cannot hold.
func (s *Store) checkRequest(req driver.Request) error {
	if req.Kind != driver.KindMutex {
		return driver.Unsupported(s, "lock kind "+req.Kind.String())
	}
	if len(req.Owner) == 0 || len(req.Owner) > MaxOwnerLen {
		return fmt.Errorf("mysqlstore: owner of %d bytes: want 1 to %d", len(req.Owner), MaxOwnerLen)
	}
	if len(req.Name) == 0 || len(req.Name) > MaxNameLen {
		return fmt.Errorf("mysqlstore: name of %d bytes: want 1 to %d", len(req.Name), MaxNameLen)
	}
	return nil
}

// micros is d in whole microseconds, rounded up: a lease is never shortened.
func micros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}
