// Package mysqlstore is the MySQL and MariaDB [driver.Store]: locks are rows
// of InnoDB tables, reached through database/sql and go-sql-driver/mysql on
// a *sql.DB that you open and pass in. It is written for MySQL 8.0.4+ and
// MariaDB 10.6+ (JSON_TABLE, stored procedures, InnoDB); its tests run
// against MariaDB 10.11, which they start themselves. It has not been run
// against MySQL 8 here.
//
//	db, err := sql.Open("mysql", "app:secret@tcp(db:3306)/app")
//	s := mysqlstore.New(db, nil)     // nil: default options; no network call
//	err = s.Migrate(ctx)             // once, or let a DBA apply schema.sql
//	c, err := leash.New(s, nil)      // a leash Client on the store
//	hold, err := c.Mutex("billing/nightly").Lock(ctx)
//
// A Store grants every lock kind leash has: Mutex, FairMutex (a queue in
// arrival order), RWMutex (readers, writers that keep new readers out,
// downgrade, ErrUpgrade), Semaphore (resizable), MultiLock (all names in
// one step, or none), administration (Inspect, List with glob patterns,
// ForceRelease, used by the leash CLI's show, ls and unlock), holder
// records (who holds what, for operators), scheduled jobs' claims and run
// records ([driver.JobStore], for package schedule and leash cron) and
// release notifications. It is
// not a [driver.SessionStore]: MySQL has no lease that a client could renew
// for all its locks at once (a connection is no such lease: see "Paused
// clients"), so the watchdog renews each lock, in batches.
//
// Locks (Mutex, FairMutex, RWMutex, MultiLock) and semaphores share one
// name space. A name that nothing holds, queues for or waits for (no
// exclusive holder, reader, permit, fair queue place or waiting writer's
// mark whose lease is live) is free for either kind: it switches kind at
// the acquire that finds it free (or at a SetPermits, which makes it a
// semaphore's), keeping its fencing counter, so tokens keep growing across
// the switch. While anything of one kind is live on a
// name, an acquire of the other kind (a SetPermits of a lock's name too;
// AcquireMany names the name) is refused with a [driver.NotALockError]
// saying what is there. A release of a kind the name does not hold is
// [driver.ErrNotHeld]; it is also a NotALockError only while the name
// holds the other kind.
//
// # Schema
//
// Migrate creates the schema, or does nothing when it is current. The DDL
// is the package's schema.sql, embedded as [Schema] and applied by Migrate
// with the names Options gives, so the two cannot drift; a DBA may apply it
// with the mysql or mariadb client instead (it carries the DELIMITER lines
// the procedures need). Its tables, for the default name leash_locks:
//
//	CREATE TABLE IF NOT EXISTS `leash_locks` (
//	  `name`        VARBINARY(512)   NOT NULL,            -- lock name, as bytes
//	  `kind`        TINYINT UNSIGNED NOT NULL DEFAULT 0,  -- 0 lock, 4 semaphore
//	  `owner`       VARBINARY(255)   NULL,                -- exclusive holder
//	  `write`       TINYINT UNSIGNED NOT NULL DEFAULT 0,  -- 1: an RWMutex writer
//	  `expires_us`  BIGINT           NOT NULL DEFAULT 0,  -- lease end, µs (UTC)
//	  `owner_fence` BIGINT           NOT NULL DEFAULT 0,  -- the holder's token
//	  `fence`       BIGINT           NOT NULL DEFAULT 0,  -- last token of the name
//	  `permits`     INT              NOT NULL DEFAULT 0,  -- a semaphore's count
//	  PRIMARY KEY (`name`)
//	) ENGINE=InnoDB;
//	CREATE TABLE IF NOT EXISTS `leash_locks_holders` (  -- readers, permits,
//	  `name`       VARBINARY(512)   NOT NULL,           -- queue places and
//	  `owner`      VARBINARY(255)   NOT NULL,           -- writers' marks
//	  `role`       TINYINT UNSIGNED NOT NULL,           -- 1 place, 2 reader,
//	  `expires_us` BIGINT           NOT NULL,           -- 3 mark, 4 permit
//	  `fence`      BIGINT           NOT NULL,           -- token, or arrival
//	  PRIMARY KEY (`name`, `owner`, `role`)
//	) ENGINE=InnoDB;
//	CREATE TABLE IF NOT EXISTS `leash_locks_clients` (  -- holder records
//	  `id`         VARBINARY(64) NOT NULL,
//	  `record`     BLOB          NOT NULL,              -- JSON
//	  `expires_us` BIGINT        NOT NULL,
//	  PRIMARY KEY (`id`), KEY `expires` (`expires_us`)
//	) ENGINE=InnoDB;
//	CREATE TABLE IF NOT EXISTS `leash_locks_waiters` (  -- who polls a name
//	  `name`       VARBINARY(512) NOT NULL,
//	  `store`      VARBINARY(32)  NOT NULL,
//	  `expires_us` BIGINT         NOT NULL,
//	  PRIMARY KEY (`name`, `store`)
//	) ENGINE=InnoDB;
//	CREATE TABLE IF NOT EXISTS `leash_locks_jobs` (     -- a job's latest claim
//	  `name`    VARBINARY(512) NOT NULL,                -- job (= run lock) name
//	  `tick`    BIGINT         NOT NULL DEFAULT 0,      -- Unix ms; 0: none
//	  `attempt` INT            NOT NULL DEFAULT 0,
//	  `outcome` VARBINARY(16)  NOT NULL DEFAULT '',     -- of its run
//	  `client`  VARBINARY(255) NOT NULL DEFAULT '',     -- its claimer
//	  `spec`    VARBINARY(256) NOT NULL DEFAULT '',     -- the job's schedule
//	  `seq`     BIGINT         NOT NULL DEFAULT 0,      -- its newest record's
//	  PRIMARY KEY (`name`)
//	) ENGINE=InnoDB;
//	CREATE TABLE IF NOT EXISTS `leash_locks_runs` (     -- a job's last runs
//	  `name`       VARBINARY(512)  NOT NULL,
//	  `seq`        BIGINT          NOT NULL,            -- newest highest
//	  `tick`       BIGINT          NOT NULL,
//	  `attempt`    INT             NOT NULL,
//	  `host`       VARBINARY(255)  NOT NULL DEFAULT '',
//	  `pid`        INT             NOT NULL DEFAULT 0,
//	  `client`     VARBINARY(255)  NOT NULL DEFAULT '',
//	  `claim`      VARBINARY(255)  NOT NULL DEFAULT '',  -- the claimer's id of it
//	  `started_ms` BIGINT          NOT NULL,            -- server clock, Unix ms
//	  `ended_ms`   BIGINT          NOT NULL DEFAULT 0,  -- 0 while running
//	  `outcome`    VARBINARY(16)   NOT NULL,
//	  `fence`      BIGINT          NOT NULL DEFAULT 0,
//	  `error`      VARBINARY(1024) NOT NULL DEFAULT '',
//	  PRIMARY KEY (`name`, `seq`)
//	) ENGINE=InnoDB;
//	CREATE TABLE IF NOT EXISTS `leash_locks_schema` (   -- ('leash', version)
//	  `app`     VARCHAR(16) NOT NULL,
//	  `version` INT         NOT NULL,
//	  PRIMARY KEY (`app`)
//	) ENGINE=InnoDB;
//
// and the procedures leash_locks_open, _acquire, _release, _withdraw,
// _set_permits, _force_release, _acquire_many, _renew, _put_client,
// _waiting, and, for scheduled jobs, _claim_tick, _end_run, _add_runs,
// _job_history and _job_held, each documented in schema.sql. A job's
// procedure locks the job's row of leash_locks_jobs, judges by
// UTC_TIMESTAMP(6) read once at its start, and only reads the lock tables
// (whether a run's claimer holds the job's lock); _job_history is one
// consistent read. Options.Table renames them all
// (<Table>_holders, <Table>_acquire, …; 1 to 50 characters, quoted with
// backticks, with no upper-case letter, NUL, line break or trailing space:
// see Options.Table), and Options.Database puts them in a database other
// than the connection's default.
//
// Before its first use, a Store checks that the tables are leash's (their
// columns, and the row ('leash', SchemaVersion) in <Table>_schema), that
// they are InnoDB and that the procedures exist and are leash's (each
// carries the comment 'leash: … (github.com/leash-go/leash/mysqlstore)'),
// and refuses with ErrNotLeashTable, ErrNotLeashProcedure, ErrNotInnoDB,
// ErrSchemaVersion or ErrNoSchema; and that
// the session runs with autocommit on (ErrNoAutocommit: the DSN must not set
// autocommit=0). A table
// of one of those names that is another application's is never read or
// written, a stored procedure of one of those names without leash's
// comment is never called, dropped or replaced, and Migrate then creates
// nothing.
//
// Schema version 2 added the jobs' two tables and five procedures. A
// version-1 schema (an earlier release's) is refused by every call with
// ErrSchemaVersion, which names Migrate; Migrate brings it to version 2
// (it applies schema.sql again: the new tables are created, leash's
// procedures replaced, the version row set), keeping every lock and
// fencing counter, under the same refusals (a table or procedure of the
// new names that is not leash's: nothing is created). A mysqlstore of an
// earlier release refuses a version-2 schema, so upgrade every instance
// before (or as) the schema is migrated.
//
// Migrate needs CREATE (the tables), CREATE ROUTINE and ALTER ROUTINE (it
// drops and creates the procedures again) and SELECT, INSERT and UPDATE on
// the schema table; a Store needs SELECT, INSERT, UPDATE and DELETE on the
// tables and EXECUTE on the procedures.
//
// # Opening by URL
//
// Importing the package registers the scheme "mysql" with driver.Register,
// so that driver.Open (and the leash CLI's --store) opens a Store, with a
// *sql.DB of its own, from a URL:
//
//	mysql://[user[:password]@]host[:port]/dbname[?param=value&…]
//
// The port defaults to 3306; an IPv6 address goes in brackets; the user and
// password are URL-escaped (a password may hold any character). Parameters
// are go-sql-driver/mysql's DSN parameters, as that driver spells them
// (tls=true, charset=utf8mb4, timeout=5s, readTimeout=…, and session
// variables such as time_zone=%27%2B00%3A00%27), except leash's own, which
// are not passed on:
//
//	leash_table=NAME     Options.Table (default leash_locks)
//	leash_migrate=true   run Migrate when opening (a network call)
//
// go-sql-driver/mysql sends every parameter it does not know to the server
// as a session variable (SET name=value, on each new connection): that is
// how it spells session settings. So a misspelt parameter (parsetime=true,
// time_zon=…) is not refused when the URL is opened: it fails at the first
// connection, with the server's error (Unknown system variable). A
// parameter given twice, or whose name cannot be a system variable's (not
// letters, digits and underscores, not starting with a digit), is refused.
//
// Unless the URL sets timeout, a connection attempt is bounded by 3s. A URL
// that cannot name a Store is an error that matches driver.ErrBadURL, and no
// error shows the password (driver.Redact). The opened store's Close closes
// the Store and its *sql.DB; its String is the URL without the password;
// its Ping(ctx) checks that the server answers and the schema is usable.
//
// # Clock and time zones
//
// Every lease is measured by the database server's clock, never the
// client's: times are microseconds since the epoch, computed as
// TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), plain
// arithmetic on the UTC wall time. No session time_zone (the DSN may set
// any), no loc or parseTime setting of the driver, and no daylight-saving
// change can move a lease; no DATETIME value crosses the wire. The tests
// run with time_zone='+11:30' and loc=America/New_York, and compare Stores
// in three zones.
//
// UTC_TIMESTAMP, like NOW, is the time the statement started; SYSDATE would
// be the moment of evaluation. A procedure reads the time once, at its
// start, which comes after the client sent the call: a lease counted from
// it ends no earlier than one counted from the send, which is what leash's
// validity rule needs. A call that waited for a row lock judges the
// holder's lease by its start time, which can only make a lock look held a
// little longer, never free sooner; and every decision of a call uses the
// one time, which SYSDATE would not give.
//
// # Transactions, deadlocks and paused clients
//
// Every operation is one round trip: one CALL of a stored procedure (a
// renewal batch, an acquire, a release, …) or one SELECT (Inspect, List,
// polls). A procedure that changes several rows runs its whole transaction
// on the server and returns its one-row result after COMMIT. So no client
// ever holds a row lock between statements: a client paused with SIGSTOP,
// or cut off, in the middle of a call holds nothing once the server has run
// the call, and its locks end with their leases. (A design with client-side
// transactions would let a paused client block a name until its connection
// died: MySQL's wait_timeout is 8 hours by default, and MySQL 8 has no
// idle-transaction timeout. GET_LOCK-style named locks die with their
// connection, the same hazard.) TestPausedClientBlocksNothing pauses a
// client mid-flight, again and again, and takes the lock each time within
// the paused client's lease.
//
// Each procedure sets READ COMMITTED for its own transaction, whatever the
// session's isolation level: InnoDB then takes only locks on the rows a
// statement reads to change, no gap or next-key locks, which under
// REPEATABLE READ deadlock two acquires that insert holder rows into one
// gap (TestHammerKinds shows InnoDB's error 1213 within a few runs without
// it). Rows are locked in one order (a name's row before its holder rows,
// names in byte order, each renewal batch sorted), every read that decides
// is a locking read taken after the lock of the name's row, and the one
// INSERT … ON DUPLICATE KEY UPDATE of a name's row locks an existing row
// exclusively at once, never shared first. The hammer tests take one name,
// and every kind on adjacent names, from 24 goroutines on four *sql.DBs
// and see no deadlock, no lock wait timeout, no double grant, and tokens
// strictly increasing. READ COMMITTED needs row-based binary logging
// (binlog_format ROW or MIXED, the defaults) where the binary log is on;
// MySQL refuses it with binlog_format=STATEMENT.
//
// No statement uses SKIP LOCKED or NOWAIT, deliberately. A row is locked
// only by a call the server is running, for the microseconds it runs, so a
// call that meets a locked row waits that long and then sees the truth;
// SKIP LOCKED would pass over a row another call is changing (a renewal
// would report a held lock gone) and NOWAIT would turn ordinary contention
// into errors. What only looks (polls, Inspect, List) is a consistent,
// non-locking read, which never waits for a lock at all. A session outside
// leash that locks leash's rows itself (a DBA's SELECT … FOR UPDATE left
// open) makes calls on those names wait up to innodb_lock_wait_timeout
// (50s by default) and then fail with an unknown outcome.
//
// The stored procedures run with the sql_mode of the session that created
// them (Migrate sets STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION for that),
// so a user's sql_mode does not change them. MariaDB's INSERT … RETURNING
// is not used, so that one schema serves MySQL 8 as well.
//
// # Fencing tokens
//
// Every grant's token is max(counter + 1, server time in µs), where the
// counter is the name's row, which stays when the lock is freed, expires or
// is forced free. Tokens therefore grow strictly per name while the row
// lives, whatever the clock does, and keep growing even if the counter is
// lost (the row deleted, a failover to a replica that lacks the last
// grants), provided the server clock never steps back past a token issued
// before the loss, and fewer than a million grants of one name are made per
// second. This is the Redis store's rule.
//
// The cost: the lock table keeps one row per name ever locked, and leash
// never deletes one: the name's length and about 50 bytes each, plus the
// primary key. An application that locks unbounded names (one per request,
// user or file) grows the table without bound; prefer a bounded set of
// names. Expired readers, permits, places and marks are deleted by the next
// call that touches their name; the name's row is kept.
//
// If the table must be pruned, a DBA may delete a row that holds nothing,
// one name at a time, in a transaction that locks the name's row first, as
// leash's procedures do (the name's holder rows are created only under
// that lock), and deletes it only if it has no exclusive holder and no
// holder rows:
//
//	START TRANSACTION;
//	SELECT `owner` FROM leash_locks WHERE `name` = 'n' FOR UPDATE;   -- must be NULL
//	SELECT COUNT(*) FROM leash_locks_holders WHERE `name` = 'n';      -- must be 0
//	DELETE FROM leash_locks WHERE `name` = 'n';                        -- only then
//	COMMIT;
//
// Never delete a row with an owner or holder rows (that frees a held lock)
// and never with a plain DELETE … WHERE over many names, which checks the
// holder rows without the name's lock. The next tokens of a deleted name
// rest on the server clock alone (above).
//
// # Restarts and failover
//
// Locks are InnoDB rows: a server restart keeps every committed grant (with
// innodb_flush_log_at_trx_commit=1, the default; 2 loses the last second on
// an operating system crash, not on a server crash), so holders keep their
// locks and their renewals succeed once the server answers again; while it
// does not, leash's local validity deadline declares locks lost as on any
// store. There is no restart grace as on Redis, since a restart loses no
// committed grant. A failover to an asynchronous replica can lose the last
// grants and renewals, and then grant a lock its holder still believes it
// holds until its next renewal fails (RenewGone or RenewTaken): use
// semi-synchronous replication or a Galera/Group Replication cluster where
// that matters, and let the fencing token guard the resource.
//
// # Waiting: polling, and its cost
//
// MySQL and MariaDB have no notification channel (nothing like PostgreSQL's
// LISTEN/NOTIFY or Redis's pub/sub), so the Store's [Store.Watch] polls,
// cheaply:
//
//   - A release, withdrawal, resize or force release made through the Store
//     wakes the Store's waiters of that name at once, with no round trip,
//     with the wake-up the release calls for (the fair queue's new head, the
//     waiting writer, every reader); a release also wakes the Store's
//     waiters of the name's other kinds (a Mutex waiter blocked by a
//     reader), who try again.
//   - A release made elsewhere (another process) is seen by the Store's one
//     poller for that name, shared by all its waiters: a consistent,
//     non-locking read of the name's row and holders by primary key. It
//     wakes the waiters when it finds the name free after it was last known
//     held (by a read, or by a refusal of the Store's own), or free with a
//     later fencing token than last known (taken and given back between
//     two reads). The next read comes a quarter of the time since a read
//     last saw the name change (its token, or whether it is held), or since
//     the poller started, at least Options.PollMin (10ms) and at most
//     Options.PollMax (1s), but never later than 1ms after the blocking
//     lease as last known ends. A name waited for by one Store for a minute
//     costs about 80 reads; the hand-off lags a release by about a quarter
//     of the hold it ends, at most PollMax.
//   - Each poller is registered in <Table>_waiters while it polls (a write
//     when it starts, every 3.3s, and when it stops), so that Inspect's
//     Waiters counts the clients waiting, as on Redis.
//
// Measured on a busy 2-core machine (load average 5) against the tests'
// MariaDB 10.11, with `go test -run '^$' -bench Handoff -benchtime 30x`
// (median of the time from Unlock's return to the waiter's Lock's return):
// in one Store, about 0.3ms; across two Stores on two *sql.DBs, as two
// processes, 2 to 4ms after a 20ms hold and about 24ms after a 200ms hold.
//
// # Renewal
//
// The watchdog's Renew of many locks is one CALL per batch of
// Options.BatchSize (500) locks: the batch goes as one JSON argument, one
// UPDATE renews the exclusive locks and one the readers and permits, each
// looking every lock up by primary key in name order, and a read after the
// commit reports each lock as renewed, gone or taken. 10,000 held locks are
// 20 CALLs (BenchmarkRenew10k).
//
// # What is missing
//
//   - Session renewal ([driver.SessionStore]): MySQL has no server-side
//     lease a client renews for all its locks.
//   - A notification channel: waiters of other processes poll (above).
//   - MySQL 8 has not been tested here (only MariaDB 10.11); the SQL keeps
//     to what both servers document (no RETURNING, no CREATE OR REPLACE).
//   - A force release is seen by the holder at its next renewal, not at
//     once (there is no channel to tell it).
//   - No restart grace or replication guard: see "Restarts and failover".
package mysqlstore
