#!/usr/bin/env bash
# Runs leash's tests while every core is kept busy by CPU burners (`yes`),
# the way a loaded CI runner or a laptop in use runs them. The suite is meant
# to pass so, every time: no test may depend on how fast the machine is.
#
#   ./scripts/stress.sh                     ./scripts/test.sh, whole, under load
#   ./scripts/stress.sh GO_TEST_ARGS...     go test -race GO_TEST_ARGS under load, e.g.
#   ./scripts/stress.sh -count=20 -run 'TestHolderPause|TestHolderDeath' ./reliability/scenario/
#
# LEASH_STRESS_BURNERS sets the number of burners (default: one per core).
# The burners are killed, by their process IDs, when this script exits.
set -euo pipefail
cd "$(dirname "$0")/.."

burners=${LEASH_STRESS_BURNERS:-$(getconf _NPROCESSORS_ONLN)}
pids=()
stop() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap stop EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$burners"); do
	yes >/dev/null &
	pids+=($!)
done
printf '== %d CPU burners running (pids %s)\n' "$burners" "${pids[*]}"

if [ $# -eq 0 ]; then
	./scripts/test.sh
else
	LEASH_REQUIRE_SERVERS=1 go test -race "$@"
fi
