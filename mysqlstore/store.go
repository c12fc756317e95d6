package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
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
	// named after it (<Table>_schema, <Table>_acquire, …). 1 to 50
	// characters of UTF-8 with no upper-case letter (servers with
	// lower_case_table_names=1 lower-case table names), no NUL, no line
	// break (CR or LF) and no trailing space; it is quoted with backticks,
	// so any other character, a backtick included, is allowed. New refuses
	// any other name with an error matching ErrBadIdent. Default
	// DefaultTable ("leash_locks").
	Table string
	// BatchSize is how many locks one renewal call (one CALL, one UPDATE)
	// renews. Default DefaultBatchSize (500); at most MaxBatchSize.
	BatchSize int
	// PollMin and PollMax bound the interval at which a waited-for name is
	// polled (see Watch): a quarter of the time since a poll last saw the
	// lock change (its token, or whether it is held), at least PollMin and
	// at most PollMax, and never later than 1ms past the holder's lease as
	// last known. Defaults DefaultPollMin (10ms) and DefaultPollMax (1s).
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

	isReady atomic.Bool                // the schema was found usable
	stmts   atomic.Pointer[statements] // nil until ready prepared them
	closed  atomic.Bool

	watch pollers

	// migrateRead, when set (by tests), runs inside Migrate after it read
	// the schema's state and before it applies any DDL.
	migrateRead func()
}

// statements are the Store's prepared statements, made once the schema is
// known to be usable.
type statements struct {
	acquire, acquireMany, renew, release, withdraw, setPermits, force *sql.Stmt
	poll, inspect, list                                               *sql.Stmt
	putClient, getClient, deleteClient, waiting                       *sql.Stmt
	claimTick, endRun, addRuns, jobHistory, jobList                   *sql.Stmt
}

var _ interface {
	driver.Store
	driver.Watcher
	driver.Admin
	driver.MultiStore
	driver.Validator
	driver.NameChecker
	driver.ClientRecorder
	driver.KindStore
	driver.Withdrawer
	driver.PermitSetter
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
	if err := checkTable("Options.Table", o.Table); err != nil && s.err == nil {
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

// Close stops the Store's pollers and frees its prepared statements; every
// call after it fails. It does not close the *sql.DB. It is safe to call
// more than once.
func (s *Store) Close() error {
	s.closed.Store(true)
	s.watch.close()
	s.stmts.Swap(nil).close()
	return nil
}

func (st *statements) all() []*sql.Stmt {
	return []*sql.Stmt{st.acquire, st.acquireMany, st.renew, st.release, st.withdraw, st.setPermits, st.force,
		st.poll, st.inspect, st.list, st.putClient, st.getClient, st.deleteClient, st.waiting,
		st.claimTick, st.endRun, st.addRuns, st.jobHistory, st.jobList}
}

// close closes the statements prepared so far; st may be nil.
func (st *statements) close() {
	if st == nil {
		return
	}
	for _, stmt := range st.all() {
		if stmt != nil {
			stmt.Close()
		}
	}
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
func (s *Store) markReady() { s.isReady.Store(true) }

// now is the server's clock in microseconds since the epoch, as every
// statement computes it: UTC wall time, whatever the session's time_zone.
const now = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"

// ready checks the schema on first use and prepares the statements. An
// error is returned to the caller and the check is made again next time.
// No lock is held over the round trips: calls that find the Store not
// ready yet each check and prepare, and the first to finish is kept.
func (s *Store) ready(ctx context.Context) (*statements, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	if st := s.stmts.Load(); st != nil {
		return st, nil
	}
	if !s.isReady.Load() {
		state, err := s.names.readState(ctx, s.db)
		if err != nil {
			return nil, fmt.Errorf("mysqlstore: checking the schema: %w", err)
		}
		if err := s.names.usable(state); err != nil {
			return nil, err
		}
		s.isReady.Store(true)
	}
	st, err := s.prepare(ctx)
	if err != nil {
		return nil, err
	}
	if !s.stmts.CompareAndSwap(nil, st) {
		st.close() // another call prepared them first
		return s.stmts.Load(), nil
	}
	if s.closed.Load() { // closed meanwhile: leave nothing open
		s.stmts.Swap(nil).close()
		return nil, errClosed
	}
	return st, nil
}

// prepare prepares the Store's statements.
func (s *Store) prepare(ctx context.Context) (*statements, error) {
	n := s.names
	var st statements
	for _, p := range []struct {
		dst  **sql.Stmt
		text string
	}{
		{&st.acquire, "CALL " + n.qualified("_acquire") + "(?, ?, ?, ?, ?, ?, ?)"},
		{&st.acquireMany, "CALL " + n.qualified("_acquire_many") + "(?, ?)"},
		{&st.renew, "CALL " + n.qualified("_renew") + "(?)"},
		{&st.release, "CALL " + n.qualified("_release") + "(?, ?, ?)"},
		{&st.withdraw, "CALL " + n.qualified("_withdraw") + "(?, ?)"},
		{&st.setPermits, "CALL " + n.qualified("_set_permits") + "(?, ?)"},
		{&st.force, "CALL " + n.qualified("_force_release") + "(?)"},
		// Polls, inspections and lists are consistent (non-locking) reads
		// of one statement each: they never wait for a row lock, nor hold
		// one.
		{&st.poll, pollQuery(n)},
		{&st.inspect, inspectQuery(n)},
		{&st.list, listQuery(n)},
		{&st.putClient, "CALL " + n.qualified("_put_client") + "(?, ?, ?)"},
		{&st.getClient, "SELECT `record` FROM " + n.clients + " WHERE `id` = ? AND `expires_us` > " + now},
		{&st.deleteClient, "DELETE FROM " + n.clients + " WHERE `id` = ?"},
		{&st.waiting, "CALL " + n.qualified("_waiting") + "(?, ?, ?)"},
		{&st.claimTick, "CALL " + n.qualified("_claim_tick") + "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
		{&st.endRun, "CALL " + n.qualified("_end_run") + "(?, ?, ?, ?, ?, ?, ?)"},
		{&st.addRuns, "CALL " + n.qualified("_add_runs") + "(?, ?, ?)"},
		{&st.jobHistory, "CALL " + n.qualified("_job_history") + "(?, ?)"},
		{&st.jobList, "SELECT `name` FROM " + n.qualified("_jobs") + " WHERE `name` LIKE ? ESCAPE '!' ORDER BY `name`"},
	} {
		stmt, err := s.db.PrepareContext(ctx, p.text)
		if err != nil {
			st.close()
			return nil, fmt.Errorf("mysqlstore: prepare: %w", err)
		}
		*p.dst = stmt
	}
	return &st, nil
}

// readyFor checks req (before any round trip) and then the schema.
func (s *Store) readyFor(ctx context.Context, req driver.Request) (*statements, error) {
	if err := s.checkRequest(req); err != nil {
		return nil, err
	}
	return s.ready(ctx)
}

// checkRequest refuses, before any round trip, what the schema cannot hold.
func (s *Store) checkRequest(req driver.Request) error {
	if req.Kind > driver.KindPermit {
		return driver.Unsupported(s, "lock kind "+req.Kind.String())
	}
	if len(req.Parent) > MaxOwnerLen {
		return fmt.Errorf("mysqlstore: parent owner of %d bytes: want at most %d", len(req.Parent), MaxOwnerLen)
	}
	if len(req.Owner) == 0 || len(req.Owner) > MaxOwnerLen {
		return fmt.Errorf("mysqlstore: owner of %d bytes: want 1 to %d", len(req.Owner), MaxOwnerLen)
	}
	if len(req.Name) == 0 || len(req.Name) > MaxNameLen {
		return fmt.Errorf("mysqlstore: name of %d bytes: want 1 to %d", len(req.Name), MaxNameLen)
	}
	return nil
}

// checkLease refuses, before any round trip, a request that would grant or
// renew with a lease that is not positive, a negative wait or a permit
// count an INT cannot hold.
func checkLease(req driver.Request) error {
	if req.Lease <= 0 || req.Wait < 0 || req.Permits < 0 || req.Permits > 1<<31-1 {
		return fmt.Errorf("mysqlstore: %q: lease %v, wait %v, permits %d: want a positive lease, no negative wait, permits in an INT",
			req.Name, req.Lease, req.Wait, req.Permits)
	}
	return nil
}

// micros is d in whole microseconds, rounded up: a lease is never shortened.
func micros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}
