package zkstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

// A clientSession is what the Store last knew of a client's session node,
// Root/clients/<client id>: an ephemeral znode of the Store's ZooKeeper
// session whose modification time is the client's last keep-alive, by the
// server's clock.
type clientSession struct {
	epoch   uint64 // names the session: every lock node of it carries the epoch
	ttl     int64  // the longest lease of a lock it kept, in milliseconds
	version int32  // the node's data version
	mtime   int64  // the node's modification time, in milliseconds
	zkID    int64  // the ZooKeeper session the node belongs to
	// dead marks a lapsed session whose node could not be deleted: it is
	// deleted before the client's session is used again.
	dead bool
}

// cached returns the Store's record of client's session node, or nil.
func (s *Store) cached(client string) *clientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.sessions[client]
	if cs != nil && cs.zkID != s.conn.SessionID() {
		// The ZooKeeper session expired, and every ephemeral node with it.
		delete(s.sessions, client)
		return nil
	}
	return cs
}

// remember records cs as client's session node (nil forgets it).
func (s *Store) remember(client string, cs *clientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs == nil {
		delete(s.sessions, client)
		return
	}
	s.sessions[client] = cs
}

// session returns client's session node, from the Store's record or read
// from the server; nil when there is none.
func (s *Store) session(ctx context.Context, client string) (*clientSession, error) {
	cs := s.cached(client)
	if cs == nil {
		return s.readSession(ctx, client)
	}
	if cs.dead {
		err := call0(ctx, func() error { return s.conn.Delete(s.clientPath(client), cs.version) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return nil, fmt.Errorf("zkstore: delete the lapsed session node of client %q: %w", client, err)
		}
		s.remember(client, nil)
		return s.readSession(ctx, client)
	}
	return cs, nil
}

// readSession reads client's session node from the server and records it.
func (s *Store) readSession(ctx context.Context, client string) (*clientSession, error) {
	path := s.clientPath(client)
	data, st, err := getData(ctx, s, path)
	if errors.Is(err, zk.ErrNoNode) {
		s.remember(client, nil)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zkstore: read session node %s: %w", path, err)
	}
	epoch, ttl, ok := parseSessionData(data)
	if !ok {
		return nil, fmt.Errorf("zkstore: session node %s holds %s, not a leash session", path, describeData(data))
	}
	cs := &clientSession{epoch: epoch, ttl: ttl, version: st.Version, mtime: st.Mtime, zkID: st.EphemeralOwner}
	s.remember(client, cs)
	return cs, nil
}

// lapsed reports whether client's session cs had ended before now (by the
// server's clock): more than its time to live had passed since its last
// keep-alive and its last grant, so every lock it kept had expired.
func (s *Store) lapsed(client string, cs *clientSession, now int64) bool {
	s.mu.Lock()
	g := s.grants[client]
	s.mu.Unlock()
	since := cs.mtime
	if g.epoch == cs.epoch {
		since = max(since, g.at)
	}
	return now-since > cs.ttl
}

// lastGrant is when a session last granted or refreshed a lock.
type lastGrant struct {
	epoch uint64
	at    int64 // server time, in milliseconds
}

// granted records that client's session of epoch granted or refreshed a
// lock at (server time): every lock of a session lasts its lease from its
// grant or from the session's last keep-alive, whichever is later.
func (s *Store) granted(client string, epoch uint64, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.grants[client]; g.epoch != epoch || g.at < at {
		s.grants[client] = lastGrant{epoch: epoch, at: at}
	}
}

// KeepAlive implements [driver.SessionStore]: it extends every lock of
// client, each for its own lease from now, by setting the data of the
// client's session node (one write, answered only by a live ZooKeeper
// session). It fails at once, outcome unknown, while the Store is not
// connected; it returns an error matching driver.ErrNotHeld when the client
// has no session here (it never held a lock here, or its ZooKeeper session
// expired and every lock with it), and when its last keep-alive is older
// than its longest lease, so that every lock it kept may have been taken.
func (s *Store) KeepAlive(ctx context.Context, client string) error {
	if st := s.conn.State(); st != zk.StateHasSession {
		return fmt.Errorf("zkstore: keep-alive of client %q: not connected to ZooKeeper (%v)", client, st)
	}
	path := s.clientPath(client)
	for range 5 {
		cs, err := s.session(ctx, client)
		if err != nil {
			return fmt.Errorf("zkstore: keep-alive of client %q: %w", client, err)
		}
		if cs == nil {
			return fmt.Errorf("zkstore: keep-alive of client %q: %w: it has no session (its ZooKeeper session expired, or it holds no lock here)", client, driver.ErrNotHeld)
		}
		st, err := call(ctx, func() (*zk.Stat, error) {
			return s.conn.Set(path, sessionData(cs.epoch, cs.ttl), cs.version)
		})
		switch {
		case errors.Is(err, zk.ErrBadVersion): // an acquire refreshed it: read it again
			s.remember(client, nil)
			continue
		case errors.Is(err, zk.ErrNoNode):
			s.remember(client, nil)
			return fmt.Errorf("zkstore: keep-alive of client %q: %w: its session ended (its ZooKeeper session expired)", client, driver.ErrNotHeld)
		case err != nil:
			return fmt.Errorf("zkstore: keep-alive of client %q: %w", client, err)
		}
		if s.lapsed(client, cs, st.Mtime) {
			s.endSession(ctx, client, st.Version)
			return fmt.Errorf("zkstore: keep-alive of client %q: %w: no keep-alive for %v, longer than its longest lease %v: every lock it kept has expired",
				client, driver.ErrNotHeld, time.Duration(st.Mtime-cs.mtime)*time.Millisecond, time.Duration(cs.ttl)*time.Millisecond)
		}
		s.remember(client, &clientSession{epoch: cs.epoch, ttl: cs.ttl, version: st.Version, mtime: st.Mtime, zkID: cs.zkID})
		return nil
	}
	return fmt.Errorf("zkstore: keep-alive of client %q: its session node kept changing", client)
}

// endSession deletes a lapsed session's node (at version), so that its
// epoch, and every lock node of it, is dead for good. When that fails, the
// node is marked dead, and deleted before the client's session is used
// again.
func (s *Store) endSession(ctx context.Context, client string, version int32) {
	s.mu.Lock()
	delete(s.grants, client)
	s.mu.Unlock()
	err := call0(ctx, func() error { return s.conn.Delete(s.clientPath(client), version) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		s.remember(client, &clientSession{dead: true, version: version, zkID: s.conn.SessionID()})
		return
	}
	s.remember(client, nil)
}
