package history

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/leash-go/leash/driver"
)

// Store is a driver.Store that records every call to the store it wraps:
// one operation per acquire and release, and one per lock of a batched
// renewal. It passes Validate, CheckName and Close through, and the
// capabilities described at [Wrap].
type Store struct {
	inner driver.Store
	rec   *Recorder

	// quorum reports whether inner is a quorum store (see Wrap).
	quorum bool

	// session is inner as a driver.SessionStore, nil when it is not one.
	session driver.SessionStore
	mu      sync.Mutex
	// kept is, per client id, the send time of the last KeepAlive that
	// succeeded.
	kept map[string]int64
}

// Wrap returns a store that records inner's operations in rec, for any
// store, and that the core treats as it would treat inner:
//
//   - it is a driver.Watcher exactly when inner is one, so that waiters are
//     notified, or poll, as they would be on inner;
//
//   - its Kinds, Withdraw, Inspect, List and ForceRelease pass through when
//     inner has them, and otherwise answer as a store without them would
//     (only KindMutex; errors matching driver.ErrUnsupported).
//
//   - a release by a quorum store — one with a Quorum method, such as
//     redlock.Store, whose release succeeds when every member answered and
//     a majority released the lock, and reports not held when only a
//     minority did (it frees those copies all the same) — is recorded as
//     FreedCopies when it succeeds, not Freed: the checker then does not
//     lean on the store's count of members.
//
//   - it is a driver.SessionStore exactly when inner is one. A session
//     store's Renew only checks each lock; what extends the lease is the
//     KeepAlive the core sends just before it. So each lock of a Renew is
//     recorded as a renewal that began when the client's last successful
//     KeepAlive was sent (the check proves the lock was on the session that
//     keep-alive extended, from its send time), and a KeepAlive alone
//     records nothing: one that failed extended nothing the history could
//     rely on (an unknown outcome only delays an expiry), and one that ended
//     the session is told to the holders, which the worker records.
func Wrap(inner driver.Store, rec *Recorder) driver.Store {
	_, quorum := inner.(interface{ Quorum() int })
	s := &Store{inner: inner, rec: rec, quorum: quorum}
	w, watcher := inner.(driver.Watcher)
	ss, session := inner.(driver.SessionStore)
	if session {
		s.session, s.kept = ss, map[string]int64{}
	}
	switch {
	case watcher && session:
		return watchingSession{watching{s, w}}
	case watcher:
		return watching{s, w}
	case session:
		return sessionStore{s}
	}
	return s
}

// watching is a Store whose inner store is a driver.Watcher: waits are not
// recorded (they hold nothing), so Watch goes straight through.
type watching struct {
	*Store
	driver.Watcher
}

// WatchClient implements driver.ClientWatcher: it goes straight through, as
// Watch does.
func (w watching) WatchClient(ctx context.Context, kind driver.Kind, name, client string, wake func(driver.Wake)) (func(), error) {
	return driver.WatchClient(ctx, w.Watcher, kind, name, client, wake)
}

// sessionStore is a Store whose inner store is a driver.SessionStore.
type sessionStore struct{ *Store }

// KeepAlive implements driver.SessionStore.
func (s sessionStore) KeepAlive(ctx context.Context, client string) error {
	return s.keepAlive(ctx, client)
}

// watchingSession is a Store whose inner store is both a driver.Watcher and
// a driver.SessionStore.
type watchingSession struct{ watching }

// KeepAlive implements driver.SessionStore.
func (s watchingSession) KeepAlive(ctx context.Context, client string) error {
	return s.keepAlive(ctx, client)
}

// keepAlive passes a keep-alive through and remembers the send time of one
// that succeeded (see Wrap).
func (s *Store) keepAlive(ctx context.Context, client string) error {
	call := Now()
	err := s.session.KeepAlive(ctx, client)
	if err == nil {
		s.mu.Lock()
		s.kept[client] = max(s.kept[client], call)
		s.mu.Unlock()
	}
	return err
}

// renewCall is when a renewal of owner's lock, checked from now, began: now
// on a store that extends each lock, or on a session store the send time of
// the owner's client's last successful keep-alive (1, before the history's
// first operation, when there was none: the check then proves no extension;
// 0 would make Begin stamp it now).
func (s *Store) renewCall(owner string, now int64) int64 {
	if s.session == nil {
		return now
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if at, ok := s.kept[driver.OwnerClient(owner)]; ok {
		return at
	}
	return 1
}

var _ driver.Store = (*Store)(nil)

// Acquire implements driver.Store.
func (s *Store) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	id := s.rec.Begin(Op{Kind: StoreAcquire, Lock: req.Name, Owner: req.Owner, Lease: int64(req.Lease)})
	g, err := s.inner.Acquire(ctx, req)
	s.rec.End(id, func(o *Op) {
		if err != nil {
			failed(o, err)
			return
		}
		o.OK, o.Fence = g.Acquired, g.Fence
	})
	return g, err
}

// Renew implements driver.Store.
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	ids := make([]int64, len(reqs))
	call := Now()
	for i, r := range reqs {
		ids[i] = s.rec.Begin(Op{Kind: StoreRenew, Lock: r.Name, Owner: r.Owner, Lease: int64(r.Lease), Call: s.renewCall(r.Owner, call)})
	}
	res := s.inner.Renew(ctx, reqs)
	for i, id := range ids {
		s.rec.End(id, func(o *Op) {
			if i >= len(res) {
				o.Ambiguous = true
				return
			}
			if res[i].Err != nil {
				failed(o, res[i].Err)
				return
			}
			switch res[i].Status {
			case driver.Renewed:
				o.OK, o.Status = true, Renewed
			case driver.RenewGone:
				o.Status = Gone
			case driver.RenewTaken:
				o.Status = Taken
			default:
				o.Ambiguous = true
			}
		})
	}
	return res
}

// Release implements driver.Store.
func (s *Store) Release(ctx context.Context, req driver.Request) error {
	id := s.rec.Begin(Op{Kind: StoreRelease, Lock: req.Name, Owner: req.Owner, Lease: int64(req.Lease)})
	err := s.inner.Release(ctx, req)
	s.rec.End(id, func(o *Op) {
		switch {
		case errors.Is(err, driver.ErrNotHeld):
			o.Status = NotHeld
		case err != nil:
			failed(o, err)
		case s.quorum:
			o.OK, o.Status = true, FreedCopies
		default:
			o.OK, o.Status = true, Freed
		}
	})
	return err
}

// refused are the Redis error prefixes that mean the command was not run.
var refused = []string{"BUSY ", "LOADING ", "NOSCRIPT ", "MASTERDOWN ", "READONLY "}

// failed records err on o: Failed when the server certainly did not run the
// command, Ambiguous otherwise (a timeout or a reset may come after it ran).
// A command certainly did not run when the server refused it (Redis's
// refused replies), or when no connection to send it on could be made: a
// dial that failed (refused, or timed out; the SQL stores while their
// server restarts), or a PostgreSQL connection whose startup failed
// (pgconn.ConnectError: "the database system is starting up"), or a
// ZooKeeper request that go-zookeeper dropped from its queue unsent while
// it found no server to connect to (zk.ErrNoServer; zkstore stops at the
// first failed request, so none after it was sent either).
func failed(o *Op, err error) {
	o.Err = err.Error()
	var dial *net.OpError
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) || errors.As(err, &dial) && dial.Op == "dial" || errors.Is(err, zk.ErrNoServer) {
		o.Status = Failed
		return
	}
	for _, p := range refused {
		if strings.Contains(o.Err, ": "+p) {
			o.Status = Failed
			return
		}
	}
	o.Ambiguous = true
}

// The capabilities below pass through to the wrapped store when it has
// them; otherwise they answer as a store without them would.

// Kinds implements driver.KindStore: only KindMutex when the wrapped store
// is not a driver.KindStore.
func (s *Store) Kinds() []driver.Kind {
	if ks, ok := s.inner.(driver.KindStore); ok {
		return ks.Kinds()
	}
	return []driver.Kind{driver.KindMutex}
}

// Withdraw implements driver.Withdrawer: a waiter leaving a queue, no hold
// changes, so nothing is recorded.
func (s *Store) Withdraw(ctx context.Context, req driver.Request) error {
	if w, ok := s.inner.(driver.Withdrawer); ok {
		return w.Withdraw(ctx, req)
	}
	return driver.Unsupported(s.inner, "waiting places")
}

// admin returns the wrapped store's administration, or the error of a store
// without it.
func (s *Store) admin() (driver.Admin, error) {
	if a, ok := s.inner.(driver.Admin); ok {
		return a, nil
	}
	return nil, driver.Unsupported(s.inner, "administration (inspect, list, force release)")
}

// Inspect implements driver.Admin.
func (s *Store) Inspect(ctx context.Context, name string) (driver.Info, error) {
	a, err := s.admin()
	if err != nil {
		return driver.Info{}, err
	}
	return a.Inspect(ctx, name)
}

// List implements driver.Admin.
func (s *Store) List(ctx context.Context, pattern string) ([]string, error) {
	a, err := s.admin()
	if err != nil {
		return nil, err
	}
	return a.List(ctx, pattern)
}

// ForceRelease implements driver.Admin.
func (s *Store) ForceRelease(ctx context.Context, name string) (bool, error) {
	a, err := s.admin()
	if err != nil {
		return false, err
	}
	return a.ForceRelease(ctx, name)
}

// Validate passes the wrapped store's construction error through.
func (s *Store) Validate() error {
	if v, ok := s.inner.(driver.Validator); ok {
		return v.Validate()
	}
	return nil
}

// CheckName passes the wrapped store's name check through.
func (s *Store) CheckName(name string) error {
	if nc, ok := s.inner.(driver.NameChecker); ok {
		return nc.CheckName(name)
	}
	return nil
}

// Close closes the wrapped store if it has a Close method.
func (s *Store) Close() error {
	if c, ok := s.inner.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
