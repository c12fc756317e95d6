package zkstore

import (
	"context"
	"math"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

// AddRunsOps is AddRuns's multi-operation as it would be sent now.
func (s *Store) AddRunsOps(ctx context.Context, job string, runs []driver.RunRecord, keep int) ([]any, error) {
	return s.addRunsOps(ctx, job, runs, keep)
}

// Multi runs ops on the Store's session.
func (s *Store) Multi(ctx context.Context, ops []any) error { return s.multi(ctx, ops) }

// AnyVersion is ops with every delete made at any version: the negative
// control of the moves' version check.
func AnyVersion(ops []any) []any {
	out := make([]any, len(ops))
	for i, op := range ops {
		if d, ok := op.(*zk.DeleteRequest); ok {
			c := *d
			c.Version = -1
			op = &c
		}
		out[i] = op
	}
	return out
}

// IgnoreWatchEvents makes Renew take a hold node's watch as proof that the
// node is there even after the watch fired: the negative control of the
// watches.
func (s *Store) IgnoreWatchEvents() { s.ignoreEvents = true }

// SlowChecks returns how many requests Renew has checked by reading their
// nodes, rather than settled by their watches.
func (s *Store) SlowChecks() int64 { return s.slow.Load() }

// Silence makes every request of client's session that the Store has heard
// so far look d older: as if the session had been silent for d.
func (s *Store) Silence(client string, d time.Duration) {
	cs := s.sessionOf(client)
	cs.heard.mu.Lock()
	defer cs.heard.mu.Unlock()
	for i := range cs.heard.n {
		cs.heard.e[i].sent -= d
		if cs.heard.e[i].answered > math.MinInt64+d { // the session's creation: answered long ago
			cs.heard.e[i].answered -= d
		}
	}
}

// TrustQuiet makes every keep-alive and grant count as proven, however long
// the session was silent before it: the negative control of the Store's
// check that the leader heard of the session recently enough.
func (s *Store) TrustQuiet() { s.trustQuiet = true }

// Reproved returns how many grants wrote on their session and waited a
// tick first, their session silent too long.
func (s *Store) Reproved() int64 { return s.reproved.Load() }

// HeardAgo returns how long ago the latest request of client's session
// that the Store recorded was sent.
func (s *Store) HeardAgo(client string) time.Duration {
	cs := s.sessionOf(client)
	cs.heard.mu.Lock()
	defer cs.heard.mu.Unlock()
	return mono() - cs.heard.e[cs.heard.n-1].sent
}
