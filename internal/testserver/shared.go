package testserver

import (
	"errors"
	"sync"
)

// Shared is a redis-server that a test package starts on first use and
// stops in TestMain, for the tests that inject no faults into the server
// itself. The zero value is ready to use.
type Shared struct {
	once sync.Once
	srv  *Redis
	err  error
}

// Redis returns the server, starting it on the first call. When redis-server
// is not installed it skips the test, or fails it under
// LEASH_REQUIRE_SERVERS=1, like NewRedis.
func (s *Shared) Redis(t TB) *Redis {
	t.Helper()
	s.once.Do(func() { s.srv, s.err = StartRedis(RedisOptions{}) })
	if s.err != nil {
		if errors.Is(s.err, ErrNotInstalled) && !RequireServers() {
			t.Skipf("%v (set LEASH_REQUIRE_SERVERS=1 to fail instead)", s.err)
		}
		t.Fatalf("%v", s.err)
	}
	return s.srv
}

// Close stops the server if it was started.
func (s *Shared) Close() {
	if s.srv != nil {
		s.srv.Close()
	}
}

// SharedZooKeeper is a standalone ZooKeeper server that a test package
// starts on first use and stops in TestMain. The zero value is ready to use.
type SharedZooKeeper struct {
	once sync.Once
	srv  *ZooKeeper
	err  error
}

// ZooKeeper returns the server, starting it on the first call; it skips or
// fails the test as NewZooKeeper does when ZooKeeper is not installed.
func (s *SharedZooKeeper) ZooKeeper(t TB) *ZooKeeper {
	t.Helper()
	s.once.Do(func() { s.srv, s.err = StartZooKeeper("") })
	if s.err != nil {
		skipOrFail(t, s.err)
	}
	return s.srv
}

// Close stops the server if it was started.
func (s *SharedZooKeeper) Close() {
	if s.srv != nil {
		s.srv.Close()
	}
}
