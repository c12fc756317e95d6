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
// each lock: Renewed while the owner's hold node exists under its client's
// current session and its lease has not run out since the session's last
// keep-alive; RenewTaken when, instead, another owner's hold is there (for
// the exclusive kinds); RenewGone otherwise, and for a name that holds
// something that is not a lock. A lock this Store granted costs one
// pipelined read (its node's lease); another, two (its directory's
// children first); the call, one write to the clock node for the server's
// time.
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	res := make([]driver.RenewResult, len(reqs))
	r := &renewal{s: s}
	sem := make(chan struct{}, renewConcurrency)
	var wg sync.WaitGroup
	for i, req := range reqs {
		sem <- struct{}{}
		// Owner: Renew, which waits for it (wg.Wait); ctx bounds it.
		wg.Go(func() {
			defer func() { <-sem }()
			res[i] = r.check(ctx, req)
		})
	}
	wg.Wait()
	return res
}

// renewal is one Renew call: what its checks share, each read once.
type renewal struct {
	s        *Store
	sessions sync.Map // client id → *onceSession
	clock    struct {
		once sync.Once
		now  int64
		err  error
	}
}

type onceSession struct {
	once sync.Once
	cs   *clientSession
	err  error
}

func (r *renewal) session(ctx context.Context, client string) (*clientSession, error) {
	v, _ := r.sessions.LoadOrStore(client, &onceSession{})
	o := v.(*onceSession)
	o.once.Do(func() { o.cs, o.err = r.s.session(ctx, client) })
	return o.cs, o.err
}

func (r *renewal) now(ctx context.Context) (int64, error) {
	r.clock.once.Do(func() { r.clock.now, r.clock.err = r.s.now(ctx) })
	return r.clock.now, r.clock.err
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
func (r *renewal) check(ctx context.Context, req driver.Request) driver.RenewResult {
	s := r.s
	s.mu.Lock()
	node, ok := s.held[heldKey{req.Name, req.Owner}]
	s.mu.Unlock()
	if n, parsed := parseNode(node); ok && parsed {
		held, err := r.holds(ctx, req.Name, n)
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
		held, err := r.holds(ctx, req.Name, own)
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

// holds reports whether own, a hold node, is alive: its client's session
// is the one it was created in, and less than its lease has passed since
// the session's last keep-alive or the node's grant, whichever is later.
func (r *renewal) holds(ctx context.Context, name string, own lockNode) (bool, error) {
	cs, err := r.session(ctx, driver.OwnerClient(own.owner))
	if err != nil || cs == nil || cs.epoch != own.epoch {
		return false, err
	}
	data, st, err := getData(ctx, r.s, r.s.dir(name)+"/"+own.name)
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	lease, ok := parseNodeData(own.kind, data)
	if !ok {
		return false, nil
	}
	now, err := r.now(ctx)
	if err != nil {
		return false, err
	}
	return now < max(cs.mtime, st.Mtime)+lease.Milliseconds(), nil
}
