package zkstore

import (
	"sync"

	"github.com/go-zookeeper/zk"
)

// heldWatches are the watches a client's session keeps on the hold nodes
// of its locks, so that Renew need not read every node every round: a
// node's watch fires when it is deleted (or changed), and an unfired watch
// set in the session's current connection proves the node is still there
// (see Store.Renew for the ordering this relies on). Its state is its own,
// under its own mutex, which go-zookeeper's event callback takes; a caller
// that also holds Store.mu takes that first.
type heldWatches struct {
	mu sync.Mutex
	// gen counts the connection's state changes: a watch set in an earlier
	// generation may have missed an event (go-zookeeper sets its watches
	// again after a reconnect, but asynchronously, so the events of what
	// changed meanwhile may come after later responses).
	gen   uint64
	paths map[string]watchState // hold node path → its watch
}

// A watchState is what is known of the watch on one hold node.
type watchState struct {
	gen   uint64 // the generation it was set in
	set   bool   // the node existed when the watch was set
	fired bool   // an event came for the node since the watch was asked for
}

// event records a go-zookeeper event: from its event callback, in the order
// the server sent them, before any response that came after them.
func (w *heldWatches) event(ev zk.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.Type == zk.EventSession {
		w.gen++
		return
	}
	if st, ok := w.paths[ev.Path]; ok {
		st.fired = true
		w.paths[ev.Path] = st
	}
}

// generation returns the connection's generation.
func (w *heldWatches) generation() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen
}

// asking records that a watch on path is about to be asked for, and returns
// the generation it is asked in: an event for path from now on marks it
// fired.
func (w *heldWatches) asking(path string) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paths == nil {
		w.paths = make(map[string]watchState)
	}
	w.paths[path] = watchState{gen: w.gen}
	return w.gen
}

// answered records the answer to the watch asked for on path in
// generation gen: set when the node existed (and the watch is set).
func (w *heldWatches) answered(path string, gen uint64, exists bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.paths[path]
	switch {
	case !ok || st.gen != gen:
		return // forgotten, or asked again since
	case !exists:
		delete(w.paths, path)
	default:
		st.set = true
		w.paths[path] = st
	}
}

// holds reports whether path's watch proves its node exists as of the
// generation gen: set in that generation, and not fired (unless
// ignoreFired, the tests' negative control).
func (w *heldWatches) holds(path string, gen uint64, ignoreFired bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.paths[path]
	return ok && st.set && (!st.fired || ignoreFired) && st.gen == gen && w.gen == gen
}

// forget drops path's watch state: its hold is released or lost.
func (w *heldWatches) forget(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.paths, path)
}
