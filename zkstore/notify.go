package zkstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

// dirWatch is what one ZooKeeper watch on a lock directory saw: its
// children and their change count.
type dirWatch struct {
	children map[string]bool
	cversion int32
	events   <-chan zk.Event
}

// arm reads dir's children and leaves a watch on them, or, when dir does
// not exist, on its creation.
func (s *Store) arm(ctx context.Context, dir string) (dirWatch, error) {
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
			return s.arm(ctx, dir)
		}
		return dirWatch{children: map[string]bool{}, events: e.ch}, nil
	}
	if err != nil {
		return dirWatch{}, err
	}
	w := dirWatch{children: make(map[string]bool, len(g.children)), cversion: g.st.Cversion, events: g.ch}
	for _, c := range g.children {
		w.children[c] = true
	}
	return w, nil
}

// released reports whether a lock node left between w and next: a child of
// w is missing from next, or more children changed than next shows added
// (a node came and went between the two reads).
func released(w, next dirWatch) bool {
	added := 0
	for c := range next.children {
		if !w.children[c] {
			added++
		}
	}
	for c := range w.children {
		if !next.children[c] {
			return true
		}
	}
	return next.cversion-w.cversion > int32(added)
}

// Watch implements [driver.Watcher] with a ZooKeeper watch on the lock's
// directory, which the server fires when a lock node is created or
// deleted: a release, a force release, a takeover of an expired lock, or
// the end of a holder's ZooKeeper session. Each event re-reads the
// children (leaving a new watch), and wakes with WakeOne when a node left.
// A watch the server dropped (the Store's session expired) wakes with
// WakeAll. ZooKeeper keeps watches across a reconnect within the session,
// and reports what changed meanwhile. One goroutine serves each Watch call
// until stop.
func (s *Store) Watch(ctx context.Context, kind driver.Kind, name string, wake func(driver.Wake)) (stop func(), err error) {
	if kind != driver.KindMutex {
		return nil, fmt.Errorf("zkstore: watch %q: %w", name, driver.Unsupported(s, kind.String()+" locks"))
	}
	if err := s.ensureRoot(ctx); err != nil {
		return nil, err
	}
	dir := s.dir(name)
	w, err := s.arm(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("zkstore: watch %q: %w", name, err)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	// Owner: this Watch call; it ends when stop is called or the Store is closed.
	go func() {
		defer close(stopped)
		s.serveWatch(done, dir, w, wake)
	}()
	return func() { close(done); <-stopped }, nil
}

// serveWatch waits for w's events and re-arms, until done or the Store is
// closed.
func (s *Store) serveWatch(done <-chan struct{}, dir string, w dirWatch, wake func(driver.Wake)) {
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
	for {
		var ev zk.Event
		select {
		case ev = <-w.events:
		case <-ctx.Done():
			return
		}
		lost := ev.Type == zk.EventNotWatching
		for {
			next, err := s.arm(ctx, dir)
			if err == nil {
				switch {
				case lost:
					wake(driver.Wake{To: driver.WakeAll})
				case released(w, next):
					wake(driver.Wake{To: driver.WakeOne})
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
