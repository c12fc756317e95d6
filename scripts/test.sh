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

# The CLI builds for the Unix systems people run it on, the library for
# those and Windows; vet type-checks each target's tests too, so that no
# Linux-only call creeps in.
library=(. ./memstore ./storetest ./redisstore/... ./pgstore/... ./mysqlstore/... ./etcdstore/... ./zkstore/... ./prom/... ./schedule/... ./gocronleash/...)
for target in darwin/amd64 darwin/arm64 freebsd/amd64 openbsd/amd64 netbsd/amd64; do
	say "build and vet for $target"
	GOOS=${target%/*} GOARCH=${target#*/} go build "${library[@]}" ./cmd/leash/... || die "build for $target failed"
	GOOS=${target%/*} GOARCH=${target#*/} go vet "${library[@]}" ./cmd/leash/... || die "vet for $target failed"
done
say "build for windows/amd64 (the library)"
GOOS=windows GOARCH=amd64 go build "${library[@]}" || die "build for windows/amd64 failed"

# The go.work modules, relative to the repository root ("." for the root).
modules=()
for dir in $(go list -m -f '{{.Dir}}'); do
	rel=${dir#"$PWD"}; rel=${rel#/}; modules+=("${rel:-.}")
done
for rel in "${modules[@]}"; do
	say "vet and staticcheck: $rel"
	(cd "$rel" && go vet ./... && go run "$STATICCHECK" ./...) || die "vet or staticcheck failed in $rel"
done
# bench/ is its own module outside go.work (the peers it measures must never
# become leash dependencies): vet (which builds it) and staticcheck it, so
# that it cannot rot; ./scripts/bench.sh runs it for real.
say "vet and staticcheck: bench (GOWORK=off)"
(cd bench && GOWORK=off go vet ./... && GOWORK=off go run "$STATICCHECK" ./...) || die "vet or staticcheck failed in bench"
for rel in "${modules[@]}"; do
	say "test: $rel"
	(cd "$rel" && go test -race -shuffle=on -count=1 -timeout 30m ./...) || die "tests failed in $rel"
done
# ZooKeeper's reliability scenarios skip themselves under the race detector
# (go-zookeeper's own data race at a reconnect, zkClientRace in
# reliability/scenario, fails any test binary under -race): run them here
# without it, so that they are never left out.
say "test: reliability, ZooKeeper scenarios (without -race)"
(cd reliability && go test -count=1 -timeout 20m -run '^Test(BaselineContention|RandomPartitions|ReentrantUnderPartitions|HolderPause|ServerPause|ServerRestart|HolderDeath|SkewedClientIsCaught|LeaderKilled)$/^zk$' ./scenario/) ||
	die "ZooKeeper's reliability scenarios failed"
say "all checks and tests passed"
