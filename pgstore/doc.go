// Package pgstore is the PostgreSQL [driver.Store]. It works with pgx v5:
// you pass your own *pgxpool.Pool, and the store runs its statements on it.
// It grants every lock kind (Mutex, FairMutex, RWMutex, Semaphore),
// MultiLock in one statement, administration (leash show, ls, unlock),
// holder records and scheduled jobs' claims and run records
// ([driver.JobStore], for package schedule and leash cron); it is not a
// session store.
//
//	pool, err := pgxpool.New(ctx, "postgres://app@db.example:5432/app")
//	…
//	store := pgstore.New(pool, nil)   // tables public.leash_locks…
//	if err := store.Migrate(ctx); err != nil { … }
//	c, err := leash.New(store, nil)   // c.Close closes the store, not the pool
//
// # Tables
//
// The store keeps its locks in tables of its own, in Options.Schema (default
// public), named after Options.Table (default leash_locks):
//
//	CREATE TABLE public.leash_locks_version (
//	    version integer NOT NULL
//	);
//
//	CREATE TABLE public.leash_locks (
//	    name    text PRIMARY KEY,
//	    kind    text NOT NULL DEFAULT 'l' CHECK (kind IN ('l', 's')),
//	    fence   bigint NOT NULL DEFAULT 0,
//	    permits integer NOT NULL DEFAULT 0
//	) WITH (fillfactor = 80);
//
//	CREATE TABLE public.leash_locks_holds (
//	    name    text NOT NULL,
//	    role    text NOT NULL CHECK (role IN ('x', 'w', 'r', 'p', 'q', 'm')),
//	    owner   text NOT NULL,
//	    expires timestamptz NOT NULL,
//	    fence   bigint NOT NULL DEFAULT 0,
//	    seq     bigint NOT NULL DEFAULT 0,
//	    PRIMARY KEY (name, role, owner)
//	) WITH (fillfactor = 80);
//
//	CREATE TABLE public.leash_locks_clients (
//	    id      text PRIMARY KEY,
//	    record  jsonb NOT NULL,
//	    expires timestamptz NOT NULL
//	);
//
//	CREATE TABLE public.leash_locks_jobs (
//	    name    text PRIMARY KEY,
//	    tick    bigint NOT NULL DEFAULT 0,
//	    attempt integer NOT NULL DEFAULT 0,
//	    outcome text NOT NULL DEFAULT '',
//	    client  text NOT NULL DEFAULT '',
//	    spec    text NOT NULL DEFAULT '',
//	    seq     bigint NOT NULL DEFAULT 0
//	);
//
//	CREATE TABLE public.leash_locks_runs (
//	    name    text NOT NULL,
//	    seq     bigint NOT NULL,
//	    tick    bigint NOT NULL,
//	    attempt integer NOT NULL,
//	    host    text NOT NULL DEFAULT '',
//	    pid     integer NOT NULL DEFAULT 0,
//	    client  text NOT NULL DEFAULT '',
//	    claim   text NOT NULL DEFAULT '',
//	    started timestamptz NOT NULL,
//	    ended   timestamptz,
//	    outcome text NOT NULL CHECK (outcome IN ('running', 'ok', 'failed', 'skipped', 'missed', 'cancelled', 'lost')),
//	    fence   bigint NOT NULL DEFAULT 0,
//	    error   text NOT NULL DEFAULT '',
//	    PRIMARY KEY (name, seq)
//	);
//
// leash_locks has one row per name ever locked: its kind (a lock or a
// semaphore), its permit count, and its fencing counter. leash_locks_holds
// has a row per hold (exclusive, writer, reader, permit) and per waiting
// place (fair queue place, waiting writer's mark), each with its end by the
// server's clock. leash_locks_clients keeps holder records (JSON), which
// only operators read. leash_locks_version says the tables are leash's and
// which schema version they have ([SchemaVersion]). leash_locks_jobs has a
// row per scheduled job (its latest claim: tick in Unix ms, attempt, the
// outcome of its run, its claimer and schedule) and leash_locks_runs the
// job's last run records, numbered by seq. Beside the tables, plpgsql
// functions named leash_locks_acquire, _acquire_many, _renew, _release,
// _withdraw, _force, _set_permits, _notify and _isolation do the work, one
// call per operation; _claim_tick, _end_run, _add_runs and _job_history
// (with _job_held and _ms) do the jobs'. Each job function locks the job's
// row in leash_locks_jobs and judges by clock_timestamp(), read once; it
// only reads the lock tables (whether a run's claimer holds the job's
// lock, for History's lost runs).
//
// Options.Schema and Options.Table (and the URL's leash_schema and
// leash_table) must be plain identifiers: a letter or '_', then letters,
// digits and '_' ([ErrBadName] otherwise, before any network call). They
// are written into the functions' bodies and into the notification
// channel's name, where nothing else would be safe.
//
// The complete DDL is the file schema.sql in this package; [DDL] returns it
// for other names, and [Store.Migrate] runs it (in one transaction, under an
// advisory lock, so every instance may call it at start). A DBA who keeps
// DDL apart from the application runs DDL's output as the tables' owner and
// gives the application's role USAGE on the schema, SELECT, INSERT, UPDATE
// and DELETE on the tables, and EXECUTE on the functions. Before its first
// statement on the tables, a Store checks once that they are leash's and at
// this SchemaVersion ([Store.Check]); a table of one of the store's names
// that is not leash's (an application's own table) is refused with
// [ErrSchema], and never written to, Migrate included.
//
// Schema version 2 added the jobs' two tables and their functions. Tables
// an earlier release made (version 1) are refused by Check, which names
// Migrate; Migrate brings them to version 2 in one transaction (it runs the
// part of schema.sql after its "Schema version 2" line and sets the
// version), keeping every lock and fencing counter, and refuses, changing
// nothing, when a table of the new names exists already (it is not
// leash's). A pgstore of an earlier release refuses version-2 tables, so
// upgrade every instance before (or as) the tables are migrated.
//
// # How each operation runs
//
// Every operation is one statement: a call of one of the functions, which
// locks the row of each name it touches in leash_locks (FOR UPDATE; several
// names in name order) before it reads or writes that name's holds. Under
// READ COMMITTED each statement in the function reads the latest committed
// state once the row is locked, and the fixed order rules out deadlocks
// between any number of clients.
//
// The functions therefore need READ COMMITTED, PostgreSQL's default: under
// REPEATABLE READ or SERIALIZABLE a statement would read the snapshot of
// the call's start, from before the row lock it waited for, so calls would
// fail with serialization errors or pass a fair waiter over. A function
// cannot change the isolation of the transaction it runs in, so each one
// first checks it (current_setting('transaction_isolation')) and otherwise
// raises SQLSTATE LK001, changing nothing; the Store reports that as
// [ErrIsolation]. If the role, the database or the server sets
// default_transaction_isolation to another level, give the store's pool
// read committed back, for example with the URL parameter
// default_transaction_isolation=read%20committed (pgx sends it as a
// setting of each session). The Store does not wrap each call in a
// transaction of its own: BEGIN ISOLATION LEVEL READ COMMITTED and COMMIT
// around the call would cost two more round trips, or one more with
// pipelining, for every operation. No row lock
// outlives a call: a client paused or cut off between two operations holds
// none, so no client can block a name by stopping (a call in flight still
// runs to its end on the server). Each function waits at most 5s for a row
// lock (lock_timeout, set on the function): a transaction of someone
// else's that locks rows of the tables makes the store's calls on those
// names fail (an unknown outcome, which the core retries) until it ends,
// but cannot make them hang.
//
// Renewal of many locks is one statement per Options.BatchSize locks (arrays
// of names, owners, kinds and leases), with each lock's own outcome. A
// multi-name acquire is one statement, all or nothing; when it grants
// nothing it leaves no row behind. Expired holds of a name are deleted by
// the statements that lock that name: there is no sweeper. A name's row,
// which keeps its fencing counter, is never deleted: the table has one
// small row per distinct name ever locked, so draw names from a bounded
// set. Do not delete rows yourself, even rows with no holds: under READ
// COMMITTED a DELETE … WHERE NOT EXISTS (holds) that waits for the row
// lock of an acquire in flight rechecks only the row, not the holds the
// acquire added, so it deletes the row of a lock just granted. Release,
// force release and inspection find a name's holds through its row, so
// that hold could then be neither released nor seen: it would end only
// once its holder stopped renewing it. (A function that finds a row gone
// between its statements fails rather than grant without the row's
// counter.)
//
// # Clock and fencing
//
// Leases are measured by the server's clock_timestamp() (never now(), the
// transaction's start, and never the client's clock), read once per call,
// at its start: a lease of d runs at least d from when the statement
// began, after the request was sent. The time is read before the call
// waits for a row lock (at most lock_timeout, 5s), so a lease may start up
// to that much before its grant; that is safe, since the core counts a
// hold's validity from when it sent the request (validUntil = send time +
// lease − margin), which is earlier still. Each fresh grant's fencing token is max(counter + 1,
// server time in µs): tokens keep growing when the counter is lost (a
// backup restored, a failover to a replica that had not received the last
// grants), as long as the server's clock never steps back past a token
// issued before the loss and a name gets fewer than a million grants a
// second. A force release or an expiry keeps the counter.
//
// # Restarts, failover and durability
//
// Locks are rows: a grant the server committed survives a crash and a
// restart, and its holder keeps it. With synchronous_commit = off (or fsync
// off) a crash of the server may lose the last commits it acknowledged: a
// grant or renewal its holder counts on may be forgotten, and the lock
// granted again while the holder still works (tokens still grow, by the
// clock). The same holds for a failover to an asynchronous standby that had
// not received them; use synchronous replication (synchronous_commit = on
// or remote_apply with synchronous_standby_names) where that matters, and
// point the pool at the primary (a multi-host URL with
// target_session_attrs=read-write). While the server is down, acquires and
// renewals fail (an unknown outcome to the core, which retries until the
// hold's validity ends).
//
// # Waiting: LISTEN/NOTIFY
//
// A release, withdrawal, semaphore resize or force release sends a
// notification (pg_notify) in the same transaction, so waiters hear of it
// only once it is committed. All names of one table share one channel,
// "leash:<schema>.<table>" (or "leash:" and a hash, when that would pass
// 63 bytes); the payload names the lock and whom to wake (one waiter,
// every one, the readers, a writer, or the fair queue's head). Each Store
// LISTENs on one connection of its own, dialled from the pool's
// configuration, with its BeforeConnect and AfterConnect hooks, when the
// first waiter watches (it takes no connection from the pool), with application_name "leash listener <schema>.<table>". Watch
// returns once the LISTEN is acknowledged. A connection quiet for
// Options.HealthCheck is sent a query; one that fails is replaced, and then
// every waiter is woken, since a release may have gone unheard. Waiters
// also try again when the holder's lease ends, as the core does for every
// store. LISTEN needs a session of its own: through PgBouncer, give the
// pool session pooling (or a direct connection). Inspect cannot tell how
// many clients wait (Info.Waiters is -1).
//
// # Data safety
//
// The tables are leash's own, and at any time a name holds one kind of
// lock. A name with no live holds, fair-queue places or waiting-writer
// marks is free for either kind: the grant of a lock (mutex, fair,
// read-write) or of a permit, or SetPermits, switches it to that kind,
// keeping its fencing counter. While a name has live permits, a lock asked
// for on it is refused with a *driver.NotALockError saying what the name
// holds, and nothing changes; while it has live locks, places or marks, so
// is a permit or SetPermits. Releasing something that is not held is
// driver.ErrNotHeld, with a *driver.NotALockError besides only when the
// name holds live locks of the other kind.
//
// # Opening by URL
//
// Importing the package registers the URL schemes postgres and postgresql
// with driver.Register, so that driver.Open (and the leash CLI's --store)
// opens a Store, with a pool of its own, from a URL:
//
//	postgres://[user[:password]@]host[:port][,host[:port]…]/database[?param=value&…]
//
// pgx's URL parameters (sslmode, connect_timeout, target_session_attrs,
// pool_max_conns, application_name, …, and server settings such as
// search_path) pass through to pgx; these are the Store's own, taken out
// before pgx parses the URL:
//
//	leash_schema=S       Options.Schema (default public)
//	leash_table=T        Options.Table (default leash_locks)
//	leash_batch_size=N   Options.BatchSize (default 1000)
//
// Any other parameter starting with leash_ is an error. Unless the URL sets
// connect_timeout, each connection attempt is bounded by 5s. Opening makes
// no network call, and a URL that cannot name a Store is an error that
// matches driver.ErrBadURL, without the password. The opened store does
// not create its tables: its Ping(ctx) method checks that the server
// answers and that the tables are ready, and its error says how to create
// them; it has Migrate too. Its Close closes its pool; its String is the URL
// without passwords.
package pgstore
