package zkstore

import (
	"context"
	"errors"
	"sync"

	"github.com/go-zookeeper/zk"
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
// something that is not a lock.
//
// A lock this Store granted is checked by a watch on its hold node, set on
// its Client's session when the lock is first checked: after one write on
// that session (the barrier, a keep-alive's write), a watch set in the same
// connection that has not fired proves the node is there. ZooKeeper
// applies writes in order, and sends the events a write's predecessors
// fired before the write's answer, on the connection they were set on; a
// hold node's name is its owner's alone, so no other grant recreates it.
// So a round costs one write per Client, however many locks it holds. A
// lock whose watch fired, was set in an earlier connection (events may have
// been missed across a reconnect), or is not set yet, costs one pipelined
// read, which sets its watch; one this Store did not grant, two (its
// directory's children first).
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	res := make([]driver.RenewResult, len(reqs))
	rest := s.renewWatched(ctx, reqs, res)
	s.slow.Add(int64(len(rest)))
	sem := make(chan struct{}, renewConcurrency)
	var wg sync.WaitGroup
	for _, i := range rest {
		sem <- struct{}{}
		// Owner: Renew, which waits for it (wg.Wait); ctx bounds it.
		wg.Go(func() {
			defer func() { <-sem }()
			res[i] = s.check(ctx, reqs[i])
		})
	}
	wg.Wait()
	return res
}

// renewWatched settles, into res, each request whose hold node's watch
// proves it held (see Renew), after one barrier write per client session,
// and returns the indexes of the others.
func (s *Store) renewWatched(ctx context.Context, reqs []driver.Request, res []driver.RenewResult) []int {
	var rest []int
	byClient := make(map[string][]int)
	var clients []string
	for i, r := range reqs {
		c := driver.OwnerClient(r.Owner)
		if _, ok := byClient[c]; !ok {
			clients = append(clients, c)
		}
		byClient[c] = append(byClient[c], i)
	}
	for _, c := range clients {
		idx := byClient[c]
		cs := s.sessionOf(c)
		if cs == nil || !s.ready(cs) || !s.live(cs) || !cs.connected() {
			rest = append(rest, idx...)
			continue
		}
		gen := cs.watches.generation()
		if _, err := heardCall(ctx, s, cs, s.mark(cs)); err != nil {
			rest = append(rest, idx...)
			continue
		}
		for _, i := range idx {
			if path, ok := s.heldPath(cs, reqs[i]); ok && cs.watches.holds(path, gen, s.ignoreEvents) {
				res[i].Status = driver.Renewed
				continue
			}
			rest = append(rest, i)
		}
	}
	return rest
}

// heldPath is the path of r's hold node, when this Store granted it in
// cs's session.
func (s *Store) heldPath(cs *clientSession, r driver.Request) (string, bool) {
	s.mu.Lock()
	node, ok := s.held[heldKey{r.Name, r.Owner}]
	s.mu.Unlock()
	n, parsed := parseNode(node)
	if !ok || !parsed || n.epoch != cs.epoch() {
		return "", false
	}
	return s.dir(r.Name) + "/" + node, true
}

// ready reports whether cs's opening has ended, established.
func (s *Store) ready(cs *clientSession) bool {
	select {
	case <-cs.ready:
		return cs.err == nil
	default:
		return false
	}
}

// heldKey names a lock of an owner.
type heldKey struct{ name, owner string }

// hold records (node != "") or forgets the hold node of owner's lock on
// name, so that Renew reads it directly.
func (s *Store) hold(name, owner, node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if node == "" {
		if old, ok := s.held[heldKey{name, owner}]; ok {
			if cs := s.sessions[driver.OwnerClient(owner)]; cs != nil {
				cs.watches.forget(s.dir(name) + "/" + old)
			}
		}
		delete(s.held, heldKey{name, owner})
		return
	}
	s.held[heldKey{name, owner}] = node
}

// check is Renew of one lock: one read of its node, when the Store granted
// it; otherwise, or when that node is gone, a read of its directory first.
// The directory is read on the Store's own connection, whose server may lag
// behind the one of the session's connection (ZooKeeper orders reads within
// a session only): a node the session's read found gone is gone, whatever a
// lagging server still lists, and holds reads a node anew only after a sync.
func (s *Store) check(ctx context.Context, req driver.Request) driver.RenewResult {
	s.mu.Lock()
	node, ok := s.held[heldKey{req.Name, req.Owner}]
	s.mu.Unlock()
	gone := ""
	if n, parsed := parseNode(node); ok && parsed {
		held, err := s.holdsWatched(ctx, req.Name, n)
		if err != nil {
			return driver.RenewResult{Err: err}
		}
		if held {
			return driver.RenewResult{Status: driver.Renewed}
		}
		s.hold(req.Name, req.Owner, "")
		gone = n.name
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
	if own, ok := d.own(req.Owner, kindsOf(req.Kind)...); ok && own.name != gone {
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

// holdsWatched is holds for a hold node this Store granted: read on its
// session's connection, when connected, with a watch set (see Renew).
func (s *Store) holdsWatched(ctx context.Context, name string, own lockNode) (bool, error) {
	cs := s.sessionOf(driver.OwnerClient(own.owner))
	if cs == nil || !s.ready(cs) || !cs.connected() || cs.epoch() != own.epoch || !s.live(cs) {
		return s.holds(ctx, name, own)
	}
	path := s.dir(name) + "/" + own.name
	gen := cs.watches.asking(path)
	ok, err := heardCall(ctx, s, cs, func() (bool, error) { ok, _, _, err := cs.conn.ExistsW(path); return ok, err })
	if err != nil {
		cs.watches.forget(path)
		return false, err
	}
	cs.watches.answered(path, gen, ok)
	return ok, nil
}

// holds reports whether own, a hold node, is alive: it was created by its
// Client's session, which lives, and it exists, read on the Store's own
// connection after a sync, so that a server that lags behind the leader
// does not report a node deleted meanwhile (a forced release) as alive.
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
	p := s.dir(name) + "/" + own.name
	if err := s.sync(ctx, p); err != nil {
		return false, err
	}
	ok, err := call(ctx, func() (bool, error) { ok, _, err := s.conn.Exists(p); return ok, err })
	return ok && err == nil, err
}

// sync makes the server behind the Store's own connection catch up with the
// leader (ZooKeeper's sync), so that its next read there sees every write
// committed before: a node deleted on another server is not read as alive.
func (s *Store) sync(ctx context.Context, path string) error {
	_, err := call(ctx, func() (string, error) { return s.conn.Sync(path) })
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}
