package zkstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

// Release implements [driver.Store]: it deletes the owner's hold node,
// which wakes the lock's watchers, once it has read it and found a leash
// node's data (deleting at the version read). A hold node of a session that
// ended (the server deletes it, or has yet to) is not held: the release
// reports ErrNotHeld, and deletes it too. The directory is read on the
// Store's own connection, whose server may lag behind the one the hold was
// created on: a release that does not find the owner's node reads it again
// after a sync before it answers ErrNotHeld, which leaves a node it missed
// in place for as long as its session lives.
func (s *Store) Release(ctx context.Context, req driver.Request) error {
	var (
		own lockNode
		ok  bool
	)
	for synced := false; ; synced = true {
		d, err := s.readDir(ctx, req.Name)
		if err == nil {
			err = d.wrongKind(req.Name, req.Kind)
		}
		var nl *driver.NotALockError
		if errors.As(err, &nl) {
			return fmt.Errorf("zkstore: release %q: %w: %w", req.Name, driver.ErrNotHeld, nl)
		}
		if err != nil {
			return err
		}
		if own, ok = d.own(req.Owner, kindsOf(req.Kind)...); ok {
			break
		}
		if synced {
			return fmt.Errorf("zkstore: release %q by %q: %w", req.Name, req.Owner, driver.ErrNotHeld)
		}
		if err := s.sync(ctx, s.dir(req.Name)); err != nil {
			return fmt.Errorf("zkstore: release %q: %w", req.Name, err)
		}
	}
	cs := s.sessionOf(driver.OwnerClient(req.Owner))
	held := cs != nil && cs.epoch() == own.epoch && s.live(cs)
	deleted, err := s.deleteNode(ctx, req.Name, own)
	if deleted || err == nil {
		s.hold(req.Name, req.Owner, "")
	}
	switch {
	case err != nil:
		return fmt.Errorf("zkstore: release %q: %w", req.Name, err)
	case !deleted:
		return fmt.Errorf("zkstore: release %q by %q: %w", req.Name, req.Owner, driver.ErrNotHeld)
	case !held:
		return fmt.Errorf("zkstore: release %q by %q: %w: its session had ended", req.Name, req.Owner, driver.ErrNotHeld)
	}
	return nil
}

// deleteNode deletes n, a node of name's directory, if it still holds a
// leash node's data; deleted is false when it was gone already. A node
// whose data is not leash's is refused with a *driver.NotALockError.
func (s *Store) deleteNode(ctx context.Context, name string, n lockNode) (deleted bool, err error) {
	p := s.dir(name) + "/" + n.name
	for range maxAttempts {
		data, st, err := getData(ctx, s, p)
		if errors.Is(err, zk.ErrNoNode) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if _, ok := parseNodeData(n.kind, data); !ok {
			return false, &driver.NotALockError{Name: name,
				Found: fmt.Sprintf("leash lock znode %s with a child %q holding %s, not a leash lock node", s.dir(name), n.name, describeData(data))}
		}
		err = call0(ctx, func() error { return s.conn.Delete(p, st.Version) })
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return false, nil
		case errors.Is(err, zk.ErrBadVersion):
			continue // refreshed meanwhile: read it again
		}
		return err == nil, err
	}
	return false, fmt.Errorf("node %s changed under every one of %d attempts", p, maxAttempts)
}

// Withdraw implements [driver.Withdrawer]: it deletes the owner's place in
// the fair queue (KindFair) or its waiting writer's mark (KindWrite), once
// it has found a leash node's data there.
func (s *Store) Withdraw(ctx context.Context, req driver.Request) error {
	kind := nkQueue
	if req.Kind == driver.KindWrite {
		kind = nkWaitW
	}
	d, err := s.readDir(ctx, req.Name)
	var nl *driver.NotALockError
	if errors.As(err, &nl) {
		return nil // no place of ours there
	}
	if err != nil {
		return err
	}
	for _, n := range d.nodes {
		if n.kind == kind && n.owner == req.Owner {
			if _, err := s.deleteNode(ctx, req.Name, n); err != nil {
				return fmt.Errorf("zkstore: withdraw from %q: %w", req.Name, err)
			}
		}
	}
	return nil
}
