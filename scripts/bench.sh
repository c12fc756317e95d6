#!/usr/bin/env bash
# Runs the side-by-side benchmark of leash and the Go peers (redsync,
# bsm/redislock, rueidislock) on a redis-server it starts itself, and rewrites
# BENCHMARKS.md and bench/contended-waits.png. Takes about twelve minutes; keep
# the machine otherwise quiet. Flags are passed on, e.g. -runs 3 or -quick.
#
# bench/ is its own module, outside go.work, so that the peers never become
# dependencies of leash: it is built with GOWORK=off and `replace`s the local
# leash modules.
set -euo pipefail
cd "$(dirname "$0")/../bench"
command -v redis-server >/dev/null 2>&1 || { echo "bench: redis-server is not installed (apt-get install redis-server)" >&2; exit 1; }
GOWORK=off exec go run . "$@"
