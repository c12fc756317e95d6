package zkstore

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

// dirWatch is what one ZooKeeper watch on a lock directory saw: its nodes
// and their change count, and, for a semaphore's watch, its permit count.
type dirWatch struct {
	nodes    map[string]lockNode
	cversion int32
	events   <-chan zk.Event
	permits  int
	data     <-chan zk.Event // the directory's data, for a semaphore's watch
}

// arm reads dir's children and leaves a watch on them, or, when dir does
// not exist, on its creation; withData also watches its data.
func (s *Store) arm(ctx context.Context, dir string, withData bool) (dirWatch, error) {
	type got struct {
		children []string
		st       *zk.Stat
		ch       <-chan zk.Event
	}
	g, err := call(ctx, func() (got, error) { c, st, ch, err := s.conn.ChildrenW(dir); return got{c, st, ch}, err })
	if errors.Is(err, zk.ErrNoNode) {
		type gotE struct {
			ok bool
			ch <-chan zk.Event
		}
		e, err := call(ctx, func() (gotE, error) { ok, _, ch, err := s.conn.ExistsW(dir); return gotE{ok, ch}, err })
		if err != nil {
			return dirWatch{}, err
		}
		if e.ok { // created in between: watch its children
			return s.arm(ctx, dir, withData)
		}
		return dirWatch{nodes: map[string]lockNode{}, events: e.ch}, nil
	}
	if err != nil {
		return dirWatch{}, err
	}
	w := dirWatch{nodes: make(map[string]lockNode, len(g.children)), cversion: g.st.Cversion, events: g.ch}
	for _, c := range g.children {
		if n, ok := parseNode(c); ok {
			w.nodes[c] = n
		}
	}
	if withData {
		type gotD struct {
			data []byte
			ch   <-chan zk.Event
		}
		d, err := call(ctx, func() (gotD, error) { b, _, ch, err := s.conn.GetW(dir); return gotD{b, ch}, err })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return dirWatch{}, err
		}
		_, w.permits, _ = parseDirData(d.data)
		w.data = d.ch
	}
	return w, nil
}

// wakeFor says whom a change from w to next wakes, for the watchers of
// kind: ok is false when it wakes no one.
func wakeFor(kind driver.Kind, w, next dirWatch) (driver.Wake, bool) {
	var left []lockNode
	for name, n := range w.nodes {
		if _, ok := next.nodes[name]; !ok {
			left = append(left, n)
		}
	}
	added := 0
	for name := range next.nodes {
		if _, ok := w.nodes[name]; !ok {
			added++
		}
	}
	if len(left) == 0 && next.cversion-w.cversion > int32(added) {
		return driver.Wake{To: driver.WakeAll}, true // a node came and went between two reads
	}
	has := func(nodes []lockNode, kinds ...nodeKind) bool {
		for _, n := range nodes {
			for _, k := range kinds {
				if n.kind == k {
					return true
				}
			}
		}
		return false
	}
	var now []lockNode
	for _, n := range next.nodes {
		now = append(now, n)
	}
	switch kind {
	case driver.KindFair:
		if !has(left, nkLock, nkWrite, nkRead, nkQueue) || has(now, nkLock, nkWrite, nkRead) {
			return driver.Wake{}, false
		}
		if has(left, nkQueue) && has(left, nkLock, nkWrite, nkRead) {
			return driver.Wake{To: driver.WakeAll}, true // forced free
		}
		head, ok := lockNode{}, false
		for _, n := range now {
			if n.kind == nkQueue && (!ok || n.seq < head.seq) {
				head, ok = n, true
			}
		}
		if !ok {
			return driver.Wake{}, false
		}
		return driver.Wake{To: driver.WakeHead, Head: head.owner}, true
	case driver.KindRead, driver.KindWrite:
		switch {
		case has(left, nkWaitW, nkLock):
			return driver.Wake{To: driver.WakeAll}, true // a mark withdrawn or forced, a mutex released
		case has(left, nkWrite) && has(now, nkWaitW):
			return driver.Wake{To: driver.WakeWriter}, true
		case has(left, nkWrite):
			return driver.Wake{To: driver.WakeReaders}, true
		case has(left, nkRead) && !has(now, nkRead) && has(now, nkWaitW):
			return driver.Wake{To: driver.WakeWriter}, true
		}
		return driver.Wake{}, false
	case driver.KindPermit:
		if has(left, nkPermit) {
			return driver.Wake{To: driver.WakeOne}, true
		}
		return driver.Wake{}, false
	}
	if has(left, nkLock, nkWrite, nkRead) {
		return driver.Wake{To: driver.WakeOne}, true
	}
	return driver.Wake{}, false
}

// Watch implements [driver.Watcher] with a ZooKeeper watch on the lock's
// directory, which the server fires when a node is created or deleted: a
// release, a force release, a takeover of an expired lock, a withdrawal,
// the end of a holder's ZooKeeper session. Each event re-reads the
// children (leaving a new watch) and wakes whom the change concerns: for a
// fair lock only the new head of the queue (WakeHead), as the ZooKeeper
// lock recipe wakes only a node's successor, so no herd retries; for a
// read-write lock the next writer or the readers; for a mutex or a
// semaphore one waiter per client. A semaphore's watch also watches its
// permit count, and wakes everyone when it changes. A watch the server
// dropped (the Store's session expired) wakes everyone. ZooKeeper keeps
// watches across a reconnect within the session, and reports what changed
// meanwhile. One goroutine serves each Watch call until stop.
func (s *Store) Watch(ctx context.Context, kind driver.Kind, name string, wake func(driver.Wake)) (stop func(), err error) {
	if err := s.ensureRoot(ctx); err != nil {
		return nil, err
	}
	dir := s.dir(name)
	withData := kind == driver.KindPermit
	w, err := s.arm(ctx, dir, withData)
	if err != nil {
		return nil, wrapErr("watch", name, err)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	// Owner: this Watch call; it ends when stop is called or the Store is closed.
	go func() {
		defer close(stopped)
		s.serveWatch(done, kind, dir, w, wake)
	}()
	return func() { close(done); <-stopped }, nil
}

// serveWatch waits for w's events and re-arms, until done or the Store is
// closed.
func (s *Store) serveWatch(done <-chan struct{}, kind driver.Kind, dir string, w dirWatch, wake func(driver.Wake)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // owner: serveWatch; ends with it (cancel) or at done/close
		select {
		case <-done:
		case <-s.closed:
		case <-ctx.Done():
		}
		cancel()
	}()
	withData := kind == driver.KindPermit
	for {
		var ev zk.Event
		select {
		case ev = <-w.events:
		case ev = <-w.data:
		case <-ctx.Done():
			return
		}
		lost := ev.Type == zk.EventNotWatching
		for {
			next, err := s.arm(ctx, dir, withData)
			if err == nil {
				if lost || withData && next.permits != w.permits {
					wake(driver.Wake{To: driver.WakeAll})
				} else if msg, ok := wakeFor(kind, w, next); ok {
					wake(msg)
				}
				w = next
				break
			}
			lost = true // whatever happens meanwhile is not seen: wake everyone once re-armed
			if errors.Is(err, zk.ErrClosing) || s.isClosed() {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond): // the connection is down; go-zookeeper reconnects
			}
		}
	}
}

func (s *Store) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}
