// Package scenario is leash's reliability suite: real lock servers, real
// holder processes, and faults — partitions, pauses, kills, restarts,
// script-cache flushes, busy scripts — injected while clients contend for
// locks. Each test records a history (package history) and checks it
// (package check); RELIABILITY.md is built from the figures it reports.
//
// The scenarios that apply to every lock server (contention, partitions
// through the fault proxy, holder pause and death, server pause and
// restart, the skewed-client control) run once per backend: a kind of lock
// server with its store — Redis (redisstore), PostgreSQL (pgstore), MariaDB
// (mysqlstore), etcd (etcdstore) and ZooKeeper (zkstore). To add one, add
// an entry to the backends table in backend_test.go; the comment on its
// backend type says what the entry must give and what each scenario expects
// of it. The session stores, etcd and ZooKeeper, are added in
// sessbackend_test.go, with three-member clusters for their own scenarios:
// the leader killed, and the whole cluster killed and restarted. The fenced resource the
// holders write to is always a redis-server. The Redis-specific scenarios
// (script flush and BUSY, the watchdog under latency, the restart modes with
// and without persistence and grace) run on Redis only.
//
// The scenarios are meant to pass on a slow, busy machine, every time: a
// worker's run window starts when the worker is ready (a child process says
// "ready" once its client is built and its servers answer), faults are timed
// from events the test has seen, and the checkers judge what happened, not
// how fast. The repository's scripts/stress.sh runs them with the race
// detector while every core is kept busy.
//
// The code is in the test files; this file only names the package.
package scenario
