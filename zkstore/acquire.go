package zkstore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

// maxAttempts bounds how often one call starts over because the znodes it
// read changed before its write.
const maxAttempts = 20

// createDir creates name's lock directory, for a lock or, when sem, a
// semaphore of permits.
func (s *Store) createDir(ctx context.Context, name string, sem bool, permits int) error {
	if err := s.ensureRoot(ctx); err != nil {
		return err
	}
	data := dirMarker
	if sem {
		data = semData(permits)
	}
	return s.createIfMissing(ctx, s.dir(name), data)
}

// A nodeView is a lock directory's node judged: whether it is alive (a
// hold whose owner still holds it, a waiting place still kept).
type nodeView struct {
	node      lockNode
	gone      bool          // deleted since the directory was read
	d         time.Duration // a hold's lease, a place's wait, from its data
	version   int32         // its data version
	alive     bool
	remaining time.Duration // when alive
	// session is the hold's session node, when it exists with the node's
	// epoch: a keep-alive changes its version, which a takeover checks.
	session *zk.Stat
}

// drop returns the operations that delete a node judged dead, on the
// condition that it has not changed since (a place refreshed) and its
// session has not been kept alive since.
func (v nodeView) drop(dir, sessionPath string) []any {
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

// judge reads each node, the session node of each hold's client and the
// server's clock, all at once, and says of each node whether it is alive:
// a hold while its session node exists with the node's epoch and less than
// the node's lease has passed since its session's last keep-alive or its
// own grant (or refresh), whichever is later; a waiting place while it was
// last refreshed less than its wait ago.
func (s *Store) judge(ctx context.Context, name string, nodes []lockNode) ([]nodeView, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	dir := s.dir(name)
	views := make([]nodeView, len(nodes))
	type session struct {
		st    *zk.Stat
		epoch uint64
		err   error
	}
	sessions := map[string]*session{}
	for _, n := range nodes {
		if n.kind.hold() {
			sessions[driver.OwnerClient(n.owner)] = &session{}
		}
	}
	mtimes := make([]int64, len(nodes))
	errs := make([]error, len(nodes)+1)
	var now int64
	var wg sync.WaitGroup
	for i, n := range nodes {
		views[i].node = n
		// Owner: judge, which waits for it (wg.Wait); ctx bounds it.
		wg.Go(func() {
			data, st, err := getData(ctx, s, dir+"/"+n.name)
			switch {
			case errors.Is(err, zk.ErrNoNode):
				views[i].gone = true
			case err != nil:
				errs[i] = err
			default:
				d, ok := parseNodeData(n.kind, data)
				if !ok {
					errs[i] = &driver.NotALockError{Name: name,
						Found: fmt.Sprintf("leash lock znode %s with a child %q holding %s, not a leash lock node", dir, n.name, describeData(data))}
				}
				views[i].d, views[i].version, mtimes[i] = d, st.Version, st.Mtime
			}
		})
	}
	for client, ss := range sessions {
		// Owner: judge, which waits for it (wg.Wait); ctx bounds it.
		wg.Go(func() {
			data, st, err := getData(ctx, s, s.clientPath(client))
			switch {
			case errors.Is(err, zk.ErrNoNode):
			case err != nil:
				ss.err = err
			default:
				if epoch, _, ok := parseSessionData(data); ok {
					ss.st, ss.epoch = st, epoch
				}
			}
		})
	}
	// Owner: judge, which waits for it (wg.Wait); ctx bounds it.
	wg.Go(func() { now, errs[len(errs)-1] = s.now(ctx) })
	wg.Wait()
	for _, ss := range sessions {
		errs = append(errs, ss.err)
	}
	if err := errors.Join(errs...); err != nil {
		var nl *driver.NotALockError
		if errors.As(err, &nl) {
			return nil, nl
		}
		return nil, fmt.Errorf("zkstore: read the holders of %q: %w", name, err)
	}
	for i := range views {
		v := &views[i]
		if v.gone {
			continue
		}
		since := mtimes[i]
		if v.node.kind.hold() {
			ss := sessions[driver.OwnerClient(v.node.owner)]
			if ss.st == nil || ss.epoch != v.node.epoch {
				continue // a session that ended never comes back: no condition on it
			}
			v.session, since = ss.st, max(since, ss.st.Mtime)
		}
		if end := since + v.d.Milliseconds(); now < end {
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

// Kinds implements [driver.KindStore]: every kind.
func (s *Store) Kinds() []driver.Kind {
	return []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindRead, driver.KindWrite, driver.KindPermit}
}

// blocked is what keeps a request from being granted, judged from a
// directory's live nodes.
type blocked struct {
	remaining time.Duration // until the blocker's lease or place runs out
	place     nodeKind      // the waiting place a refused request keeps (nkQueue, nkWaitW), or nkLock for none
}

// blocker says whether the live nodes keep req from being granted, as the
// rules of its kind say (see driver.KindStore), and for how long.
func blocker(req driver.Request, d dirState, views []nodeView) (blocked, bool) {
	var excl, writer *nodeView
	var latestRead, firstMark, firstPermit time.Duration
	var queue []nodeView
	permits := 0
	for i := range views {
		v := &views[i]
		if !v.alive {
			continue
		}
		switch v.node.kind {
		case nkLock, nkWrite:
			excl = v
			if v.node.kind == nkWrite {
				writer = v
			}
		case nkRead:
			latestRead = max(latestRead, v.remaining)
		case nkPermit:
			permits++
			if firstPermit == 0 || v.remaining < firstPermit {
				firstPermit = v.remaining
			}
		case nkQueue:
			queue = append(queue, *v)
		case nkWaitW:
			if firstMark == 0 || v.remaining < firstMark {
				firstMark = v.remaining
			}
		}
	}
	held := func() (blocked, bool) {
		if excl != nil {
			return blocked{remaining: excl.remaining}, true
		}
		if latestRead > 0 {
			return blocked{remaining: latestRead}, true
		}
		return blocked{}, false
	}
	switch req.Kind {
	case driver.KindPermit:
		limit := d.permits
		if !d.sem { // an empty directory becomes a semaphore of req.Permits
			limit = req.Permits
		}
		if permits >= limit {
			return blocked{remaining: firstPermit}, true
		}
	case driver.KindRead:
		downgrade := writer != nil && req.Parent != "" && writer.node.owner == req.Parent
		switch {
		case downgrade:
		case excl != nil:
			return blocked{remaining: excl.remaining}, true
		case firstMark > 0:
			return blocked{remaining: firstMark}, true
		}
	case driver.KindWrite:
		if b, ok := held(); ok {
			b.place = nkWaitW
			return b, true
		}
	case driver.KindFair:
		if b, ok := held(); ok {
			b.place = nkQueue
			return b, true
		}
		if len(queue) > 0 && queue[0].node.owner != req.Owner {
			return blocked{remaining: queue[0].remaining, place: nkQueue}, true
		}
	default:
		return held()
	}
	return blocked{}, false
}

// Acquire implements [driver.Store]. It reads the lock's directory (one
// round trip) and, unless its rules keep the request out, takes the lock
// with one multi-operation: it bumps the directory's data version (a
// compare-and-set against the version it read, so that of two racing
// acquirers one wins), deletes nodes that are no longer alive, refreshes
// the owner's session node, and creates the owner's ephemeral sequential
// hold node. The fencing token is the multi-operation's zxid, the hold
// node's czxid. When other nodes are there, it first judges them (reading
// their data, their sessions and the server's clock, which costs one write
// to the clock node). A refused request that waits (KindFair, KindWrite
// with Wait > 0) creates or refreshes its waiting place.
func (s *Store) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
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
			if err := s.createDir(ctx, req.Name, req.Kind == driver.KindPermit, req.Permits); err != nil {
				return driver.Grant{}, err
			}
			continue
		}
		if err := d.wrongKind(req.Name, req.Kind); err != nil {
			return driver.Grant{}, err
		}
		cs, err := s.session(ctx, client)
		if err != nil {
			return driver.Grant{}, err
		}
		if own, ok := d.own(req.Owner, kindsOf(req.Kind)...); ok && cs != nil && own.epoch == cs.epoch {
			g, again, err := s.refresh(ctx, req, client, cs, own)
			if again {
				continue
			}
			return g, err
		}
		if req.Kind == driver.KindWrite {
			if r, ok := d.own(req.Owner, nkRead); ok && cs != nil && r.epoch == cs.epoch {
				return driver.Grant{}, fmt.Errorf("zkstore: acquire %q: %w", req.Name, driver.ErrUpgrade)
			}
		}
		views, err := s.judge(ctx, req.Name, d.nodes)
		if err != nil {
			return driver.Grant{}, err
		}
		if b, ok := blocker(req, d, views); ok {
			if b.place != nkLock && req.Wait > 0 {
				if err := s.keepPlace(ctx, req, b.place, d); err != nil {
					return driver.Grant{}, err
				}
			}
			return driver.Grant{Remaining: b.remaining}, nil
		}
		var drops []any
		for _, v := range views {
			mine := v.node.owner == req.Owner && (v.node.kind == nkQueue || v.node.kind == nkWaitW)
			if !v.gone && (!v.alive || mine) {
				drops = append(drops, v.drop(s.dir(req.Name), s.clientPath(driver.OwnerClient(v.node.owner)))...)
			}
		}
		g, again, err := s.grant(ctx, []driver.Request{req}, client, cs, []dirState{d}, drops)
		if again {
			continue
		}
		if err != nil {
			return driver.Grant{}, err
		}
		return driver.Grant{Acquired: true, Fence: g}, nil
	}
	return driver.Grant{}, fmt.Errorf("zkstore: acquire %q: the lock changed under every one of %d attempts", req.Name, maxAttempts)
}

// keepPlace creates req's waiting place of kind, or refreshes it, so that
// it lasts req.Wait from now.
func (s *Store) keepPlace(ctx context.Context, req driver.Request, kind nodeKind, d dirState) error {
	dir := s.dir(req.Name)
	data := nodeData(kind, req.Wait)
	if p, ok := d.own(req.Owner, kind); ok {
		_, err := call(ctx, func() (*zk.Stat, error) { return s.conn.Set(dir+"/"+p.name, data, -1) })
		if !errors.Is(err, zk.ErrNoNode) { // dropped meanwhile: take a new place
			return wrapErr("keep the waiting place on", req.Name, err)
		}
	}
	_, err := call(ctx, func() (string, error) {
		return s.conn.Create(dir+"/"+nodeName(kind, 0, req.Owner), data, zk.FlagEphemeralSequential, s.acl)
	})
	return wrapErr("take a waiting place on", req.Name, err)
}

// wrapErr adds what was done, and on which lock, to an error.
func wrapErr(what, name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("zkstore: %s %q: %w", what, name, err)
}

// sessionOp returns the operation a grant of a lock of lease makes on
// client's session node: create it, with a fresh epoch, when cs is nil;
// raise its time to live when lease is longer; otherwise only check that
// it is as read (a keep-alive in between makes the grant start over, and
// concurrent grants of one client do not conflict). It also returns the
// session the operation leaves.
func (s *Store) sessionOp(client string, cs *clientSession, lease time.Duration) (any, clientSession) {
	path := s.clientPath(client)
	if cs == nil {
		next := clientSession{epoch: randomEpoch(), ttl: lease.Milliseconds(), zkID: s.conn.SessionID()}
		return &zk.CreateRequest{Path: path, Data: sessionData(next.epoch, next.ttl), Acl: s.acl, Flags: zk.FlagEphemeral}, next
	}
	next := *cs
	if lease.Milliseconds() <= cs.ttl {
		return &zk.CheckVersionRequest{Path: path, Version: cs.version}, next
	}
	next.ttl = lease.Milliseconds()
	return &zk.SetDataRequest{Path: path, Data: sessionData(next.epoch, next.ttl), Version: cs.version}, next
}

// afterSessionOp updates next, the session sessionOp left, from the result
// of its operation in a multi-operation at now (server time).
func afterSessionOp(next *clientSession, r zk.MultiResponse, created bool, now int64) {
	switch {
	case created:
		next.version, next.mtime = 0, now
	case r.Stat != nil:
		next.version, next.mtime = r.Stat.Version, r.Stat.Mtime
	}
}

// changed reports whether a multi-operation failed because a znode it
// named changed since it was read: the caller starts over.
func changed(err error) bool {
	return errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNodeExists)
}

// grant takes the locks of reqs, all of one owner, in one multi-operation
// (see Acquire): ds are their directories as read, drops the deletions of
// nodes no longer alive. It returns the fencing token, the operation's
// zxid. again reports that something changed since the directories were
// read, and the caller must start over.
func (s *Store) grant(ctx context.Context, reqs []driver.Request, client string, cs *clientSession, ds []dirState, drops []any) (fence int64, again bool, err error) {
	lease := reqs[0].Lease
	for _, r := range reqs {
		lease = max(lease, r.Lease)
	}
	sop, next := s.sessionOp(client, cs, lease)
	var ops []any
	after := make([]dirState, len(reqs))
	for i, r := range reqs {
		d := ds[i]
		d.sem = r.Kind == driver.KindPermit // an empty directory becomes what is asked
		if d.sem && !ds[i].sem {
			d.permits = r.Permits
		}
		after[i] = d
		ops = append(ops, &zk.SetDataRequest{Path: s.dir(r.Name), Data: d.data(), Version: d.version})
	}
	ops = append(ops, drops...)
	ops = append(ops, sop)
	first := len(ops)
	for _, r := range reqs {
		kind := holdKind(r.Kind)
		ops = append(ops, &zk.CreateRequest{Path: s.dir(r.Name) + "/" + nodeName(kind, next.epoch, r.Owner),
			Data: nodeData(kind, r.Lease), Acl: s.acl, Flags: zk.FlagEphemeralSequential})
	}
	res, err := call(ctx, func() ([]zk.MultiResponse, error) { return s.conn.Multi(ops...) })
	if changed(err) {
		s.remember(client, nil)
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("zkstore: acquire %q: %w", reqs[0].Name, err)
	}
	st := res[0].Stat // the first directory's: the operation's zxid and time
	afterSessionOp(&next, res[first-1], cs == nil, st.Mtime)
	if cs != nil && s.lapsed(client, cs, st.Mtime) {
		// The session had ended before this acquire refreshed it: its
		// locks' leases ran out, and must not come back. Undo, end the
		// session, and start over with a new one.
		var created []string
		for _, r := range res[first:] {
			created = append(created, r.String)
		}
		if err := s.undo(ctx, client, next.version, created...); err != nil {
			return 0, false, fmt.Errorf("zkstore: acquire %q: %w", reqs[0].Name, err)
		}
		return 0, true, nil
	}
	for i, r := range reqs {
		d := after[i]
		s.knowDir(s.dir(r.Name), dirData{czxid: d.czxid, version: d.version + 1, sem: d.sem, permits: d.permits})
	}
	s.remember(client, &next)
	s.granted(client, next.epoch, st.Mtime)
	for i, r := range reqs {
		s.hold(r.Name, r.Owner, path.Base(res[first+i].String))
	}
	return st.Mzxid, false, nil
}

// undo deletes nodes created under a session that had lapsed, and the
// session's node.
func (s *Store) undo(ctx context.Context, client string, version int32, nodes ...string) error {
	ops := []any{&zk.DeleteRequest{Path: s.clientPath(client), Version: version}}
	for _, n := range nodes {
		ops = append(ops, &zk.DeleteRequest{Path: n, Version: -1})
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
// the tenure's fencing token, the hold node's czxid.
func (s *Store) refresh(ctx context.Context, req driver.Request, client string, cs *clientSession, own lockNode) (g driver.Grant, again bool, err error) {
	sop, next := s.sessionOp(client, cs, req.Lease)
	node := s.dir(req.Name) + "/" + own.name
	res, err := call(ctx, func() ([]zk.MultiResponse, error) {
		return s.conn.Multi(&zk.SetDataRequest{Path: node, Data: nodeData(own.kind, req.Lease), Version: -1}, sop)
	})
	if changed(err) {
		s.remember(client, nil)
		return driver.Grant{}, true, nil
	}
	if err != nil {
		return driver.Grant{}, false, fmt.Errorf("zkstore: acquire %q: %w", req.Name, err)
	}
	st := res[0].Stat
	afterSessionOp(&next, res[1], false, st.Mtime)
	if s.lapsed(client, cs, st.Mtime) {
		if err := s.undo(ctx, client, next.version); err != nil {
			return driver.Grant{}, false, fmt.Errorf("zkstore: acquire %q: %w", req.Name, err)
		}
		return driver.Grant{}, true, nil
	}
	s.remember(client, &next)
	s.granted(client, next.epoch, st.Mtime)
	return driver.Grant{Acquired: true, Fence: st.Czxid}, false, nil
}
