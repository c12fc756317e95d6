package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leash-go/leash/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A lease is one etcd lease of a client's session: every lock of the client
// whose lease rounds to the same TTL is attached to it.
type lease struct {
	ttl   int64         // seconds
	asked time.Duration // the lease of the request that granted it
	ready chan struct{} // closed once the grant has answered
	id    clientv3.LeaseID
	err   error // the grant's error, set before ready closes

	// until is, under Store.mu, the time (by this process's monotonic
	// clock) before which the server keeps the lease: the send time of its
	// last successful grant or keep-alive, plus its TTL.
	until time.Time
}

// granted reports whether l's grant has answered, granting it.
func (l *lease) granted() bool {
	select {
	case <-l.ready:
		return l.err == nil
	default:
		return false
	}
}

// grantTimeout bounds a lease grant, which is not bound to any one
// caller's context.
const grantTimeout = 10 * time.Second

// ttlFor is the etcd lease TTL, in whole seconds, under which a lock of
// lease d is kept: d rounded up to a second, plus one second, so that an
// Acquire within a second of the lease's last keep-alive needs no new one
// (see the package doc).
func ttlFor(d time.Duration) int64 {
	return int64((d+time.Second-1)/time.Second) + 1
}

// LeaseSlack implements storetest.LeaseSlack: the server keeps a lease of
// d for up to its TTL, ceil(d) + 1 s, from its last keep-alive, and expires
// it at its next expiry check (every 500 ms) and revocation (a raft
// proposal): at most ceil(d) + 2 s - d longer than d.
func (s *Store) LeaseSlack(d time.Duration) time.Duration {
	return time.Duration(ttlFor(d))*time.Second - d + time.Second
}

// session returns the lease to attach a lock of owner's client to, for a
// lock of lease d requested at send: a lease of TTL ttlFor(d), which the
// server keeps at least until send+d (it is granted, or kept alive, after
// send when it would not be).
func (s *Store) session(ctx context.Context, client string, d time.Duration, send time.Time) (*lease, error) {
	ttl := ttlFor(d)
	for {
		if err := s.checkTTL(d); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.sweep(time.Now())
		byTTL := s.sessions[client]
		if byTTL == nil {
			byTTL = make(map[int64]*lease)
			s.sessions[client] = byTTL
		}
		l := byTTL[ttl]
		grant := l == nil
		if grant {
			l = &lease{ttl: ttl, asked: d, ready: make(chan struct{})}
			byTTL[ttl] = l
		}
		s.mu.Unlock()
		if grant {
			// Owner: the Store. Stops when the grant answers, within
			// grantTimeout: it is not bound to this caller's ctx, since
			// other Acquires of the client wait for it too.
			go s.grant(context.WithoutCancel(ctx), client, l)
		}
		select {
		case <-l.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if l.err != nil {
			return nil, l.err
		}
		s.mu.Lock()
		fresh := !l.until.Before(send.Add(d))
		s.mu.Unlock()
		if fresh {
			return l, nil
		}
		err := s.keepAlive(ctx, client, l)
		if errors.Is(err, driver.ErrNotHeld) {
			continue // expired or revoked: the next turn grants a new one
		}
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

// grant grants l on the server and closes l.ready. A grant that fails is
// forgotten, so that the next Acquire tries again.
func (s *Store) grant(ctx context.Context, client string, l *lease) {
	defer close(l.ready)
	ctx, cancel := context.WithTimeout(ctx, grantTimeout)
	defer cancel()
	send := time.Now()
	resp, err := s.cli.Grant(ctx, l.ttl)
	switch {
	case err != nil:
		l.err = fmt.Errorf("etcdstore: grant a lease of %ds: %w", l.ttl, err)
	case resp.Error != "":
		l.err = fmt.Errorf("etcdstore: grant a lease of %ds: %s", l.ttl, resp.Error)
	case resp.TTL > l.ttl:
		// The server raised the TTL to its minimum: it would keep the
		// lock far longer than asked. Refuse, and remember the minimum so
		// that the next such request is refused before any round trip.
		s.mu.Lock()
		s.minTTL = max(s.minTTL, resp.TTL)
		s.mu.Unlock()
		l.err = s.tooShort(l.asked, resp.TTL)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_, _ = s.cli.Revoke(rctx, resp.ID) // it holds nothing; it expires anyway
		cancel()
	default:
		l.id = resp.ID
		s.mu.Lock()
		l.until = send.Add(time.Duration(l.ttl) * time.Second)
		s.mu.Unlock()
		return
	}
	s.forget(client, l)
}

// checkTTL refuses, before any round trip, a lease d whose TTL a grant
// showed to be below the server's minimum.
func (s *Store) checkTTL(d time.Duration) error {
	s.mu.Lock()
	minTTL := s.minTTL
	s.mu.Unlock()
	if minTTL > ttlFor(d) {
		return s.tooShort(d, minTTL)
	}
	return nil
}

// tooShort is the refusal of a lease d whose TTL is below the server's
// minimum of minTTL seconds: a definite refusal (it matches
// driver.ErrUnsupported), nothing granted.
func (s *Store) tooShort(d time.Duration, minTTL int64) error {
	return fmt.Errorf("etcdstore: a lease of %v needs an etcd lease TTL of %ds, below this server's minimum of %ds "+
		"(etcd's is 1.5 election timeouts, rounded up to a second): use a lease of at least %v: %w",
		d, ttlFor(d), minTTL, time.Duration(minTTL-1)*time.Second, driver.Unsupported(s, "leases that short"))
}

// forget drops l from client's session, if it is still there.
func (s *Store) forget(client string, l *lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop(client, l)
}

// drop drops l from client's session, and the session once it has no
// lease. Call with s.mu held.
func (s *Store) drop(client string, l *lease) {
	if byTTL := s.sessions[client]; byTTL[l.ttl] == l {
		delete(byTTL, l.ttl)
		if len(byTTL) == 0 {
			delete(s.sessions, client)
			delete(s.rounds, client)
			s.claims.forget(client)
		}
	}
}

// sweepEvery is how often session drops the leases nobody kept alive.
const sweepEvery = time.Minute

// sweep drops, at most once per sweepEvery, every granted lease (of locks,
// places or records) whose time before which the server keeps it has
// passed: nobody kept it alive, so every lock on it is past the validity
// the core gave it, and the next Acquire of its client grants a new lease.
// A client whose leases are all dropped is forgotten. Call with s.mu held.
func (s *Store) sweep(now time.Time) {
	if now.Before(s.sweepAt) {
		return
	}
	s.sweepAt = now.Add(sweepEvery)
	for client, byTTL := range s.sessions {
		for _, l := range byTTL {
			select {
			case <-l.ready:
				if l.err == nil && l.until.Before(now) {
					s.drop(client, l)
				}
			default: // being granted
			}
		}
	}
}

// keepAlive sends one keep-alive for l. It returns an error matching
// driver.ErrNotHeld, and forgets l, when the server no longer has the
// lease: it expired or was revoked, and every key attached to it is deleted.
func (s *Store) keepAlive(ctx context.Context, client string, l *lease) error {
	send := time.Now()
	resp, err := s.cli.KeepAliveOnce(ctx, l.id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.forget(client, l)
		return fmt.Errorf("etcdstore: lease %x (%ds) of client %q: %w: it expired or was revoked, and every lock on it was deleted",
			int64(l.id), l.ttl, client, driver.ErrNotHeld)
	}
	if err != nil {
		return fmt.Errorf("etcdstore: keep-alive of lease %x: %w", int64(l.id), err)
	}
	s.mu.Lock()
	if u := send.Add(time.Duration(min(resp.TTL, l.ttl)) * time.Second); u.After(l.until) {
		l.until = u
	}
	s.mu.Unlock()
	if resp.TTL < l.ttl {
		// The server keeps the lease less than its locks need: not a
		// renewal of them.
		return fmt.Errorf("etcdstore: keep-alive of lease %x: the server kept it for %ds, less than the %ds its locks need",
			int64(l.id), resp.TTL, l.ttl)
	}
	return nil
}

// KeepAlive implements driver.SessionStore: it sends one keep-alive
// (LeaseKeepAliveOnce) for each etcd lease of client's session, one per
// lease duration its locks were granted with (usually one), concurrently.
//
// A lease the server no longer has (it expired, or was revoked) has lost
// every lock on it, deleted with it: Renew, which the core calls next,
// reports each of them gone. KeepAlive returns an error matching
// driver.ErrNotHeld when every lease of the session is gone, or client has
// none (no lock of it was granted through this Store, or its session ended
// before); any other error is an unknown outcome. A keep-alive the server
// answers with a TTL shorter than its lease's is one: its locks are not
// renewed by it.
func (s *Store) KeepAlive(ctx context.Context, client string) error {
	send := time.Now()
	s.mu.Lock()
	var ls []*lease
	for _, l := range s.sessions[client] {
		select {
		case <-l.ready:
			if l.err == nil {
				ls = append(ls, l)
			}
		default: // being granted: its Acquire has the lease last from its request
		}
	}
	s.mu.Unlock()
	if len(ls) == 0 {
		return fmt.Errorf("etcdstore: keep-alive of client %q: %w: no live session (every lock it kept has been deleted)", client, driver.ErrNotHeld)
	}
	errs := make([]error, len(ls))
	if len(ls) == 1 {
		errs[0] = s.keepAlive(ctx, client, ls[0])
	} else {
		var wg sync.WaitGroup
		for i, l := range ls {
			// Owner: this call. Stops when the keep-alive answers or ctx ends.
			wg.Go(func() { errs[i] = s.keepAlive(ctx, client, l) })
		}
		wg.Wait()
	}
	gone := 0
	var unknown error
	for _, err := range errs {
		switch {
		case errors.Is(err, driver.ErrNotHeld):
			gone++
		case err != nil && unknown == nil:
			unknown = err
		}
	}
	switch {
	case unknown != nil:
		return unknown
	case gone == len(ls):
		return errs[0]
	}
	s.mu.Lock()
	if s.sessions[client] != nil && send.After(s.rounds[client]) {
		s.rounds[client] = send
	}
	s.mu.Unlock()
	return nil
}

// kept reports whether client's lock on etcd lease id, of lease d, is kept
// by this Store: id is a lease of client's session, and the server keeps it
// at least d from the send of client's last KeepAlive that succeeded (the
// time the core counts the lock's validity from). A lease the Store does
// not keep alive for client (forgotten, or never its) is errLeaseNotKept:
// it expires with its locks. A lease of the session not extended that far
// (its keep-alive failed, or the server kept it too short) is an unknown
// outcome. Call with s.mu held.
func (s *Store) kept(client string, id int64, d time.Duration) error {
	for _, l := range s.sessions[client] {
		select {
		case <-l.ready:
		default:
			continue // being granted: it holds nothing yet
		}
		if l.err != nil || int64(l.id) != id {
			continue
		}
		if l.until.Before(s.rounds[client].Add(d)) {
			return fmt.Errorf("etcdstore: lease %x of client %q was not kept alive for %v since its last keep-alive round", id, client, d)
		}
		return nil
	}
	return errLeaseNotKept
}

// errLeaseNotKept is kept's answer for a lease the Store does not keep
// alive.
var errLeaseNotKept = errors.New("not a lease this Store keeps alive")
