package zkstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

// dirState is a lock directory as one read saw it.
type dirState struct {
	exists  bool
	czxid   int64
	version int32 // data version: the number of grants (and resizes) so far
	mzxid   int64 // the zxid of the last grant (or resize)
	sem     bool  // a semaphore's directory
	permits int   // a semaphore's permit count
	nodes   []lockNode
}

// dirData is what the Store knows of a lock directory's data.
type dirData struct {
	czxid   int64 // the directory it was read from
	version int32
	sem     bool
	permits int
}

// maxDirs bounds the Store's record of lock directories' data, so that it
// stays small whatever the number of names.
const maxDirs = 1 << 16

// readDir reads name's lock directory: its children, and its data unless
// the Store knows it already at the directory's data version.
func (s *Store) readDir(ctx context.Context, name string) (dirState, error) {
	dir := s.dir(name)
	type got struct {
		children []string
		st       *zk.Stat
	}
	for range maxAttempts {
		g, err := call(ctx, func() (got, error) { c, st, err := s.conn.Children(dir); return got{c, st}, err })
		if errors.Is(err, zk.ErrNoNode) {
			return dirState{}, nil
		}
		if err != nil {
			return dirState{}, fmt.Errorf("zkstore: read lock %q: %w", name, err)
		}
		s.mu.Lock()
		dd, known := s.dirs[dir]
		s.mu.Unlock()
		if !known || dd.czxid != g.st.Czxid || dd.version != g.st.Version {
			data, st, err := getData(ctx, s, dir)
			if errors.Is(err, zk.ErrNoNode) {
				return dirState{}, nil
			}
			if err != nil {
				return dirState{}, fmt.Errorf("zkstore: read lock %q: %w", name, err)
			}
			sem, permits, ok := parseDirData(data)
			if !ok {
				return dirState{}, &driver.NotALockError{Name: name,
					Found: fmt.Sprintf("znode %s with %s and %d children, not a leash lock", dir, describeData(data), len(g.children))}
			}
			if st.Czxid != g.st.Czxid || st.Version != g.st.Version {
				continue // changed between the two reads
			}
			dd = dirData{czxid: st.Czxid, version: st.Version, sem: sem, permits: permits}
			s.knowDir(dir, dd)
		}
		nodes, bad := parseChildren(g.children)
		if bad != "" {
			return dirState{}, &driver.NotALockError{Name: name,
				Found: fmt.Sprintf("leash lock znode %s with a child %q that is not a leash lock node", dir, bad)}
		}
		return dirState{exists: true, czxid: g.st.Czxid, version: g.st.Version, mzxid: g.st.Mzxid, sem: dd.sem, permits: dd.permits, nodes: nodes}, nil
	}
	return dirState{}, fmt.Errorf("zkstore: read lock %q: it changed under every one of %d reads", name, maxAttempts)
}

// knowDir records a lock directory's data.
func (s *Store) knowDir(dir string, dd dirData) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.dirs) >= maxDirs {
		clear(s.dirs)
	}
	s.dirs[dir] = dd
}

// fence returns the last fencing token granted on a directory, 0 if none.
func (d dirState) fence() int64 {
	if d.version == 0 {
		return 0
	}
	return d.mzxid
}

// data is the directory's data.
func (d dirState) data() []byte {
	if d.sem {
		return semData(d.permits)
	}
	return dirMarker
}

// own returns owner's node of one of kinds.
func (d dirState) own(owner string, kinds ...nodeKind) (lockNode, bool) {
	for _, n := range d.nodes {
		if n.owner == owner {
			for _, k := range kinds {
				if n.kind == k {
					return n, true
				}
			}
		}
	}
	return lockNode{}, false
}

// kindsOf are the node kinds a request's owner may hold its lock as: the
// exclusive kinds are one lock (a fair hold is released as a mutex).
func kindsOf(k driver.Kind) []nodeKind {
	switch k {
	case driver.KindRead:
		return []nodeKind{nkRead}
	case driver.KindPermit:
		return []nodeKind{nkPermit}
	}
	return []nodeKind{nkLock, nkWrite}
}

// wrongKind returns the refusal of a request of kind on a directory that
// holds the other kind of lock (a semaphore or not), or nil. A semaphore's
// directory keeps its permit count when no one holds or waits on it (as
// the other stores keep a semaphore's count), so it stays a semaphore; any
// other directory no one holds or waits on becomes whatever is asked.
func (d dirState) wrongKind(name string, kind driver.Kind) error {
	if d.exists && d.sem && kind != driver.KindPermit {
		return &driver.NotALockError{Name: name, Found: "a semaphore, not a mutex or readers-writer lock"}
	}
	if !d.exists || len(d.nodes) == 0 {
		return nil
	}
	switch {
	case !d.sem && kind == driver.KindPermit:
		return &driver.NotALockError{Name: name, Found: "a mutex or readers-writer lock, not a semaphore"}
	}
	return nil
}
