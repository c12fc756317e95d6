package zkstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
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
// hold that exists: its session lives; a waiting place still kept).
type nodeView struct {
	node      lockNode
	czxid     int64         // orders the nodes: sequence numbers wrap
	gone      bool          // deleted since the directory was read
	d         time.Duration // a hold's lease, a place's wait, from its data
	version   int32         // its data version
	alive     bool
	remaining time.Duration // when alive: a hold's lease, a place's time left
}

// drop returns the operation that deletes a place judged dead, on the
// condition that it has not changed since (a place refreshed).
func (v nodeView) drop(dir string) any {
	return &zk.DeleteRequest{Path: dir + "/" + v.node.name, Version: v.version}
}

// now returns the server's clock, in milliseconds: the modification time
// of the clock node, written for it. Only waiting places' and holder
// records' expiry read it; no hold is judged by a time.
func (s *Store) now(ctx context.Context) (int64, error) {
	st, err := call(ctx, func() (*zk.Stat, error) { return s.conn.Set(s.clock, clockMarker, -1) })
	if err != nil {
		return 0, fmt.Errorf("zkstore: read the server's clock (set %s): %w", s.clock, err)
	}
	return st.Mtime, nil
}

// judge reads each node, all at once, and says of each whether it is
// alive: a hold while it exists (it is an ephemeral node of its Client's
// session, which is its lease); a waiting place while it was last
// refreshed less than its wait ago, by the server's clock (read only when
// there is a place). The views are in creation order (czxid).
func (s *Store) judge(ctx context.Context, name string, nodes []lockNode) ([]nodeView, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	dir := s.dir(name)
	views := make([]nodeView, len(nodes))
	mtimes := make([]int64, len(nodes))
	errs := make([]error, len(nodes)+1)
	var now int64
	var wg sync.WaitGroup
	places := false
	for i, n := range nodes {
		views[i].node = n
		places = places || !n.kind.hold()
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
				views[i].d, views[i].version, views[i].czxid, mtimes[i] = d, st.Version, st.Czxid, st.Mtime
			}
		})
	}
	if places {
		// Owner: judge, which waits for it (wg.Wait); ctx bounds it.
		wg.Go(func() { now, errs[len(errs)-1] = s.now(ctx) })
	}
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
		switch {
		case v.gone:
		case v.node.kind.hold():
			v.alive, v.remaining = true, v.d
		default:
			if end := mtimes[i] + v.d.Milliseconds(); now < end {
				v.alive, v.remaining = true, time.Duration(end-now)*time.Millisecond
			}
		}
	}
	slices.SortStableFunc(views, func(a, b nodeView) int { return cmp.Compare(a.czxid, b.czxid) })
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
// as its session, which ends a session timeout after the leader last heard
// of it; a holder counting a longer lease could believe it holds a lock
// the server gave away. It also refuses a lease when the server granted a
// shorter session timeout than the Store planned its Drift for (see
// heard.go): the Client's margin would then be too small.
func (s *Store) checkLease(req driver.Request) error {
	t := s.SessionTimeout()
	if t <= 0 {
		return nil
	}
	if req.Lease > t {
		return fmt.Errorf("zkstore: lease %v of lock %q is longer than the ZooKeeper session timeout %v (asked %v; the server grants between its minSessionTimeout and maxSessionTimeout): a lock cannot outlive its session; use a shorter lease or a longer Options.SessionTimeout: %w",
			req.Lease, req.Name, t, s.requested, driver.ErrUnsupported)
	}
	if s.validFor(t) <= 0 {
		return fmt.Errorf("zkstore: lock %q: the server granted a session timeout of %v, no longer than Options.TickTime %v: no hold is safe after a keep-alive (it is valid (timeout − tick)/2); set TickTime to the servers' tickTime, or ask for a longer Options.SessionTimeout: %w",
			req.Name, t, s.tick, driver.ErrUnsupported)
	}
	if planned := s.validFor(s.configured()); s.validFor(t) < min(req.Lease, planned) {
		return fmt.Errorf("zkstore: lock %q: the server granted a session timeout of %v, shorter than the %v the Store planned for (asked %v, at least two ticks of %v): a hold is then safe for %v after each keep-alive, less than the %v its Client keeps it valid for (lease %v); ask for the timeout the server grants (Options.SessionTimeout %v), or use a lease of %v or less: %w",
			req.Name, t, s.configured(), s.requested, s.tick, s.validFor(t), min(req.Lease, planned), req.Lease, t, s.validFor(t), driver.ErrUnsupported)
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

// Acquire implements [driver.Store]. It opens the Client's ZooKeeper
// session if it has none, reads the lock's directory (one round trip) and,
// unless its rules keep the request out, takes the lock with one
// multi-operation on that session: it bumps the directory's data version (a
// compare-and-set against the version it read, so that of two racing
// acquirers one wins), deletes waiting places that lapsed, and creates the
// owner's ephemeral sequential hold node. The fencing token is the
// multi-operation's zxid, the hold node's czxid. When other nodes are
// there, it first reads them (their data: a hold's lease, a place's wait;
// and, when there are places, the server's clock). A refused request that
// waits (KindFair, KindWrite with Wait > 0) creates or refreshes its
// waiting place.
func (s *Store) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	from := mono()
	if err := s.checkLease(req); err != nil {
		return driver.Grant{}, err
	}
	if err := s.ensureRoot(ctx); err != nil {
		return driver.Grant{}, err
	}
	cs, err := s.openSession(ctx, driver.OwnerClient(req.Owner), max(req.Lease, req.Wait))
	if err != nil {
		return driver.Grant{}, err
	}
	if err := s.checkLease(req); err != nil { // the session is established now
		return driver.Grant{}, err
	}
	for range maxAttempts {
		d, err := s.readDir(ctx, req.Name)
		if err != nil {
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
		if own, ok := d.own(req.Owner, kindsOf(req.Kind)...); ok && own.epoch == cs.epoch() {
			g, again, err := s.refresh(ctx, req, cs, own, from)
			if again {
				continue
			}
			if errors.Is(err, errEnded) {
				return driver.Grant{}, err // the tenure ended with its session
			}
			return g, err
		}
		if req.Kind == driver.KindWrite {
			if r, ok := d.own(req.Owner, nkRead); ok && r.epoch == cs.epoch() {
				return driver.Grant{}, fmt.Errorf("zkstore: acquire %q: %w", req.Name, driver.ErrUpgrade)
			}
		}
		views, err := s.judge(ctx, req.Name, d.nodes)
		if err != nil {
			return driver.Grant{}, err
		}
		stale(views, cs)
		if b, ok := blocker(req, d, views); ok {
			if b.place != nkLock && req.Wait > 0 {
				if err := s.keepPlace(ctx, req, cs, b.place, d); errors.Is(err, errEnded) {
					if cs, err = s.openSession(ctx, cs.client, max(req.Lease, req.Wait)); err != nil {
						return driver.Grant{}, err
					}
					continue
				} else if err != nil {
					return driver.Grant{}, err
				}
			}
			return driver.Grant{Remaining: b.remaining}, nil
		}
		var drops []any
		for _, v := range views {
			mine := v.node.owner == req.Owner && (v.node.kind == nkQueue || v.node.kind == nkWaitW)
			if !v.gone && (!v.alive || mine) {
				drops = append(drops, v.drop(s.dir(req.Name)))
			}
		}
		fences, again, err := s.grant(ctx, []driver.Request{req}, cs, []dirState{d}, drops, from)
		if again {
			continue
		}
		if errors.Is(err, errEnded) { // its timer ran out meanwhile: open another
			if cs, err = s.openSession(ctx, cs.client, max(req.Lease, req.Wait)); err != nil {
				return driver.Grant{}, err
			}
			continue
		}
		if err != nil {
			return driver.Grant{}, err
		}
		return driver.Grant{Acquired: true, Fence: fences[0]}, nil
	}
	return driver.Grant{}, fmt.Errorf("zkstore: acquire %q: the lock changed under every one of %d attempts", req.Name, maxAttempts)
}

// errEnded is wrapped by the error of a write on a Client's session that
// had ended.
var errEnded = errors.New("its ZooKeeper session ended")

// stale marks dead the holds of cs's Client made by an earlier session of
// it: the Store ended that session before opening cs, and its nodes go with
// it (at once, or when the server expires it if the close could not reach
// it), so they must not keep the Client from its own lock.
func stale(views []nodeView, cs *clientSession) {
	for i := range views {
		v := &views[i]
		if v.node.kind.hold() && v.node.epoch != cs.epoch() && driver.OwnerClient(v.node.owner) == cs.client {
			v.alive = false
		}
	}
}

// epoch is the epoch in the names of cs's nodes: its session id.
func (cs *clientSession) epoch() uint64 { return uint64(cs.id) }

// write runs f, a write on cs's session, unless cs is not connected now: a
// request made while disconnected waits in go-zookeeper's queue and is
// sent after a reconnect, late (a write can still be late when the
// connection drops after this check). It fails with driver.ErrNotHeld
// when cs has ended.
func write[T any](ctx context.Context, s *Store, cs *clientSession, what, name string, f func() (T, error)) (T, error) {
	var zero T
	if !s.live(cs) {
		s.end(cs)
		return zero, fmt.Errorf("zkstore: %s %q: %w: client %q: %w", what, name, driver.ErrNotHeld, cs.client, errEnded)
	}
	if !cs.connected() {
		return zero, fmt.Errorf("zkstore: %s %q: not connected to ZooKeeper (%v)", what, name, cs.conn.State())
	}
	return heardCall(ctx, s, cs, f)
}

// keepPlace creates req's waiting place of kind, an ephemeral node of
// cs's session, or refreshes it, so that it lasts req.Wait from now.
func (s *Store) keepPlace(ctx context.Context, req driver.Request, cs *clientSession, kind nodeKind, d dirState) error {
	dir := s.dir(req.Name)
	data := nodeData(kind, req.Wait)
	if p, ok := d.own(req.Owner, kind); ok && p.epoch == cs.epoch() {
		_, err := write(ctx, s, cs, "keep the waiting place on", req.Name, func() (*zk.Stat, error) { return cs.conn.Set(dir+"/"+p.name, data, -1) })
		if !errors.Is(err, zk.ErrNoNode) { // dropped meanwhile: take a new place
			if err == nil {
				s.touch(cs, req.Wait)
			}
			return wrapErr("keep the waiting place on", req.Name, err)
		}
	}
	_, err := write(ctx, s, cs, "take a waiting place on", req.Name, func() (string, error) {
		return cs.conn.Create(dir+"/"+nodeName(kind, cs.epoch(), req.Owner), data, zk.FlagEphemeralSequential, s.acl)
	})
	if err == nil {
		s.touch(cs, req.Wait)
	}
	return wrapErr("take a waiting place on", req.Name, err)
}

// wrapErr adds what was done, and on which lock, to an error.
func wrapErr(what, name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("zkstore: %s %q: %w", what, name, err)
}

// changed reports whether a multi-operation failed because a znode it
// named changed since it was read: the caller starts over.
func changed(err error) bool {
	return errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNodeExists)
}

// grant takes the locks of reqs, all of one owner, in one multi-operation
// on cs's session (see Acquire): ds are their directories as read, drops
// the deletions of places that lapsed. A name the owner holds already
// under cs (AcquireMany's retry) has its lease set instead, and keeps its
// token. It returns the fencing tokens: a new hold's is the operation's
// zxid. again reports that something changed since the directories were
// read, and the caller must start over. from is when the acquire began:
// the grant waits until the leader is known to have heard of cs recently
// enough (prove).
func (s *Store) grant(ctx context.Context, reqs []driver.Request, cs *clientSession, ds []dirState, drops []any, from time.Duration) (fences []int64, again bool, err error) {
	lease := reqs[0].Lease
	for _, r := range reqs {
		lease = max(lease, r.Lease)
	}
	var ops []any
	after := make([]dirState, len(reqs))
	owns := make([]bool, len(reqs))
	for i, r := range reqs {
		d := ds[i]
		if own, ok := d.own(r.Owner, kindsOf(r.Kind)...); ok && own.epoch == cs.epoch() {
			owns[i] = true
			ops = append(ops, &zk.CheckVersionRequest{Path: s.dir(r.Name), Version: d.version})
			continue
		}
		d.sem = r.Kind == driver.KindPermit // an empty directory becomes what is asked
		if d.sem && !ds[i].sem {
			d.permits = r.Permits
		}
		after[i] = d
		ops = append(ops, &zk.SetDataRequest{Path: s.dir(r.Name), Data: d.data(), Version: d.version})
	}
	ops = append(ops, drops...)
	first := len(ops)
	for i, r := range reqs {
		if owns[i] {
			own, _ := ds[i].own(r.Owner, kindsOf(r.Kind)...)
			ops = append(ops, &zk.SetDataRequest{Path: s.dir(r.Name) + "/" + own.name, Data: nodeData(own.kind, r.Lease), Version: -1})
			continue
		}
		kind := holdKind(r.Kind)
		ops = append(ops, &zk.CreateRequest{Path: s.dir(r.Name) + "/" + nodeName(kind, cs.epoch(), r.Owner),
			Data: nodeData(kind, r.Lease), Acl: s.acl, Flags: zk.FlagEphemeralSequential})
	}
	if err := s.prove(ctx, cs, from); err != nil {
		return nil, false, wrapErr("acquire", reqs[0].Name, err)
	}
	res, err := write(ctx, s, cs, "acquire", reqs[0].Name, func() ([]zk.MultiResponse, error) { return cs.conn.Multi(ops...) })
	if changed(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, wrapErr("acquire", reqs[0].Name, err)
	}
	if !s.touch(cs, lease) {
		return nil, false, fmt.Errorf("zkstore: acquire %q: %w: client %q: %w", reqs[0].Name, driver.ErrNotHeld, cs.client, errEnded)
	}
	var zxid int64
	for i := range reqs {
		if !owns[i] {
			zxid = res[i].Stat.Mzxid // the operation's zxid
		}
	}
	fences = make([]int64, len(reqs))
	for i, r := range reqs {
		if owns[i] {
			fences[i] = res[first+i].Stat.Czxid
			continue
		}
		fences[i] = zxid
		d := after[i]
		s.knowDir(s.dir(r.Name), dirData{czxid: d.czxid, version: d.version + 1, sem: d.sem, permits: d.permits})
		s.hold(r.Name, r.Owner, path.Base(res[first+i].String))
	}
	return fences, false, nil
}

// refresh is an acquire by the owner that holds the lock under cs: it sets
// the lock's lease to req.Lease, and returns the tenure's fencing token,
// the hold node's czxid. from is when the acquire began (see grant).
func (s *Store) refresh(ctx context.Context, req driver.Request, cs *clientSession, own lockNode, from time.Duration) (g driver.Grant, again bool, err error) {
	node := s.dir(req.Name) + "/" + own.name
	if err := s.prove(ctx, cs, from); err != nil {
		return driver.Grant{}, false, wrapErr("acquire", req.Name, err)
	}
	st, err := write(ctx, s, cs, "acquire", req.Name, func() (*zk.Stat, error) {
		return cs.conn.Set(node, nodeData(own.kind, req.Lease), -1)
	})
	if changed(err) {
		return driver.Grant{}, true, nil
	}
	if err != nil {
		return driver.Grant{}, false, wrapErr("acquire", req.Name, err)
	}
	if !s.touch(cs, req.Lease) {
		return driver.Grant{}, false, fmt.Errorf("zkstore: acquire %q: %w: client %q: %w", req.Name, driver.ErrNotHeld, cs.client, errEnded)
	}
	s.hold(req.Name, req.Owner, own.name)
	return driver.Grant{Acquired: true, Fence: st.Czxid}, false, nil
}
