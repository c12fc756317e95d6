package zkstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

// A clientSession is the ZooKeeper session of one leash Client (one client
// id, see driver.OwnerClient): a connection of its own, whose ephemeral
// nodes are the Client's holds and waiting places. The session is the
// lease: a hold exists while the session lives, and the session ends when
// the Store closes it (Close, or no keep-alive or grant for its longest
// lease, timed by the local monotonic clock) or when the server expires it
// (one session timeout after it last heard from it).
type clientSession struct {
	client string
	conn   *zk.Conn
	// id is the ZooKeeper session's id, the epoch in the names of its
	// nodes; set once the session is established.
	id int64
	// ready is closed once id is set or opening failed (err).
	ready chan struct{}
	err   error

	// watches are the watches on the hold nodes of the session's locks.
	watches heldWatches
	// heard are some of the session's answered requests (see heard.go).
	heard heardLog

	// Guarded by the Store's mu.
	ttl      time.Duration // the longest lease (or wait) the session kept
	deadline time.Time     // when the Store closes it, by the monotonic clock
	timer    *time.Timer
	beat     *time.Timer // the next heartbeat
	ended    bool
}

// live reports whether cs is established and not ended, and is still the
// ZooKeeper session it was: go-zookeeper starts a new session on the same
// connection once the server expired the old one.
func (s *Store) live(cs *clientSession) bool {
	s.mu.Lock()
	ended := cs.ended
	s.mu.Unlock()
	return !ended && cs.id != 0 && cs.conn.SessionID() == cs.id
}

// connected reports whether cs can send a request now; a request made
// while it cannot would wait in go-zookeeper's queue and be sent, late,
// after a reconnect.
func (cs *clientSession) connected() bool {
	return cs.conn.State() == zk.StateHasSession && cs.conn.SessionID() == cs.id
}

// connect opens a connection with a session of its own to the Store's
// servers, with its credentials.
func (s *Store) connect(callback func(zk.Event)) (*zk.Conn, error) {
	if callback == nil {
		callback = func(zk.Event) {}
	}
	conn, _, err := zk.Connect(s.servers, s.requested, zk.WithLogger(log.New(io.Discard, "", 0)),
		zk.WithDialer(s.dialer), zk.WithEventCallback(callback))
	if err != nil {
		return nil, fmt.Errorf("zkstore: connect to %s: %w", strings.Join(s.servers, ","), err)
	}
	return conn, nil
}

// openSession returns client's live session, opening one when it has none
// (its first acquire, or its previous session ended), which the Store keeps
// at least lease unless a grant or keep-alive extends it. It waits until
// the session is established.
func (s *Store) openSession(ctx context.Context, client string, lease time.Duration) (*clientSession, error) {
	for range maxAttempts {
		s.mu.Lock()
		if s.isClosed() {
			s.mu.Unlock()
			return nil, errors.New("zkstore: the Store is closed")
		}
		cs := s.sessions[client]
		opened := cs == nil
		if opened {
			cs = &clientSession{client: client, ready: make(chan struct{})}
			s.sessions[client] = cs
		}
		s.mu.Unlock()
		if opened {
			s.establish(ctx, cs)
			if cs.err == nil && !s.touch(cs, lease) {
				continue // ended already: open another
			}
		}
		select {
		case <-cs.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if cs.err != nil {
			if !opened && ctx.Err() == nil && (errors.Is(cs.err, context.Canceled) || errors.Is(cs.err, context.DeadlineExceeded)) {
				continue // the caller that opened it gave up; this one has not
			}
			return nil, cs.err
		}
		if s.live(cs) {
			return cs, nil
		}
		s.end(cs) // expired: drop it, and open another
	}
	return nil, fmt.Errorf("zkstore: client %q: its ZooKeeper session kept ending", client)
}

// establish connects cs and waits for its session (bounded by ctx, and by
// the Store's Close); on failure it drops cs.
func (s *Store) establish(ctx context.Context, cs *clientSession) {
	defer close(cs.ready)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Owner: establish; ends with it (cancel) or when the Store closes.
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	sent := mono()
	conn, err := s.connect(func(ev zk.Event) {
		cs.watches.event(ev)
		if ev.Type == zk.EventSession && ev.State == zk.StateExpired {
			// Owner: the expired session; end closes its connection, which
			// cannot be done from go-zookeeper's event callback.
			go s.end(cs)
		}
	})
	if err == nil {
		cs.conn = conn
		if s.digest != "" {
			err = call0(ctx, func() error { return conn.AddAuth("digest", []byte(s.digest)) })
		} else {
			_, err = call(ctx, func() (bool, error) { ok, _, err := conn.Exists(s.clients); return ok, err })
		}
	}
	if err == nil {
		cs.id = conn.SessionID()
		if cs.id == 0 {
			err = errors.New("no session")
		}
	}
	if err == nil {
		// The leader created the session after sent: it has heard of it
		// (see heard.go).
		cs.heard.add(heard{sent: sent, answered: math.MinInt64}, 0)
		s.heartbeat(cs)
	}
	if err != nil {
		cs.err = fmt.Errorf("zkstore: open the ZooKeeper session of client %q: %w", cs.client, err)
		s.mu.Lock()
		if s.sessions[cs.client] == cs {
			delete(s.sessions, cs.client)
		}
		s.mu.Unlock()
		if conn != nil {
			conn.Close()
		}
	}
}

// touch records that cs kept a lock of lease (or a place of that wait)
// alive, or granted one, at a time no later than now: the Store keeps the
// session at least its longest lease from now. It reports false when the
// session had ended meanwhile, and then ends cs.
func (s *Store) touch(cs *clientSession, lease time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs.ended {
		return false
	}
	if cs.conn.SessionID() != cs.id {
		// The session expired, and a write may have landed on the next
		// session of the connection: end closes it, and its nodes go.
		// Owner: cs's end, which takes s.mu.
		go s.end(cs)
		return false
	}
	cs.ttl = max(cs.ttl, lease)
	cs.deadline = time.Now().Add(cs.ttl)
	if cs.timer == nil {
		cs.timer = time.AfterFunc(cs.ttl, func() { s.lapse(cs) })
	} else {
		cs.timer.Reset(cs.ttl)
	}
	return true
}

// lapse ends cs when its deadline has passed (a keep-alive may have moved
// it since the timer was set).
func (s *Store) lapse(cs *clientSession) {
	s.mu.Lock()
	wait := time.Until(cs.deadline)
	if wait > 0 && !cs.ended {
		cs.timer.Reset(wait)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.end(cs)
}

// end ends cs: it drops the Store's state of its client and closes its
// connection, which closes the ZooKeeper session, and every node of it
// goes (at once, or when the server expires the session if it cannot be
// reached).
func (s *Store) end(cs *clientSession) {
	s.mu.Lock()
	if cs.ended {
		s.mu.Unlock()
		return
	}
	cs.ended = true
	if cs.timer != nil {
		cs.timer.Stop()
	}
	if cs.beat != nil {
		cs.beat.Stop()
	}
	if s.sessions[cs.client] == cs {
		delete(s.sessions, cs.client)
	}
	for k := range s.held {
		if driver.OwnerClient(k.owner) == cs.client {
			delete(s.held, k)
		}
	}
	s.mu.Unlock()
	<-cs.ready
	if cs.conn != nil {
		cs.conn.Close()
	}
}

// sessionOf returns client's session, nil when it has none.
func (s *Store) sessionOf(client string) *clientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[client]
}

// SessionID returns the id of client's ZooKeeper session, 0 when it has
// none: the epoch in the names of its nodes.
func (s *Store) SessionID(client string) int64 {
	cs := s.sessionOf(client)
	if cs == nil {
		return 0
	}
	select {
	case <-cs.ready:
		return cs.id
	default:
		return 0
	}
}

// KeepAlive implements [driver.SessionStore]: one write on client's own
// ZooKeeper session (it sets Root/clients to the data it has), which the
// leader accepts only while the session lives. It proves the session, and
// so every lock of the client, alive now, and the Store then keeps the
// session at least the client's longest lease from now. It fails at once,
// outcome unknown, while the session is not connected; it returns an error
// matching driver.ErrNotHeld when the client has no session here (it never
// took a lock here, or its session ended: expired on the server, or closed
// by the Store after its longest lease without a keep-alive).
func (s *Store) KeepAlive(ctx context.Context, client string) error {
	cs := s.sessionOf(client)
	if cs == nil {
		return fmt.Errorf("zkstore: keep-alive of client %q: %w: it has no session (it holds no lock here, or its session ended)", client, driver.ErrNotHeld)
	}
	select {
	case <-cs.ready:
	default:
		return fmt.Errorf("zkstore: keep-alive of client %q: its session is being opened", client)
	}
	if !s.live(cs) {
		s.end(cs)
		return fmt.Errorf("zkstore: keep-alive of client %q: %w: its ZooKeeper session ended", client, driver.ErrNotHeld)
	}
	if !cs.connected() {
		return fmt.Errorf("zkstore: keep-alive of client %q: not connected to ZooKeeper (%v)", client, cs.conn.State())
	}
	sent := mono()
	_, err := heardCall(ctx, s, cs, s.mark(cs))
	switch {
	case errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing) || err == nil && !s.touch(cs, 0):
		s.end(cs)
		return fmt.Errorf("zkstore: keep-alive of client %q: %w: its ZooKeeper session ended", client, driver.ErrNotHeld)
	case err != nil:
		return fmt.Errorf("zkstore: keep-alive of client %q: %w", client, err)
	case !s.proven(cs, sent, sent):
		return s.errUnproven(client)
	}
	return nil
}
