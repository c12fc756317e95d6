package testserver

import (
	"errors"
	"os"
)

// TB is the part of testing.TB the helpers use. It is declared here so that
// the package does not import testing (the demo uses it too).
type TB interface {
	Helper()
	Cleanup(func())
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
}

// RequireServers reports whether tests must fail, not skip, when a server
// binary is missing: LEASH_REQUIRE_SERVERS=1, as CI sets it.
func RequireServers() bool { return os.Getenv("LEASH_REQUIRE_SERVERS") == "1" }

// NewRedis starts a redis-server for the test and kills it at cleanup
// (SIGCONT first, so a paused server never leaks). When redis-server is not
// installed it skips the test, or fails it under LEASH_REQUIRE_SERVERS=1.
func NewRedis(t TB, opts RedisOptions) *Redis {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	r, err := StartRedis(opts)
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(r.Close)
	return r
}

// NewZooKeeper starts a standalone ZooKeeper server for the test and kills
// it at cleanup. When ZooKeeper or java is not installed it skips the test,
// or fails it under LEASH_REQUIRE_SERVERS=1.
func NewZooKeeper(t TB) *ZooKeeper {
	t.Helper()
	z, err := StartZooKeeper(t.TempDir())
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(z.Close)
	return z
}

// NewZooKeeperEnsemble starts a three-server ZooKeeper ensemble for the test
// and kills it at cleanup, skipping or failing as NewZooKeeper does.
func NewZooKeeperEnsemble(t TB) *Ensemble {
	t.Helper()
	return NewZooKeeperEnsembleVia(t, nil)
}

// NewZooKeeperEnsembleVia is NewZooKeeperEnsemble with the members' links to
// each other routed through peer (see StartZooKeeperEnsembleVia).
func NewZooKeeperEnsembleVia(t TB, peer func(from, to int, addr string) (string, error)) *Ensemble {
	t.Helper()
	e, err := StartZooKeeperEnsembleVia(t.TempDir(), peer)
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(e.Close)
	return e
}

// skipOrFail skips the test when err says a server is not installed (unless
// LEASH_REQUIRE_SERVERS=1), and fails it otherwise.
func skipOrFail(t TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNotInstalled) && !RequireServers() {
		t.Skipf("%v (set LEASH_REQUIRE_SERVERS=1 to fail instead)", err)
	}
	t.Fatalf("%v", err)
}
