#!/usr/bin/env bash
# Runs the side-by-side benchmark of leash and the Go peers (redsync,
# bsm/redislock, rueidislock) on a redis-server it starts itself, and rewrites
# BENCHMARKS.md (all but its stores section) and bench/contended-waits.png.
# Takes about twelve minutes; keep the machine otherwise quiet. Flags are
# passed on, e.g. -runs 3 or -quick.
#
# With -stores it measures instead leash on memstore, Redis, PostgreSQL,
# MySQL, etcd and ZooKeeper beside the peers (pglock, go-mysql-lock, etcd's
# concurrency.Mutex), on a redis-server, a PostgreSQL, a MariaDB, an etcd and
# a ZooKeeper it starts itself, and rewrites only the stores section of
# BENCHMARKS.md. Takes about ten minutes.
#
# bench/ is its own module, outside go.work, so that the peers never become
# dependencies of leash: it is built with GOWORK=off and `replace`s the local
# leash modules.
set -euo pipefail
cd "$(dirname "$0")/../bench"
command -v redis-server >/dev/null 2>&1 || { echo "bench: redis-server is not installed (apt-get install redis-server)" >&2; exit 1; }
# -stores also needs PostgreSQL, MariaDB, etcd and ZooKeeper (apt-get install
# postgresql mariadb-server etcd-server zookeeper); the programme says which
# is missing.
GOWORK=off exec go run . "$@"
