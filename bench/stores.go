package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/mysqlstore"
	"github.com/leash-go/leash/pgstore"
	"github.com/redis/go-redis/v9"
)

// storesConfig is the stores section's part of the command line.
type storesConfig struct {
	runs        int
	uncontended time.Duration
	handoffs    int           // hand-offs per library per run, at most
	budget      time.Duration // per library per run: fewer hand-offs when they are slow
	renewN      int           // locks held in the renewal run
	renewBig    int           // locks held by Redis and the session stores
	settle      time.Duration
	window      time.Duration
	pollN       int // hand-offs per row of the mysqlstore polling table
	out         string
	renewalOnly string // when set, only the renewal case of the libraries whose name contains it
}

// storesGoroutines are the uncontended runs' goroutine counts.
var storesGoroutines = []int{1, 16}

// storesGap is how long a holder keeps the hot name once its waiter waits.
var storesGap = uniformGap(20*time.Millisecond, 300*time.Millisecond)

// pollRow is one row of the mysqlstore polling table: the hand-off after the
// waiter has waited a given time.
type pollRow struct {
	what     string
	gap      time.Duration
	same     bool
	handoffs []time.Duration
}

// storesResults are everything the stores section measured.
type storesResults struct {
	started     time.Time
	leash       string
	redis       string
	postgres    string
	mariadb     string
	etcd        string
	zookeeper   string
	libs        []storeLib
	uncontended map[int][]map[string]uncontendedResult // goroutines → run → lib
	handoff     []map[string]handoffResult             // run → lib
	poll        []pollRow
	renewal     map[string]storeRenewal
	elapsed     time.Duration
}

// servers are the servers the stores section starts, and an admin
// connection to each.
type servers struct {
	redis *testserver.Redis
	pg    *testserver.Postgres
	my    *testserver.MariaDB
	etcd  *testserver.Etcd
	zk    *testserver.ZooKeeper
	rdb   *redis.Client
	pgc   *pgx.Conn
	mydb  *sql.DB
}

func (s *servers) close() {
	if s.rdb != nil {
		_ = s.rdb.Close()
	}
	if s.pgc != nil {
		_ = s.pgc.Close(context.Background())
	}
	if s.mydb != nil {
		_ = s.mydb.Close()
	}
	if s.redis != nil {
		s.redis.Close()
	}
	if s.pg != nil {
		s.pg.Close()
	}
	if s.my != nil {
		s.my.Close()
	}
	if s.etcd != nil {
		s.etcd.Close()
	}
	if s.zk != nil {
		s.zk.Close()
	}
}

// startServers starts redis-server, PostgreSQL, MariaDB, etcd and ZooKeeper on loopback
// ports, each in a directory of its own, and creates the lock tables.
func startServers(ctx context.Context, env *storeEnv, res *storesResults) (*servers, error) {
	s := &servers{}
	var err error
	if s.redis, err = testserver.StartRedis(testserver.RedisOptions{}); err != nil {
		return s, fmt.Errorf("redis-server: %w", err)
	}
	env.redis = s.redis.Addr
	s.rdb = redis.NewClient(&redis.Options{Addr: env.redis})
	info, err := s.rdb.Info(ctx, "server").Result()
	if err != nil {
		return s, err
	}
	res.redis = infoField(info, "redis_version")

	// Durable (fsync and full-page writes on) but with synchronous_commit
	// off, which is what MariaDB's innodb_flush_log_at_trx_commit=2 (as
	// testserver starts it) does: a commit is written at once and flushed
	// within a second. pg_stat_statements counts the statements.
	if s.pg, err = testserver.StartPostgres(testserver.PostgresOptions{Durable: true,
		Args: []string{"synchronous_commit=off", "shared_preload_libraries=pg_stat_statements"}}); err != nil {
		return s, fmt.Errorf("postgres: %w", err)
	}
	env.pgURL = s.pg.URL()
	if s.pgc, err = pgx.Connect(ctx, env.pgURL); err != nil {
		return s, err
	}
	if _, err := s.pgc.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return s, err
	}
	if err := s.pgc.QueryRow(ctx, "SHOW server_version").Scan(&res.postgres); err != nil {
		return s, err
	}
	pool, err := newPgPool(env.pgURL)
	if err != nil {
		return s, err
	}
	err = pgstore.New(pool, nil).Migrate(ctx)
	pool.Close()
	if err != nil {
		return s, fmt.Errorf("pgstore: migrate: %w", err)
	}
	pl, err := newPglock(env, 1)
	if err != nil {
		return s, err
	}
	err = pl.c.CreateTable()
	_ = pl.close()
	if err != nil {
		return s, fmt.Errorf("pglock: create table: %w", err)
	}

	if s.my, err = testserver.StartMariaDB(""); err != nil {
		return s, fmt.Errorf("mariadbd: %w", err)
	}
	if s.mydb, err = openSQL("mysql", s.my.DSN("", ""), 1); err != nil {
		return s, err
	}
	if _, err := s.mydb.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS bench"); err != nil {
		return s, err
	}
	if err := s.mydb.QueryRowContext(ctx, "SELECT VERSION()").Scan(&res.mariadb); err != nil {
		return s, err
	}
	env.myDSN = s.my.DSN("bench", "")
	db, err := openSQL("mysql", env.myDSN, 2)
	if err != nil {
		return s, err
	}
	err = mysqlstore.New(db, nil).Migrate(ctx)
	_ = db.Close()
	if err != nil {
		return s, fmt.Errorf("mysqlstore: migrate: %w", err)
	}

	if s.etcd, err = testserver.StartEtcd(testserver.EtcdOptions{}); err != nil {
		return s, fmt.Errorf("etcd: %w", err)
	}
	env.etcd = s.etcd.Endpoint
	if res.etcd, err = etcdVersion(ctx, env.etcd); err != nil {
		return s, err
	}
	if s.zk, err = testserver.StartZooKeeper(""); err != nil {
		return s, fmt.Errorf("zookeeper: %w", err)
	}
	env.zk = s.zk.Addr
	srvr, err := testserver.FourLetterWord(env.zk, "srvr")
	if err != nil {
		return s, err
	}
	// "Zookeeper version: 3.8.0-<commit>, built on …"
	res.zookeeper, _, _ = strings.Cut(strings.TrimPrefix(srvr, "Zookeeper version: "), ",")
	res.zookeeper, _, _ = strings.Cut(res.zookeeper, "-")
	return s, nil
}

// etcdVersion reads the server's version from its /version endpoint.
func etcdVersion(ctx context.Context, endpoint string) (string, error) {
	b, err := httpGet(ctx, endpoint+"/version")
	if err != nil {
		return "", err
	}
	var v struct {
		Server string `json:"etcdserver"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return "", fmt.Errorf("etcd /version: %w", err)
	}
	return v.Server, nil
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// etcdRequests returns the gRPC messages etcd has received from clients (a
// unary call once, each message of a stream once: each keep-alive of a
// LeaseKeepAlive stream), from its Prometheus metrics.
func etcdRequests(ctx context.Context, endpoint string) (int64, error) {
	b, err := httpGet(ctx, endpoint+"/metrics")
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "grpc_server_msg_received_total{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("etcd metrics: %q: %w", line, err)
		}
		total += v
	}
	return int64(total), nil
}

// zkPackets returns the packets ZooKeeper has received from clients
// (requests and pings; not the four-letter words) from "mntr".
func zkPackets(addr string) (int64, error) {
	out, err := testserver.FourLetterWord(addr, "mntr")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "zk_packets_received"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("zookeeper mntr: no zk_packets_received in %q", out)
}

// counter returns the statement and CPU counters of the server sl runs on.
func (s *servers) counter(sl storeLib) serverCounter {
	switch sl.server {
	case "Redis":
		return serverCounter{
			statements: func(ctx context.Context) (int64, error) {
				st, err := serverStats(ctx, s.rdb)
				return st.scripts, err
			},
			cpu: func() (time.Duration, error) { return procCPU(s.redis.PID(), false) },
		}
	case "PostgreSQL":
		return serverCounter{
			statements: func(ctx context.Context) (int64, error) {
				var n int64
				err := s.pgc.QueryRow(ctx, "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'").Scan(&n)
				return n, err
			},
			cpu: func() (time.Duration, error) { return procCPU(s.pg.PID(), true) },
		}
	case "MariaDB":
		return serverCounter{
			statements: func(ctx context.Context) (int64, error) {
				// Questions counts the statements clients send (a CALL
				// once, not the statements inside it; this SHOW too),
				// Com_admin_commands the pings.
				rows, err := s.mydb.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_admin_commands')")
				if err != nil {
					return 0, err
				}
				defer rows.Close()
				var total int64
				for rows.Next() {
					var (
						k string
						v int64
					)
					if err := rows.Scan(&k, &v); err != nil {
						return 0, err
					}
					total += v
				}
				return total - 1, rows.Err() // less this SHOW
			},
			cpu: func() (time.Duration, error) { return procCPU(s.my.PID(), false) },
		}
	case "etcd":
		return serverCounter{
			statements: func(ctx context.Context) (int64, error) { return etcdRequests(ctx, s.etcd.Endpoint) },
			cpu:        func() (time.Duration, error) { return procCPU(s.etcd.PID(), false) },
		}
	case "ZooKeeper":
		return serverCounter{
			statements: func(context.Context) (int64, error) { return zkPackets(s.zk.Addr) },
			cpu:        func() (time.Duration, error) { return procCPU(s.zk.PID(), false) },
		}
	}
	return serverCounter{}
}

func runStores(cfg storesConfig) error {
	ctx := context.Background()
	res := &storesResults{
		started:     time.Now(),
		leash:       gitDescribe(),
		uncontended: map[int][]map[string]uncontendedResult{},
		renewal:     map[string]storeRenewal{},
	}
	env := &storeEnv{mem: memstore.New()}
	srv, err := startServers(ctx, env, res)
	defer srv.close()
	if err != nil {
		return err
	}
	res.libs = storeLibs(env)
	if cfg.renewalOnly != "" {
		res.libs = slices.DeleteFunc(res.libs, func(sl storeLib) bool { return !strings.Contains(sl.name, cfg.renewalOnly) })
		cfg.runs = 0
	}
	log.Printf("redis-server %s, PostgreSQL %s, MariaDB %s, etcd %s, ZooKeeper %s; %d runs", res.redis, res.postgres, res.mariadb, res.etcd, res.zookeeper, cfg.runs)
	for r := range cfg.runs {
		order := rotated(res.libs, r)
		for _, g := range storesGoroutines {
			m := map[string]uncontendedResult{}
			for _, sl := range order {
				u, err := runUncontended(sl.lib, "", g, cfg.uncontended, fmt.Sprintf("%d:%d", r, g), nil)
				if err != nil {
					return err
				}
				m[sl.name] = u
				log.Printf("run %d  uncontended %2d goroutines  %-20s %8.0f ops/s  p50 %-9s p99 %s",
					r+1, g, sl.name, u.opsPerSec, fmtDur(u.p50), fmtDur(u.p99))
			}
			res.uncontended[g] = append(res.uncontended[g], m)
		}
		m := map[string]handoffResult{}
		for _, sl := range order {
			h, err := runHandoff(sl.lib, "", cfg.handoffs, cfg.budget, storesGap, false, 0, fmt.Sprintf("bench:handoff:%d", r))
			if err != nil {
				return err
			}
			m[sl.name] = h
			log.Printf("run %d  hand-off  %-20s %3d hand-offs  p50 %-9s max %s",
				r+1, sl.name, len(h.handoffs), fmtDur(pct(h.handoffs, 0.5)), fmtDur(pct(h.handoffs, 1)))
		}
		res.handoff = append(res.handoff, m)
	}
	if i := libIndex(res.libs, "leash on MySQL"); i >= 0 && cfg.renewalOnly == "" {
		for _, row := range []pollRow{
			{what: "another client", gap: 50 * time.Millisecond},
			{what: "another client", gap: 500 * time.Millisecond},
			{what: "another client", gap: 1400 * time.Millisecond},
			{what: "another client", gap: 2 * time.Second},
			{what: "the same client (one Store)", gap: 500 * time.Millisecond, same: true},
		} {
			h, err := runHandoff(res.libs[i].lib, "", cfg.pollN, time.Hour, func() time.Duration { return row.gap }, row.same, 0, "bench:poll")
			if err != nil {
				return err
			}
			row.handoffs = h.handoffs
			res.poll = append(res.poll, row)
			log.Printf("mysqlstore hand-off, %s, waited %v: p50 %-9s max %s", row.what, row.gap,
				fmtDur(pct(h.handoffs, 0.5)), fmtDur(pct(h.handoffs, 1)))
		}
	}
	for _, sl := range res.libs {
		n := cfg.renewN
		if sl.big {
			n = cfg.renewBig
		}
		if sl.renewN > 0 {
			n = min(n, sl.renewN)
		}
		rr, err := runStoreRenewal(sl, env, srv.counter(sl), n, cfg.settle, cfg.window)
		if err != nil {
			return fmt.Errorf("%s: renewal: %w", sl.name, err)
		}
		res.renewal[sl.name] = rr
		if rr.short != "" {
			log.Printf("renewal %-20s %s; measuring those", sl.name, rr.short)
		}
		if rr.failed != "" {
			log.Printf("renewal %-20s %6d locks: %s", sl.name, n, rr.failed)
			continue
		}
		log.Printf("renewal %-20s %6d locks: %8.1f statements/s  server cpu %4.0f%%  %4.2f renewals/lock/interval  %5.1f rounds/interval  round p50 %-9s  %6d goroutines  %5.0f heap B/lock (live %5.0f)  (took %v to lock)",
			sl.name, rr.n, rr.stmtsSec, 100*rr.cpu, rr.renewed, rr.rounds, fmtDur(rr.roundP50), rr.goroutines, rr.heapPerLock, rr.livePerLock, rr.acquireTime.Round(time.Millisecond))
	}
	res.elapsed = time.Since(res.started)
	if err := srv.logStatements(ctx); err != nil {
		return err
	}
	if cfg.out == "" {
		return nil
	}
	old, err := os.ReadFile(cfg.out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	before, rest := splitStores(old)
	if len(before) == 0 {
		before = []byte("# Benchmarks: leash and the Go peers\n\n")
	}
	section, err := storesReport(res, cfg)
	if err != nil {
		return err
	}
	_, redlockSection := splitRedlock(rest) // kept: TestRedlock writes it
	if err := os.WriteFile(cfg.out, slices.Concat(before, section, redlockSection), 0o644); err != nil {
		return err
	}
	log.Printf("wrote the stores section of %s", cfg.out)
	return nil
}

// logStatements logs PostgreSQL's costliest statements of the run, for the
// stores' authors (not for BENCHMARKS.md).
func (s *servers) logStatements(ctx context.Context) error {
	rows, err := s.pgc.Query(ctx, `SELECT calls, total_exec_time, mean_exec_time, left(regexp_replace(query, '\s+', ' ', 'g'), 110)
		FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 12`)
	if err != nil {
		return err
	}
	defer rows.Close()
	log.Printf("PostgreSQL statements of the run, costliest first (server time):")
	for rows.Next() {
		var (
			calls       int64
			total, mean float64
			query       string
		)
		if err := rows.Scan(&calls, &total, &mean, &query); err != nil {
			return err
		}
		log.Printf("  %9d calls  %9.0f ms  mean %7.3f ms  %s", calls, total, mean, query)
	}
	return rows.Err()
}

func libIndex(libs []storeLib, name string) int {
	for i, l := range libs {
		if l.name == name {
			return i
		}
	}
	return -1
}
