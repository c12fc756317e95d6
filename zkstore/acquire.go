package zkstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

// maxAttempts bounds how often one call starts over because the znodes it
// read changed before its write.
const maxAttempts = 20

// dirState is a lock directory as one read saw it.
type dirState struct {
	exists  bool
	version int32 // data version: the number of grants so far
	mzxid   int64 // the zxid of the last grant (when version > 0)
	nodes   []lockNode
}

// maxVerified bounds the Store's record of lock directories it has
// recognised, so that it stays small whatever the number of names.
const maxVerified = 1 << 16

// readDir reads name's lock directory: its children, and, the first time
// the Store sees the directory, its data, which must be leash's marker.
func (s *Store) readDir(ctx context.Context, name string) (dirState, error) {
	dir := s.dir(name)
	type got struct {
		children []string
		st       *zk.Stat
	}
	g, err := call(ctx, func() (got, error) { c, st, err := s.conn.Children(dir); return got{c, st}, err })
	if errors.Is(err, zk.ErrNoNode) {
		return dirState{}, nil
	}
	if err != nil {
		return dirState{}, fmt.Errorf("zkstore: read lock %q: %w", name, err)
	}
	s.mu.Lock()
	known := s.verified[dir] == g.st.Czxid
	s.mu.Unlock()
	if !known {
		data, _, err := getData(ctx, s, dir)
		if errors.Is(err, zk.ErrNoNode) {
			return dirState{}, nil
		}
		if err != nil {
			return dirState{}, fmt.Errorf("zkstore: read lock %q: %w", name, err)
		}
		if string(data) != string(dirMarker) {
			return dirState{}, &driver.NotALockError{Name: name,
				Found: fmt.Sprintf("znode %s with %s and %d children, not a leash lock", dir, describeData(data), len(g.children))}
		}
		s.mu.Lock()
		if len(s.verified) >= maxVerified {
			clear(s.verified)
		}
		s.verified[dir] = g.st.Czxid
		s.mu.Unlock()
	}
	nodes, bad := parseChildren(g.children)
	if bad != "" {
		return dirState{}, &driver.NotALockError{Name: name,
			Found: fmt.Sprintf("leash lock znode %s with a child %q that is not a leash lock node", dir, bad)}
	}
	return dirState{exists: true, version: g.st.Version, mzxid: g.st.Mzxid, nodes: nodes}, nil
}

// fence returns the last fencing token granted on a directory, 0 if none.
func (d dirState) fence() int64 {
	if d.version == 0 {
		return 0
	}
	return d.mzxid
}

// createDir creates name's lock directory.
func (s *Store) createDir(ctx context.Context, name string) error {
	if err := s.ensureRoot(ctx); err != nil {
		return err
	}
	return s.createIfMissing(ctx, s.dir(name), dirMarker)
}

// A nodeView is a lock node judged: whether its owner still holds it.
type nodeView struct {
	node      lockNode
	gone      bool          // deleted since the directory was read
	lease     time.Duration // from its data
	version   int32         // its data version
	alive     bool
	remaining time.Duration // when alive
	// session is the owner's session node, when it exists with the node's
	// epoch: a keep-alive changes its version, which a takeover checks.
	session *zk.Stat
}

// takeover returns the operations that delete a lock node judged dead, on
// the condition that its session has not been kept alive since.
func (v nodeView) takeover(dir, sessionPath string) []any {
	var ops []any
	if v.session != nil {
		ops = append(ops, &zk.CheckVersionRequest{Path: sessionPath, Version: v.session.Version})
	}
	return append(ops, &zk.DeleteRequest{Path: dir + "/" + v.node.name, Version: v.version})
}

// now returns the server's clock, in milliseconds: the modification time
// of the clock node, written for it.
func (s *Store) now(ctx context.Context) (int64, error) {
	st, err := call(ctx, func() (*zk.Stat, error) { return s.conn.Set(s.clock, clockMarker, -1) })
	if err != nil {
		return 0, fmt.Errorf("zkstore: read the server's clock (set %s): %w", s.clock, err)
	}
	return st.Mtime, nil
}

// judge reads each lock node of a directory, its owner's session node and
// the server's clock, all at once, and says of each node whether its owner
// still holds it: its session node exists with the node's epoch, and was
// kept alive less than the node's lease ago.
func (s *Store) judge(ctx context.Context, name string, nodes []lockNode) ([]nodeView, error) {
	dir := s.dir(name)
	views := make([]nodeView, len(nodes))
	sessions := make([]*zk.Stat, len(nodes))
	epochs := make([]uint64, len(nodes))
	errs := make([]error, 2*len(nodes)+1)
	var now int64
	var wg sync.WaitGroup
	for i, n := range nodes {
		views[i].node = n
		wg.Go(func() {
			data, st, err := getData(ctx, s, dir+"/"+n.name)
			switch {
			case errors.Is(err, zk.ErrNoNode):
				views[i].gone = true
			case err != nil:
				errs[2*i] = err
			default:
				lease, ok := parseNodeData(data)
				if !ok {
					errs[2*i] = &driver.NotALockError{Name: name,
						Found: fmt.Sprintf("leash lock znode %s with a child %q holding %s, not a leash lock node", dir, n.name, describeData(data))}
				}
				views[i].lease, views[i].version = lease, st.Version
			}
		})
		wg.Go(func() {
			data, st, err := getData(ctx, s, s.clientPath(driver.OwnerClient(n.owner)))
			switch {
			case errors.Is(err, zk.ErrNoNode):
			case err != nil:
				errs[2*i+1] = err
			default:
				if epoch, _, ok := parseSessionData(data); ok {
					sessions[i], epochs[i] = st, epoch
				}
			}
		})
	}
	wg.Go(func() { now, errs[len(errs)-1] = s.now(ctx) })
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		var nl *driver.NotALockError
		if errors.As(err, &nl) {
			return nil, nl
		}
		return nil, fmt.Errorf("zkstore: read the holders of %q: %w", name, err)
	}
	for i := range views {
		v := &views[i]
		if v.gone || sessions[i] == nil || epochs[i] != v.node.epoch {
			continue // a session that ended never comes back: no condition on it
		}
		v.session = sessions[i]
		if end := sessions[i].Mtime + v.lease.Milliseconds(); now < end {
			v.alive, v.remaining = true, time.Duration(end-now)*time.Millisecond
		}
	}
	return views, nil
}

// getData is conn.Get under ctx.
func getData(ctx context.Context, s *Store, path string) ([]byte, *zk.Stat, error) {
	type got struct {
		data []byte
		st   *zk.Stat
	}
	g, err := call(ctx, func() (got, error) { b, st, err := s.conn.Get(path); return got{b, st}, err })
	return g.data, g.st, err
}

// checkLease refuses a lease the session cannot cover: a lock lives as long
// as its session, which ends a session timeout after the server last heard
// from the Store; a holder counting a longer lease could believe it holds a
// lock the server gave away.
func (s *Store) checkLease(req driver.Request) error {
	t := s.SessionTimeout()
	if t > 0 && req.Lease > t {
		return fmt.Errorf("zkstore: lease %v of lock %q is longer than the ZooKeeper session timeout %v (asked %v; the server grants between its minSessionTimeout and maxSessionTimeout): a lock cannot outlive its session; use a shorter lease or a longer Options.SessionTimeout: %w",
			req.Lease, req.Name, t, s.requested, driver.ErrUnsupported)
	}
	return nil
}

// Acquire implements [driver.Store]. It reads the lock's directory (one
// round trip) and, when no live holder is found, takes the lock with one
// multi-operation: it bumps the directory's data version (a compare and
// set against the version it read, so that of two racing acquirers one
// wins), deletes lock nodes whose holders' leases ran out, refreshes the
// owner's session node, and creates the owner's ephemeral sequential lock
// node. The fencing token is the multi-operation's zxid, the lock node's
// czxid. A refused acquire writes nothing but the clock node, which it
// reads the server's time from to judge the holder's lease.
func (s *Store) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if req.Kind != driver.KindMutex {
		return driver.Grant{}, fmt.Errorf("zkstore: acquire %q: %w", req.Name, driver.Unsupported(s, req.Kind.String()+" locks"))
	}
	if err := s.checkLease(req); err != nil {
		return driver.Grant{}, err
	}
	if err := s.ensureRoot(ctx); err != nil {
		return driver.Grant{}, err
	}
	client := driver.OwnerClient(req.Owner)
	for range maxAttempts {
		d, err := s.readDir(ctx, req.Name)
		if err != nil {
			return driver.Grant{}, err
		}
		if err := s.checkLease(req); err != nil { // the session is established now
			return driver.Grant{}, err
		}
		if !d.exists {
			if err := s.createDir(ctx, req.Name); err != nil {
				return driver.Grant{}, err
			}
			continue
		}
		cs, err := s.session(ctx, client)
		if err != nil {
			return driver.Grant{}, err
		}
		var own *lockNode
		var others []lockNode
		for _, n := range d.nodes {
			if n.owner == req.Owner && own == nil {
				own = &n
			} else {
				others = append(others, n)
			}
		}
		if own != nil && cs != nil && own.epoch == cs.epoch {
			g, again, err := s.refresh(ctx, req, client, cs, *own)
			if again {
				continue
			}
			return g, err
		}
		if own != nil { // of a session that ended: a tenure of the past
			others = append(others, *own)
		}
		views, err := s.judge(ctx, req.Name, others)
		if err != nil {
			return driver.Grant{}, err
		}
		var ops []any
		for _, v := range views {
			if v.alive {
				return driver.Grant{Remaining: v.remaining}, nil
			}
			if !v.gone {
				ops = append(ops, v.takeover(s.dir(req.Name), s.clientPath(driver.OwnerClient(v.node.owner)))...)
			}
		}
		g, again, err := s.grant(ctx, req, client, cs, d, ops)
		if again {
			continue
		}
		return g, err
	}
	return driver.Grant{}, fmt.Errorf("zkstore: acquire %q: the lock changed under every one of %d attempts", req.Name, maxAttempts)
}

// sessionOp returns the operation that refreshes client's session node
// (creating it, with a fresh epoch, when cs is nil) for a lock of lease,
// and the session it leaves.
func (s *Store) sessionOp(client string, cs *clientSession, lease time.Duration) (any, clientSession) {
	path := s.clientPath(client)
	if cs == nil {
		next := clientSession{epoch: randomEpoch(), ttl: lease.Milliseconds(), zkID: s.conn.SessionID()}
		return &zk.CreateRequest{Path: path, Data: sessionData(next.epoch, next.ttl), Acl: s.acl, Flags: zk.FlagEphemeral}, next
	}
	next := *cs
	next.ttl = max(cs.ttl, lease.Milliseconds())
	return &zk.SetDataRequest{Path: path, Data: sessionData(next.epoch, next.ttl), Version: cs.version}, next
}

// changed reports whether a multi-operation failed because a znode it
// named changed since it was read: the caller starts over.
func changed(err error) bool {
	return errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNodeExists)
}

// grant takes the lock for req (see Acquire). again reports that something
// changed since d was read and the caller must start over.
func (s *Store) grant(ctx context.Context, req driver.Request, client string, cs *clientSession, d dirState, takeovers []any) (g driver.Grant, again bool, err error) {
	dir := s.dir(req.Name)
	sop, next := s.sessionOp(client, cs, req.Lease)
	ops := append([]any{&zk.SetDataRequest{Path: dir, Data: dirMarker, Version: d.version}}, takeovers...)
	ops = append(ops, sop, &zk.CreateRequest{Path: dir + "/" + nodeName(next.epoch, req.Owner), Data: nodeData(req.Lease), Acl: s.acl, Flags: zk.FlagEphemeralSequential})
	res, err := call(ctx, func() ([]zk.MultiResponse, error) { return s.conn.Multi(ops...) })
	if changed(err) {
		s.remember(client, nil)
		return driver.Grant{}, true, nil
	}
	if err != nil {
		return driver.Grant{}, false, fmt.Errorf("zkstore: acquire %q: %w", req.Name, err)
	}
	st := res[0].Stat // the directory's: the operation's zxid and time
	next.mtime = st.Mtime
	if sst := res[len(res)-2].Stat; sst != nil {
		next.version = sst.Version
	}
	created := res[len(res)-1].String
	if cs != nil && cs.lapsed(st.Mtime) {
		// The session had ended before this acquire refreshed it: its
		// locks' leases ran out, and must not come back. Undo, end the
		// session, and start over with a new one.
		if err := s.undo(ctx, client, created, next.version); err != nil {
			return driver.Grant{}, false, fmt.Errorf("zkstore: acquire %q: %w", req.Name, err)
		}
		return driver.Grant{}, true, nil
	}
	s.remember(client, &next)
	return driver.Grant{Acquired: true, Fence: st.Mzxid}, false, nil
}

// undo deletes a lock node created under a session that had lapsed, and
// the session's node.
func (s *Store) undo(ctx context.Context, client, node string, version int32) error {
	ops := []any{&zk.DeleteRequest{Path: s.clientPath(client), Version: version}}
	if node != "" {
		ops = append(ops, &zk.DeleteRequest{Path: node, Version: -1})
	}
	_, err := call(ctx, func() ([]zk.MultiResponse, error) { return s.conn.Multi(ops...) })
	s.remember(client, nil)
	if err != nil && !changed(err) {
		return fmt.Errorf("undo a grant under a lapsed session: %w", err)
	}
	return nil
}

// refresh is an acquire by the owner that holds the lock: it sets the
// lock's lease to req.Lease and refreshes the owner's session, and returns
// the tenure's fencing token, the lock node's czxid.
func (s *Store) refresh(ctx context.Context, req driver.Request, client string, cs *clientSession, own lockNode) (g driver.Grant, again bool, err error) {
	sop, next := s.sessionOp(client, cs, req.Lease)
	node := s.dir(req.Name) + "/" + own.name
	res, err := call(ctx, func() ([]zk.MultiResponse, error) {
		return s.conn.Multi(&zk.SetDataRequest{Path: node, Data: nodeData(req.Lease), Version: -1}, sop)
	})
	if changed(err) {
		s.remember(client, nil)
		return driver.Grant{}, true, nil
	}
	if err != nil {
		return driver.Grant{}, false, fmt.Errorf("zkstore: acquire %q: %w", req.Name, err)
	}
	st, sst := res[0].Stat, res[1].Stat
	next.mtime, next.version = sst.Mtime, sst.Version
	if cs.lapsed(sst.Mtime) {
		if err := s.undo(ctx, client, "", next.version); err != nil {
			return driver.Grant{}, false, fmt.Errorf("zkstore: acquire %q: %w", req.Name, err)
		}
		return driver.Grant{}, true, nil
	}
	s.remember(client, &next)
	return driver.Grant{Acquired: true, Fence: st.Czxid}, false, nil
}
