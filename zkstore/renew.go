package zkstore

import (
	"context"
	"errors"
	"sync"

	"github.com/leash-go/leash/driver"
)

// renewConcurrency bounds the requests one Renew (or List) has in flight:
// they are pipelined on the Store's one connection.
const renewConcurrency = 64

// Renew implements [driver.Store] for a [driver.SessionStore]: it extends
// nothing (KeepAlive does, for every lock of a client at once) and checks
// each lock: Renewed while the owner's hold node exists under its Client's
// live session; RenewTaken when, instead, another owner's hold is there
// (for the exclusive kinds); RenewGone otherwise, and for a name that holds
// something that is not a lock. A lock this Store granted costs one
// pipelined read (its node's existence); another, two (its directory's
// children first).
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	res := make([]driver.RenewResult, len(reqs))
	sem := make(chan struct{}, renewConcurrency)
	var wg sync.WaitGroup
	for i, req := range reqs {
		sem <- struct{}{}
		// Owner: Renew, which waits for it (wg.Wait); ctx bounds it.
		wg.Go(func() {
			defer func() { <-sem }()
			res[i] = s.check(ctx, req)
		})
	}
	wg.Wait()
	return res
}

// heldKey names a lock of an owner.
type heldKey struct{ name, owner string }

// hold records (node != "") or forgets the hold node of owner's lock on
// name, so that Renew reads it directly.
func (s *Store) hold(name, owner, node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if node == "" {
		delete(s.held, heldKey{name, owner})
		return
	}
	s.held[heldKey{name, owner}] = node
}

// check is Renew of one lock: one read of its node, when the Store granted
// it; otherwise, or when that node is gone, a read of its directory first.
func (s *Store) check(ctx context.Context, req driver.Request) driver.RenewResult {
	s.mu.Lock()
	node, ok := s.held[heldKey{req.Name, req.Owner}]
	s.mu.Unlock()
	if n, parsed := parseNode(node); ok && parsed {
		held, err := s.holds(ctx, req.Name, n)
		if err != nil {
			return driver.RenewResult{Err: err}
		}
		if held {
			return driver.RenewResult{Status: driver.Renewed}
		}
		s.hold(req.Name, req.Owner, "")
	}
	d, err := s.readDir(ctx, req.Name)
	if err == nil {
		err = d.wrongKind(req.Name, req.Kind)
	}
	var nl *driver.NotALockError
	if errors.As(err, &nl) {
		return driver.RenewResult{Status: driver.RenewGone}
	}
	if err != nil {
		return driver.RenewResult{Err: err}
	}
	if own, ok := d.own(req.Owner, kindsOf(req.Kind)...); ok {
		held, err := s.holds(ctx, req.Name, own)
		if err != nil {
			return driver.RenewResult{Err: err}
		}
		if held {
			return driver.RenewResult{Status: driver.Renewed}
		}
	}
	if req.Kind != driver.KindRead && req.Kind != driver.KindPermit {
		for _, n := range d.nodes {
			if n.owner != req.Owner && (n.kind.exclusive() || n.kind == nkRead) {
				return driver.RenewResult{Status: driver.RenewTaken}
			}
		}
	}
	return driver.RenewResult{Status: driver.RenewGone}
}

// holds reports whether own, a hold node, is alive: it was created by its
// Client's session, which lives, and it exists.
func (s *Store) holds(ctx context.Context, name string, own lockNode) (bool, error) {
	cs := s.sessionOf(driver.OwnerClient(own.owner))
	if cs == nil {
		return false, nil
	}
	select {
	case <-cs.ready:
	default:
		return false, nil
	}
	if cs.epoch() != own.epoch || !s.live(cs) {
		return false, nil
	}
	ok, err := call(ctx, func() (bool, error) { ok, _, err := s.conn.Exists(s.dir(name) + "/" + own.name); return ok, err })
	return ok && err == nil, err
}
