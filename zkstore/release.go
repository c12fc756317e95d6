package zkstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

// Release implements [driver.Store]: it deletes the owner's hold node,
// which wakes the lock's watchers. A hold node of a session that ended is
// deleted too, but the release reports ErrNotHeld: the tenure had ended.
func (s *Store) Release(ctx context.Context, req driver.Request) error {
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
	own, ok := d.own(req.Owner, kindsOf(req.Kind)...)
	if !ok {
		return fmt.Errorf("zkstore: release %q by %q: %w", req.Name, req.Owner, driver.ErrNotHeld)
	}
	cs, err := s.session(ctx, driver.OwnerClient(req.Owner))
	if err != nil {
		return err
	}
	err = call0(ctx, func() error { return s.conn.Delete(s.dir(req.Name)+"/"+own.name, -1) })
	if err == nil || errors.Is(err, zk.ErrNoNode) {
		s.hold(req.Name, req.Owner, "")
	}
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

// Withdraw implements [driver.Withdrawer]: it deletes the owner's place in
// the fair queue (KindFair) or its waiting writer's mark (KindWrite).
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
			err := call0(ctx, func() error { return s.conn.Delete(s.dir(req.Name)+"/"+n.name, -1) })
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return fmt.Errorf("zkstore: withdraw from %q: %w", req.Name, err)
			}
		}
	}
	return nil
}
