package testserver

import "sync"

// Shared is a redis-server that a test package starts on first use and
// stops in TestMain, for the tests that inject no faults into the server
// itself. The zero value is ready to use.
type Shared struct{ shared[*Redis] }

// Redis returns the server, starting it on the first call. When redis-server
// is not installed it skips the test, or fails it under
// LEASH_REQUIRE_SERVERS=1, like NewRedis.
func (s *Shared) Redis(t TB) *Redis {
	t.Helper()
	return s.get(t, func() (*Redis, error) { return StartRedis(RedisOptions{}) })
}

// SharedZooKeeper is a standalone ZooKeeper server that a test package
// starts on first use and stops in TestMain. The zero value is ready to use.
type SharedZooKeeper struct{ shared[*ZooKeeper] }

// ZooKeeper returns the server, starting it on the first call; it skips or
// fails the test as NewZooKeeper does when ZooKeeper is not installed.
func (s *SharedZooKeeper) ZooKeeper(t TB) *ZooKeeper {
	t.Helper()
	return s.get(t, func() (*ZooKeeper, error) { return StartZooKeeper("") })
}

// shared is a server of type S that a test package starts on first use and
// stops in TestMain (Close); the Shared types embed it.
type shared[S interface{ Close() }] struct {
	once    sync.Once
	srv     S
	err     error
	started bool
}

// get returns the server, starting it with start on the first call. When
// its binary is not installed it skips the test, or fails it under
// LEASH_REQUIRE_SERVERS=1.
func (s *shared[S]) get(t TB, start func() (S, error)) S {
	t.Helper()
	s.once.Do(func() {
		s.srv, s.err = start()
		s.started = s.err == nil
	})
	if s.err != nil {
		skipOrFail(t, s.err)
	}
	return s.srv
}

// Close stops the server if it was started.
func (s *shared[S]) Close() {
	if s.started {
		s.srv.Close()
	}
}
