package zkstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// How long a hold is valid, in an ensemble.
//
// The leader alone expires sessions, one session timeout T after it last
// heard of one. A request to the leader itself is heard at once; a request
// to a follower is heard only when the leader next pings that follower
// (every half tick) and the follower answers with the sessions it served
// since. A forwarded write is not heard: a keep-alive that a follower
// commits proves the session alive, but not when the leader will expire
// it. If the follower is cut off from the leader (together with its
// client) right after the keep-alive, the leader expires the session T
// after the last request the follower reported, which may be well before
// the keep-alive.
//
// So the Store counts a keep-alive, or a grant, only when a request of the
// same session is known to have reached the leader recently enough: sent
// no earlier than quietLimit before the keep-alive (or before the acquire
// began), and answered at least a tick before it was sent, so that a ping
// of the leader reached the follower in between (the follower's answer to
// it precedes the keep-alive on the follower's link to the leader, and the
// leader reads that link in order). The session then lives until at least
// that request plus T, and a hold until the keep-alive plus validFor(T)
// (the Store's Drift keeps each lock's margin that large) is covered. A
// keep-alive with no such request before it (the Client's process stalled,
// or the session was idle) extends nothing; an acquire first writes on
// the session and waits a tick. Each session reads a node every half of
// validFor(T) (heartbeat) so that an idle session always has one.
//
// That assumes the leader pings each follower within a tick: its loop
// pings every half tick, and the other half covers the ping's way to the
// follower and the leader's own delays. A leader that stops for longer (a
// long garbage-collection pause) while its followers wait for it (up to
// syncLimit ticks) can void the rule: a TickTime longer than the servers'
// tickTime allows for such pauses.

// epoch is the origin of the Store's monotonic times.
var epoch = time.Now()

// mono returns the monotonic time since epoch.
func mono() time.Duration { return time.Since(epoch) }

// validFor is how long after a proven keep-alive or grant a hold is valid,
// for a session timeout t: (t − tick)/2.
func (s *Store) validFor(t time.Duration) time.Duration { return (t - s.tick) / 2 }

// quietLimit is how long before a keep-alive or an acquire the request that
// proves it may have been sent, for a session timeout t: t − validFor(t).
func (s *Store) quietLimit(t time.Duration) time.Duration { return t - s.validFor(t) }

// configured is the session timeout the Store plans for before any session
// is granted: the one asked for, raised to two ticks (the least a server
// grants by default). Acquire checks the one granted (checkLease).
func (s *Store) configured() time.Duration { return max(s.requested, 2*s.tick) }

// Drift implements driver.Drifter: the part of a lease that the Client
// keeps in reserve, so that a hold is valid at most validFor(T) after the
// keep-alive or grant that proved it (see heard.go).
func (s *Store) Drift(lease time.Duration) time.Duration {
	return max(0, lease-s.validFor(s.configured()))
}

// heard is a request of a session that its server answered: when it was
// sent and answered, by mono.
type heard struct{ sent, answered time.Duration }

// heardLog keeps some of a session's answered requests, at least a
// quarter tick apart, the latest last: enough that the latest one
// answered a tick ago is still there while answers take up to several
// ticks.
type heardLog struct {
	mu sync.Mutex
	n  int // entries, at most len(e)
	e  [32]heard
}

// add records h, unless the latest entry was sent less than spacing
// before it (the older one serves as well).
func (l *heardLog) add(h heard, spacing time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 && h.sent-l.e[l.n-1].sent < spacing {
		return
	}
	if l.n == len(l.e) {
		copy(l.e[:], l.e[1:])
		l.n--
	}
	l.e[l.n] = h
	l.n++
}

// latest returns the latest entry answered by answeredBy.
func (l *heardLog) latest(answeredBy time.Duration) (heard, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := l.n - 1; i >= 0; i-- {
		if l.e[i].answered <= answeredBy {
			return l.e[i], true
		}
	}
	return heard{}, false
}

// heardCall is call of f, a request on cs's connection, recording it in
// cs's log when the server answered it.
func heardCall[T any](ctx context.Context, s *Store, cs *clientSession, f func() (T, error)) (T, error) {
	sent := mono()
	v, err := call(ctx, f)
	if err == nil || answered(err) {
		cs.heard.add(heard{sent, mono()}, s.tick/4)
	}
	return v, err
}

// answered reports whether err is a server's answer to a request, not a
// failure to get one.
func answered(err error) bool {
	for _, e := range []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrBadVersion, zk.ErrNotEmpty, zk.ErrNoAuth} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// proven reports whether a request of cs that the leader has heard of was
// sent no earlier than quietLimit before from and answered a tick before
// sentAt (see heard.go).
func (s *Store) proven(cs *clientSession, from, sentAt time.Duration) bool {
	if s.trustQuiet {
		return true
	}
	h, ok := cs.heard.latest(sentAt - s.tick)
	return ok && h.sent >= from-s.quietLimit(s.SessionTimeout())
}

// prove makes sure, before a grant on cs for an acquire that began at
// from, that the leader has heard of cs recently enough (see heard.go):
// when no request proves it, it writes on the session and waits a tick.
func (s *Store) prove(ctx context.Context, cs *clientSession, from time.Duration) error {
	if s.proven(cs, from, mono()) {
		return nil
	}
	s.reproved.Add(1)
	if _, err := write(ctx, s, cs, "write on the session of", cs.client, s.mark(cs)); err != nil {
		return err
	}
	t := time.NewTimer(s.tick)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errUnproven is a keep-alive's error when no request proves that the
// leader heard of the session recently enough (see heard.go).
func (s *Store) errUnproven(client string) error {
	return fmt.Errorf("zkstore: keep-alive of client %q: it extends no lock: no earlier request of the session is known to have reached the ZooKeeper leader within %v before it (the process stalled, or the session was idle); a keep-alive a tick (%v) or more after this one will",
		client, s.quietLimit(s.SessionTimeout()), s.tick)
}

// heartbeat reads a node on cs's session every half of validFor(T), so that
// an idle session always has a request that proves it (see heard.go). It
// stops when cs ends.
func (s *Store) heartbeat(cs *clientSession) {
	every := max(s.validFor(s.SessionTimeout())/2, s.tick/2)
	var beat func()
	arm := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !cs.ended {
			cs.beat = time.AfterFunc(every, beat)
		}
	}
	beat = func() {
		if !s.live(cs) {
			return
		}
		if cs.connected() {
			ctx, cancel := context.WithTimeout(context.Background(), every)
			_, _ = heardCall(ctx, s, cs, func() (bool, error) { ok, _, err := cs.conn.Exists(s.clients); return ok, err })
			cancel()
		}
		arm()
	}
	arm()
}

// mark is the write of a keep-alive on cs's session: it sets Root/clients
// to the data it has, which the leader accepts only while the session
// lives.
func (s *Store) mark(cs *clientSession) func() (*zk.Stat, error) {
	return func() (*zk.Stat, error) { return cs.conn.Set(s.clients, clientsMarker, -1) }
}
