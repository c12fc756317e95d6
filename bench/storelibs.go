package main

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"regexp"
	"sync"
	"time"

	"cirello.io/pglock"
	_ "github.com/go-sql-driver/mysql" // the "mysql" database/sql driver, for mysqlstore and go-mysql-lock
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/etcdstore"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/mysqlstore"
	"github.com/leash-go/leash/pgstore"
	"github.com/leash-go/leash/redisstore"
	"github.com/leash-go/leash/zkstore"
	_ "github.com/lib/pq" // the "postgres" database/sql driver, which pglock's README uses
	gomysqllock "github.com/sanketplus/go-mysql-lock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// poolSize is every connection pool's size in the stores section: go-redis's
// default on this 2-core machine (10 per CPU), given to the database pools
// too (pgxpool's default would be 4 here, database/sql's unbounded with 2
// idle), so that every library has the same number of connections.
const poolSize = 20

// pglockLease and pglockHeartbeat are the values of pglock's README example.
const (
	pglockLease     = 3 * time.Second
	pglockHeartbeat = time.Second
)

// storeEnv is the servers of the stores section and how to reach them.
type storeEnv struct {
	mem   *memstore.Store // shared by every leash Client "on memstore": one process
	redis string          // host:port
	pgURL string          // postgres:// URL of the bench database
	myDSN string          // go-sql-driver/mysql DSN of the bench database
	etcd  string          // etcd client URL
	zk    string          // ZooKeeper host:port
}

// A storeLib is one library on one server in the stores section.
type storeLib struct {
	lib
	server string // what it runs on, for the tables
	peer   string // the peer on the same server that the ratios compare with, if any
	// holder opens a client that holds many locks, with a lease of
	// renewLease where the library takes one (nil: cannot renew).
	holder func(env *storeEnv, o *renewObserver) (holder, error)
	// renewN is how many locks the renewal run holds, at most; 0:
	// stores.renewN, or stores.renewBig for a big one.
	renewN int
	// big: the renewal run holds stores.renewBig locks (Redis and the
	// session stores).
	big bool
	// renewNote says why the renewal run holds fewer than stores.renewN.
	renewNote string
	// stmtsPerRenewal is how many statements a peer sends to renew one
	// lock once (leash's renewals are counted by its Observer instead).
	stmtsPerRenewal int
}

// renewLease is the lease of every renewing library in the renewal runs:
// pglock's README value, so that leash (renewing every lease/3) and pglock
// (heartbeat every second) keep their locks on the same schedule.
const renewLease = pglockLease

func storeLibs(env *storeEnv) []storeLib {
	leashSettings := func(store string) string {
		return store + "; `leash.New(store, nil)`: defaults (30 s lease renewed every 10 s); `c.Mutex(name).Lock(ctx)`, `Unlock`"
	}
	return []storeLib{
		{
			lib: lib{name: "leash on memstore", open: openLeashStore(env, newMemStore),
				settings: leashSettings("`memstore.New()`, one Store shared by every Client (one process: a Watcher wakes waiters in memory)")},
			server: "memstore (in process)",
			holder: leashStoreHolder(newMemStore),
		},
		{
			lib: lib{name: "leash on Redis", open: openLeashStore(env, newRedisStore),
				settings: leashSettings("`redisstore.New(rdb, nil)` on go-redis defaults (pub/sub wake-ups)")},
			server: "Redis",
			holder: leashStoreHolder(newRedisStore),
			big:    true,
		},
		{
			lib: lib{name: "leash on PostgreSQL", open: openLeashStore(env, newPgStore),
				settings: leashSettings(fmt.Sprintf("`pgstore.New(pool, nil)` on a pgxpool of %d connections (LISTEN/NOTIFY wake-ups, renewal batches of 1,000)", poolSize))},
			server: "PostgreSQL",
			peer:   "pglock",
			holder: leashStoreHolder(newPgStore),
		},
		{
			lib: lib{name: "pglock", open: func(string) (locker, error) { return newPglock(env, poolSize) },
				settings: fmt.Sprintf("`pglock.New(db, pglock.WithLeaseDuration(3*time.Second), pglock.WithHeartbeatFrequency(time.Second))` as its README's example, on lib/pq (`sql.Open(\"postgres\", dsn)`, as the README), %d connections; `CreateTable`; `AcquireContext`, `ReleaseContext`. A waiter whose try fails retries after a whole lease; a heartbeat goroutine per held lock", poolSize)},
			server:          "PostgreSQL",
			holder:          openPglockHolder,
			stmtsPerRenewal: 2, // nextval, then the UPDATE
		},
		{
			lib: lib{name: "leash on MySQL", open: openLeashStore(env, newMySQLStore),
				settings: leashSettings(fmt.Sprintf("`mysqlstore.New(db, nil)` on go-sql-driver/mysql, %d connections (waiters poll every quarter of the time since a poll last saw the name change, 10 ms to 1 s; renewal batches of 500)", poolSize))},
			server: "MariaDB",
			peer:   "go-mysql-lock",
			holder: leashStoreHolder(newMySQLStore),
		},
		{
			lib: lib{name: "go-mysql-lock", open: func(string) (locker, error) { return newGoMySQLLock(env, poolSize) },
				settings: fmt.Sprintf("`gomysqllock.NewMysqlLocker(db)` as its README: defaults (`GET_LOCK` on a connection of its own per held lock, kept by a ping every 1 s); %d connections; "+
					"`ObtainTimeoutContext(ctx, name, %d)` (a year), as its README advises where `GET_LOCK`'s -1 (wait for ever) is refused: the MariaDB above returns NULL for it, so `ObtainContext` fails there; `Release`", poolSize, gomysqllockTimeout)},
			server:          "MariaDB",
			holder:          openGoMySQLLockHolder,
			stmtsPerRenewal: 1, // the ping
			renewN:          100,
			renewNote: "one connection per held lock: 10,000 locks need 10,000 connections (this server allows 500, MariaDB's default 151), so it is measured at 100 locks; " +
				"it renews nothing: the lock lives as long as its connection, which a ping keeps",
		},
		{
			lib: lib{name: "leash on etcd", open: openLeashStore(env, newEtcdStore),
				settings: leashSettings("`etcdstore.New(cli, nil)` on a `clientv3.Client` of its own (one gRPC connection; watch wake-ups; one etcd lease per Client kept alive by the watchdog)")},
			server: "etcd",
			peer:   "etcd concurrency.Mutex",
			holder: leashStoreHolder(newEtcdStore),
			big:    true,
		},
		{
			lib: lib{name: "etcd concurrency.Mutex", open: func(string) (locker, error) { return newEtcdMutex(env, 0) },
				settings: "etcd's own `go.etcd.io/etcd/client/v3/concurrency`, as its docs: `concurrency.NewSession(cli)` (default TTL 60 s, kept alive by clientv3's background keep-alive every TTL/3), `concurrency.NewMutex(session, \"/bench-etcd-mutex/\"+name)`, `Lock(ctx)`, `Unlock(ctx)`; one Session per client, on a `clientv3.Client` of its own. " +
					fmt.Sprintf("In the renewal run the Session's TTL is %d s (`concurrency.WithTTL`), so that it is kept alive every second like the others", etcdMutexRenewTTL)},
			server: "etcd",
			holder: openEtcdMutexHolder,
			big:    true,
		},
		{
			lib: lib{name: "leash on ZooKeeper", open: openLeashStore(env, newZkStore),
				settings: leashSettings("`zkstore.Dial([]string{addr}, nil)`: one ZooKeeper session per Client (default session timeout 40 s), its locks ephemeral nodes of it, kept alive by the watchdog with one write per interval; watch wake-ups")},
			server: "ZooKeeper",
			holder: leashStoreHolder(newZkStore),
			big:    true,
		},
	}
}

// leash on each store

type storeMaker func(env *storeEnv) (store driver.Store, closePool func(), err error)

func newMemStore(env *storeEnv) (driver.Store, func(), error) {
	return env.mem, func() {}, nil
}

func newRedisStore(env *storeEnv) (driver.Store, func(), error) {
	rdb := goRedis(env.redis)
	return redisstore.New(rdb, nil), func() { _ = rdb.Close() }, nil
}

func newPgPool(url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = poolSize
	return pgxpool.NewWithConfig(context.Background(), cfg)
}

func newPgStore(env *storeEnv) (driver.Store, func(), error) {
	pool, err := newPgPool(env.pgURL)
	if err != nil {
		return nil, nil, err
	}
	return pgstore.New(pool, nil), pool.Close, nil
}

func openSQL(driverName, dsn string, conns int) (*sql.DB, error) {
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, nil
}

func newMySQLStore(env *storeEnv) (driver.Store, func(), error) {
	db, err := openSQL("mysql", env.myDSN, poolSize)
	if err != nil {
		return nil, nil, err
	}
	return mysqlstore.New(db, nil), func() { _ = db.Close() }, nil
}

func newEtcdClient(env *storeEnv) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{env.etcd}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
}

func newEtcdStore(env *storeEnv) (driver.Store, func(), error) {
	cli, err := newEtcdClient(env)
	if err != nil {
		return nil, nil, err
	}
	return etcdstore.New(cli, nil), func() { _ = cli.Close() }, nil
}

func newZkStore(env *storeEnv) (driver.Store, func(), error) {
	s, err := zkstore.Dial([]string{env.zk}, nil)
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

// storeLocker is a leash Client on its own store (and pool), as one process
// of the application would have.
type storeLocker struct {
	c         *leash.Client
	closePool func()
}

func newStoreLocker(env *storeEnv, mk storeMaker, opts *leash.Options) (*storeLocker, error) {
	st, closePool, err := mk(env)
	if err != nil {
		return nil, err
	}
	c, err := leash.New(st, opts)
	if err != nil {
		closePool()
		return nil, err
	}
	return &storeLocker{c: c, closePool: closePool}, nil
}

func openLeashStore(env *storeEnv, mk storeMaker) func(string) (locker, error) {
	return func(string) (locker, error) { return newStoreLocker(env, mk, nil) }
}

func (l *storeLocker) lock(ctx context.Context, name string) (func() error, error) {
	h, err := l.c.Mutex(name).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return func() error { return h.Unlock(ctx) }, nil
}

func (l *storeLocker) close() error {
	err := l.c.Close() // closes the store (its listener, pollers), not the pool
	l.closePool()
	return err
}

// pglock

type pglockLocker struct {
	c  *pglock.Client
	db *sql.DB
}

func newPglock(env *storeEnv, conns int) (*pglockLocker, error) {
	db, err := openSQL("postgres", env.pgURL, conns)
	if err != nil {
		return nil, err
	}
	c, err := pglock.New(db, pglock.WithLeaseDuration(pglockLease), pglock.WithHeartbeatFrequency(pglockHeartbeat))
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &pglockLocker{c: c, db: db}, nil
}

func (p *pglockLocker) lock(ctx context.Context, name string) (func() error, error) {
	l, err := p.acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return func() error { return p.c.ReleaseContext(context.WithoutCancel(ctx), l) }, nil
}

// acquire waits for name until ctx ends. The heartbeat of the lock it
// returns runs until the lock is released: by default pglock runs it under
// the context given to Acquire, which here bounds only the wait.
func (p *pglockLocker) acquire(ctx context.Context, name string) (*pglock.Lock, error) {
	return p.c.AcquireContext(ctx, name, pglock.WithCustomHeartbeatContext(context.Background()))
}

func (p *pglockLocker) close() error { return p.db.Close() }

// etcd's concurrency.Mutex

// etcdMutexRenewTTL is the Session TTL, in seconds, of concurrency.Mutex in
// the renewal run: clientv3 keeps a lease alive every TTL/3, so every second.
const etcdMutexRenewTTL = 3

// etcdMutexPrefix is the key prefix of concurrency.Mutex's locks.
const etcdMutexPrefix = "/bench-etcd-mutex/"

type etcdMutexLocker struct {
	cli *clientv3.Client
	s   *concurrency.Session
}

// newEtcdMutex opens a client and a Session of ttl seconds (0: the default).
func newEtcdMutex(env *storeEnv, ttl int) (*etcdMutexLocker, error) {
	cli, err := newEtcdClient(env)
	if err != nil {
		return nil, err
	}
	var opts []concurrency.SessionOption
	if ttl > 0 {
		opts = append(opts, concurrency.WithTTL(ttl))
	}
	s, err := concurrency.NewSession(cli, opts...)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return &etcdMutexLocker{cli: cli, s: s}, nil
}

func (e *etcdMutexLocker) acquire(ctx context.Context, name string) (*concurrency.Mutex, error) {
	m := concurrency.NewMutex(e.s, etcdMutexPrefix+name)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

func (e *etcdMutexLocker) lock(ctx context.Context, name string) (func() error, error) {
	m, err := e.acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return func() error { return m.Unlock(context.WithoutCancel(ctx)) }, nil
}

func (e *etcdMutexLocker) close() error {
	err := e.s.Close() // revokes the lease: every lock of the Session goes
	if cerr := e.cli.Close(); err == nil {
		err = cerr
	}
	return err
}

// go-mysql-lock

type goMySQLLocker struct {
	l  *gomysqllock.MysqlLocker
	db *sql.DB
}

func newGoMySQLLock(env *storeEnv, conns int) (*goMySQLLocker, error) {
	db, err := openSQL("mysql", env.myDSN, conns)
	if err != nil {
		return nil, err
	}
	return &goMySQLLocker{l: gomysqllock.NewMysqlLocker(db), db: db}, nil
}

// gomysqllockTimeout is go-mysql-lock's GET_LOCK timeout, in seconds: a
// year, for "wait until ctx ends" (see storeLibs).
const gomysqllockTimeout = 365 * 24 * 60 * 60

func (g *goMySQLLocker) lock(ctx context.Context, name string) (func() error, error) {
	l, err := g.l.ObtainTimeoutContext(ctx, name, gomysqllockTimeout)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (g *goMySQLLocker) close() error { return g.db.Close() }

// holders for the renewal runs

type renewObserver struct {
	mu     sync.Mutex
	on     bool
	rounds []leash.Event
	lost   map[string]int // "reason: first error" → locks lost so
}

// Observe keeps the renewal rounds while on, and counts the locks lost by
// reason and error.
func (o *renewObserver) Observe(e leash.Event) {
	if e.Op == leash.OpLost {
		why := e.Reason.String()
		if e.Err != nil {
			// Names and numbers (lock names, lease ids) out, so that one
			// cause is one line.
			why += ": " + lossDetail.ReplaceAllString(e.Err.Error(), "…")
		}
		o.mu.Lock()
		if o.lost == nil {
			o.lost = map[string]int{}
		}
		o.lost[why]++
		o.mu.Unlock()
		return
	}
	if e.Op != leash.OpRenewed {
		return
	}
	o.mu.Lock()
	if o.on {
		o.rounds = append(o.rounds, e)
	}
	o.mu.Unlock()
}

// lossDetail matches what differs between the errors of one cause.
var lossDetail = regexp.MustCompile(`"[^"]*"|[0-9a-f]*[0-9][0-9a-f]*`)

// losses returns the locks lost so far, by reason and error.
func (o *renewObserver) losses() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.lost)
}

func (o *renewObserver) record(on bool) []leash.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.on = on
	r := o.rounds
	if on {
		o.rounds = nil
	}
	return r
}

func leashStoreHolder(mk storeMaker) func(*storeEnv, *renewObserver) (holder, error) {
	return func(env *storeEnv, o *renewObserver) (holder, error) {
		l, err := newStoreLocker(env, mk, &leash.Options{Lease: renewLease, Observer: o})
		if err != nil {
			return nil, err
		}
		return leashHolds(l.c, func() { _ = l.close() }), nil
	}
}

// The peers keep their locks with their own liveness signal: pglock's
// heartbeat stops when it misses (the lock is then lost), go-mysql-lock's
// lock context ends when its ping fails.

func openPglockHolder(env *storeEnv, _ *renewObserver) (holder, error) {
	p, err := newPglock(env, poolSize)
	if err != nil {
		return nil, err
	}
	return &heldLocks[*pglock.Lock]{
		obtain:  p.acquire,
		lost:    (*pglock.Lock).IsReleased,
		release: func(l *pglock.Lock) { _ = p.c.Release(l) },
		closeFn: func() { _ = p.close() },
	}, nil
}

// openEtcdMutexHolder holds concurrency.Mutexes of one Session, which is
// lost when its lease is: the Session's Done channel is then closed.
func openEtcdMutexHolder(env *storeEnv, _ *renewObserver) (holder, error) {
	e, err := newEtcdMutex(env, etcdMutexRenewTTL)
	if err != nil {
		return nil, err
	}
	return &heldLocks[*concurrency.Mutex]{
		obtain: e.acquire,
		lost: func(*concurrency.Mutex) bool {
			select {
			case <-e.s.Done():
				return true
			default:
				return false
			}
		},
		release: func(m *concurrency.Mutex) { _ = m.Unlock(context.Background()) },
		closeFn: func() { _ = e.close() },
	}, nil
}

func openGoMySQLLockHolder(env *storeEnv, _ *renewObserver) (holder, error) {
	g, err := newGoMySQLLock(env, 0) // one connection per held lock: no bound
	if err != nil {
		return nil, err
	}
	return &heldLocks[*gomysqllock.Lock]{
		obtain: func(ctx context.Context, name string) (*gomysqllock.Lock, error) {
			return g.l.ObtainTimeoutContext(ctx, name, gomysqllockTimeout)
		},
		lost:    func(l *gomysqllock.Lock) bool { return l.GetContext().Err() != nil },
		release: func(l *gomysqllock.Lock) { _ = l.Release() },
		closeFn: func() { _ = g.close() },
	}, nil
}
