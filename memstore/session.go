package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/leash-go/leash/driver"
)

// Sessions is a Store whose locks are kept alive by session, as on an etcd
// or ZooKeeper store: it is a [driver.SessionStore], for testing code against
// such a store. Every lock, of every kind, belongs to the session of its
// owner's client (see [driver.OwnerClient]). KeepAlive renews all of a
// client's locks at once, each for the lease it was granted with; Renew only
// checks that each owner still holds its lock, and extends nothing.
//
// A Sessions has every method of a [Store] besides KeepAlive, and is safe
// for concurrent use.
type Sessions struct{ *sessionLocks }

// sessionLocks is the Store a Sessions embeds, unexported: a lock taken
// through it without the Sessions' KeepAlive would never be renewed.
type sessionLocks = Store

// NewSessions returns an empty Sessions.
func NewSessions() *Sessions {
	s := New()
	s.sessions = make(map[string]*session)
	return &Sessions{s}
}

var _ driver.SessionStore = (*Sessions)(nil)

// String names the store in messages.
func (s *Sessions) String() string { return "memstore (sessions)" }

// A session is one client's keep-alive in a Sessions, which, like an etcd
// lease or a ZooKeeper session, lives until its time to live passes without a
// keep-alive, whether or not locks are still attached to it.
//
// Its time to live is the longest lease of any lock it has kept, so it never
// ends while one of its locks can still be held: every lock's lease ends, at
// the latest, when the session does. (An etcd store keeps one lease per lease
// duration; a session here is all of them, and ends when the longest does.)
type session struct {
	ends  time.Time              // when the session ends without a keep-alive
	ttl   time.Duration          // the longest lease of a lock it kept
	locks map[kept]time.Duration // the locks it keeps, each with its own lease
}

// kept is a lock a session keeps alive.
type kept struct {
	kind  driver.Kind // KindMutex for every exclusive kind, KindRead or KindPermit
	name  string
	owner string
}

// keepLocked attaches the lock req was just granted (or refreshed by a
// retry) to its client's session, starting a new session when the client
// has none or its last one ended. It does nothing in a Store from New. The
// caller holds s.mu.
func (s *Store) keepLocked(req driver.Request, now time.Time) {
	if s.sessions == nil {
		return
	}
	client := driver.OwnerClient(req.Owner)
	ss := s.sessions[client]
	if ss == nil || !now.Before(ss.ends) { // every lock of an ended session has expired
		ss = &session{locks: make(map[kept]time.Duration)}
		s.sessions[client] = ss
	}
	k := kept{kind: req.Kind, name: req.Name, owner: req.Owner}
	if k.kind != driver.KindRead && k.kind != driver.KindPermit {
		k.kind = driver.KindMutex
	}
	ss.locks[k] = req.Lease
	ss.ttl = max(ss.ttl, req.Lease)
	if end := now.Add(req.Lease); end.After(ss.ends) {
		ss.ends = end
	}
}

// KeepAlive implements [driver.SessionStore]: it extends every lock client
// still holds to now plus the lease that lock was granted with, and the
// client's session to now plus its time to live.
//
// It returns an error matching driver.ErrNotHeld when client has no session:
// the session's time to live passed without a keep-alive, so every lock it
// kept has expired (or the client never held a lock here). That is when an
// etcd lease is gone (the server revoked it and deleted every key attached to
// it) and when a ZooKeeper session has expired.
//
// A lock released or forced free does not end the session, even when it was
// the last one: neither server ends a lease or a session when the keys or
// nodes attached to it are deleted, and a keep-alive does not tell about
// them. KeepAlive then returns nil, and Renew, which the core still calls for
// each lock, reports such a lock alone (RenewGone). A store that ended a
// session with its last lock would keep the contract too, since no hold is
// left to lose; this one does what the servers do, so that code tested on it
// does not rely on hearing of a forced release from a keep-alive.
func (s *Sessions) KeepAlive(ctx context.Context, client string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[client]
	if ss == nil || !now.Before(ss.ends) {
		delete(s.sessions, client)
		return fmt.Errorf("memstore: keep-alive of client %q: %w: no live session (every lock it kept has expired)", client, driver.ErrNotHeld)
	}
	for k, lease := range ss.locks {
		if !s.get(k.name, now).hold(k.kind, k.owner, now.Add(lease)) {
			delete(ss.locks, k) // released, forced free or expired: kept no more
		}
	}
	ss.ends = now.Add(ss.ttl)
	return nil
}
