package zkstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

// Release implements [driver.Store]: it deletes the owner's lock node,
// which wakes every watcher of the lock. A lock node of a session that
// ended is deleted too, but the release reports ErrNotHeld: the tenure had
// ended.
func (s *Store) Release(ctx context.Context, req driver.Request) error {
	if req.Kind != driver.KindMutex {
		return fmt.Errorf("zkstore: release %q: %w", req.Name, driver.Unsupported(s, req.Kind.String()+" locks"))
	}
	d, err := s.readDir(ctx, req.Name)
	var nl *driver.NotALockError
	if errors.As(err, &nl) {
		return fmt.Errorf("zkstore: release %q: %w: %w", req.Name, driver.ErrNotHeld, nl)
	}
	if err != nil {
		return err
	}
	own, ok := find(d.nodes, req.Owner)
	if !ok {
		return fmt.Errorf("zkstore: release %q by %q: %w", req.Name, req.Owner, driver.ErrNotHeld)
	}
	cs, err := s.session(ctx, driver.OwnerClient(req.Owner))
	if err != nil {
		return err
	}
	path := s.dir(req.Name) + "/" + own.name
	err = call0(ctx, func() error { return s.conn.Delete(path, -1) })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("zkstore: release %q by %q: %w", req.Name, req.Owner, driver.ErrNotHeld)
	case err != nil:
		return fmt.Errorf("zkstore: release %q: %w", req.Name, err)
	case cs == nil || cs.epoch != own.epoch:
		return fmt.Errorf("zkstore: release %q by %q: %w: its session had ended", req.Name, req.Owner, driver.ErrNotHeld)
	}
	return nil
}

// find returns owner's lock node among nodes.
func find(nodes []lockNode, owner string) (lockNode, bool) {
	for _, n := range nodes {
		if n.owner == owner {
			return n, true
		}
	}
	return lockNode{}, false
}
