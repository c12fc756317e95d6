#!/usr/bin/env bash
# Runs every check and test of every leash module against real servers:
# gofmt, a cross-compile for the systems leash supports, go vet, staticcheck,
# and go test with the race detector.
#
# The tests are meant to pass on a slow, busy machine, every time: no test
# may depend on how fast the machine is. ./scripts/stress.sh runs this script
# while every core is kept busy by a CPU burner; run it after touching a test
# that waits for anything.
#
# Servers the tests need are installed with apt-get when missing (as root);
# when one cannot be installed, this fails loudly. Tests never skip a
# missing server here: LEASH_REQUIRE_SERVERS=1 turns a skip into a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK=honnef.co/go/tools/cmd/staticcheck@v0.8.2

say() { printf '\n== %s\n' "$*"; }
die() { printf '\nFAIL: %s\n' "$*" >&2; exit 1; }

# need BINARY PACKAGE: make sure BINARY is on PATH, installing PACKAGE if not.
need() {
	local bin=$1 pkg=$2
	command -v "$bin" >/dev/null 2>&1 && return 0
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		say "installing $pkg (for $bin)"
		if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null; }; then
			die "apt-get could not install $pkg; the tests need $bin"
		fi
	fi
	command -v "$bin" >/dev/null 2>&1 || die "$bin is not installed and could not be installed (apt-get install $pkg, as root); the tests need it"
}

# pg_bin prints the newest PostgreSQL server binaries' directory (Debian
# keeps them off PATH, in /usr/lib/postgresql/<major>/bin), as
# internal/testserver finds them; nothing when there are none.
pg_bin() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r) \
		"$(pg_config --bindir 2>/dev/null)" "$(dirname "$(command -v postgres 2>/dev/null || echo .)")"; do
		[ -x "$d/initdb" ] && [ -x "$d/postgres" ] && { echo "$d"; return 0; }
	done
	return 0
}

need go golang
need redis-server redis-server
if [ -z "$(pg_bin)" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		say "installing postgresql (for initdb and postgres)"
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } ||
			die "apt-get could not install postgresql; the tests need initdb and postgres"
	fi
	[ -n "$(pg_bin)" ] || die "PostgreSQL's initdb and postgres are not installed and could not be installed (apt-get install postgresql, as root); the tests need them"
fi
PATH=$PATH:/usr/sbin # mariadbd lives there; a user's PATH may lack it
need mariadbd mariadb-server
need mariadb-install-db mariadb-server
# ZooKeeper: Debian's zookeeper package, whose jars the tests run (it pulls in a Java runtime).
PATH="$PATH:/usr/share/zookeeper/bin" need zkServer.sh zookeeper
need java default-jre-headless
need etcd etcd-server
export LEASH_REQUIRE_SERVERS=1
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

say "versions"
go version
redis-server --version
"$(pg_bin)/postgres" --version
mariadbd --version
java -version 2>&1 | head -1
etcd --version

say "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
[ -z "$unformatted" ] || die "gofmt would change: $unformatted"

# The go.work modules, relative to the repository root ("." for the root).
modules=()
for dir in $(go list -m -f '{{.Dir}}'); do
	rel=${dir#"$PWD"}; rel=${rel#/}; modules+=("${rel:-.}")
done

# static_checks: builds for every target, go vet and staticcheck.
static_checks() {
	# The CLI builds for the Unix systems people run it on, the library for
	# those and Windows; vet type-checks each target's tests too, so that no
	# Linux-only call creeps in.
	local library=(. ./memstore ./storetest ./redisstore/... ./pgstore/... ./mysqlstore/... ./etcdstore/... ./zkstore/... ./prom/... ./schedule/... ./gocronleash/...)
	local target rel
	for target in darwin/amd64 darwin/arm64 freebsd/amd64 openbsd/amd64 netbsd/amd64; do
		say "build and vet for $target"
		GOOS=${target%/*} GOARCH=${target#*/} go build "${library[@]}" ./cmd/leash/... || die "build for $target failed"
		GOOS=${target%/*} GOARCH=${target#*/} go vet "${library[@]}" ./cmd/leash/... || die "vet for $target failed"
	done
	say "build for windows/amd64 (the library)"
	GOOS=windows GOARCH=amd64 go build "${library[@]}" || die "build for windows/amd64 failed"
	for rel in "${modules[@]}"; do
		say "vet and staticcheck: $rel"
		(cd "$rel" && go vet ./... && go run "$STATICCHECK" ./...) || die "vet or staticcheck failed in $rel"
	done
	# bench/ is its own module outside go.work (the peers it measures must never
	# become leash dependencies): vet (which builds it) and staticcheck it, so
	# that it cannot rot; ./scripts/bench.sh runs it for real.
	say "vet and staticcheck: bench (GOWORK=off)"
	(cd bench && GOWORK=off go vet ./... && GOWORK=off go run "$STATICCHECK" ./...) || die "vet or staticcheck failed in bench"
}

# test_modules REL...: each module's tests under the race detector; every
# module runs, and it fails if any did.
test_modules() {
	local rel failed=0
	for rel in "$@"; do
		say "test: $rel"
		(cd "$rel" && go test -race -shuffle=on -count=1 -timeout 30m ./...) || { printf '\nFAIL: tests failed in %s\n' "$rel"; failed=1; }
	done
	return $failed
}

# zk_scenarios: ZooKeeper's reliability scenarios skip themselves under the
# race detector (go-zookeeper's own data race at a reconnect, zkClientRace in
# reliability/scenario, fails any test binary under -race): run them here
# without it, so that they are never left out.
zk_scenarios() {
	say "test: reliability, ZooKeeper scenarios (without -race)"
	(cd reliability && go test -count=1 -timeout 20m -run '^Test(BaselineContention|RandomPartitions|ReentrantUnderPartitions|HolderPause|ServerPause|ServerRestart|HolderDeath|SkewedClientIsCaught|LeaderKilled)$/^zk$' ./scenario/) ||
		die "ZooKeeper's reliability scenarios failed"
}

# The checks and tests run in three lanes at once. The tests spend most of
# their time waiting (for a lease to end, a server to come back, a partition
# to heal: on a 2-core machine redisstore's took 395 s of wall time and 65 s
# of CPU, reliability's 681 s and 208 s), so the lanes share a small
# runner's cores without starving one another; and the suite is meant to
# pass on a busy machine anyway (./scripts/stress.sh). A lane's output is
# printed whole when the lane ends. LEASH_TEST_LANES=1 runs the lanes one
# after another instead.
#
# The modules named in the first two lanes are the slow ones; every other
# module of go.work runs in the third, so that a new module is never left
# out.
slow_a=(reliability)
slow_b=(redisstore schedule zkstore)
rest=()
for rel in "${modules[@]}"; do
	case " ${slow_a[*]} ${slow_b[*]} " in
	*" $rel "*) ;;
	*) rest+=("$rel") ;;
	esac
done
for rel in "${slow_a[@]}" "${slow_b[@]}"; do
	[ -d "$rel" ] && [[ " ${modules[*]} " == *" $rel "* ]] || die "scripts/test.sh names $rel as a module to test, but go.work has no such module"
done
# A lane goes on after a failed step, so that one run shows every failure;
# static_checks stops at its first, in a subshell of its own.
lane_a() { test_modules "${slow_a[@]}"; }
lane_b() {
	local s=0
	test_modules "${slow_b[@]}" || s=1
	zk_scenarios || s=1
	return $s
}
lane_c() {
	local s=0
	(static_checks) || s=1
	test_modules "${rest[@]}" || s=1
	return $s
}

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=()
# finish NAME STATUS: prints lane NAME's output and records its failure;
# STATUS is an exit status, or "interrupted".
finish() {
	local how=FAILED
	case $2 in
	0) how=passed ;;
	interrupted) how="interrupted; its output so far" ;;
	esac
	printf '\n======== lane %s %s ========\n' "$1" "$how"
	cat "$logs/$1"
	[ "$2" = 0 ] || failed+=("$1")
}
# Every lane runs in the background, in a process group of its own (set -m),
# so that an interrupt reaches this script alone: it then ends the lanes and
# prints what each had written. Steps inside a lane check their own failures:
# a function called left of || or && runs with set -e ignored.
declare -A lane_of=()
stop() {
	trap - INT TERM
	local p
	for p in "${!lane_of[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
	for p in "${!lane_of[@]}"; do
		wait "$p" || true
		finish "${lane_of[$p]}" interrupted
	done
	exit 130
}
trap stop INT TERM
for name in a b c; do
	set -m
	( set -e; "lane_$name" ) </dev/null >"$logs/$name" 2>&1 &
	set +m
	lane_of[$!]=$name
	if [ "${LEASH_TEST_LANES:-3}" = 1 ]; then
		status=0
		wait $! || status=$?
		finish "$name" "$status"
		unset "lane_of[$!]"
	fi
done
if [ ${#lane_of[@]} -gt 0 ]; then
	say "lanes a (${slow_a[*]}), b (${slow_b[*]}, ZooKeeper's scenarios) and c (static checks, then ${rest[*]}) are running; each prints its output when it ends"
fi
while [ ${#lane_of[@]} -gt 0 ]; do
	status=0 pid=
	wait -n -p pid "${!lane_of[@]}" || status=$?
	[ -n "$pid" ] || die "wait returned no lane (status $status)"
	finish "${lane_of[$pid]}" "$status"
	unset "lane_of[$pid]"
done
[ ${#failed[@]} -eq 0 ] || die "lane(s) ${failed[*]} failed; their output is above"
say "all checks and tests passed"
