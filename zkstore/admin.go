package zkstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

// Inspect implements [driver.Admin]: the holders are the owners of the hold
// nodes there (each lives as long as its Client's session), Remaining is a
// hold's lease as granted (ZooKeeper does not tell when its Client last
// kept its session alive, from which the lease counts; a frozen Client's
// hold lasts until the server expires its session), Queued counts the
// live fair-queue places and waiting writers' marks, and Fence is the zxid
// of the last grant (for a semaphore, of its last grant or resize), which
// the lock's directory keeps as its data's modification zxid. Waiters is
// -1: ZooKeeper does not tell who watches a znode.
func (s *Store) Inspect(ctx context.Context, name string) (driver.Info, error) {
	info := driver.Info{Name: name, Kind: driver.KindMutex, Remaining: -1, Waiters: -1}
	d, err := s.readDir(ctx, name)
	if err != nil || !d.exists {
		return info, err
	}
	info.Fence = d.fence()
	if d.sem {
		info.Kind, info.Permits = driver.KindPermit, d.permits
	}
	if len(d.nodes) == 0 {
		return info, nil
	}
	views, err := s.judge(ctx, name, d.nodes)
	if err != nil {
		return info, err
	}
	for _, v := range views {
		switch {
		case !v.alive:
		case v.node.kind.hold():
			kind := v.node.kind.driverKind()
			remaining := v.remaining
			if v.node.kind.exclusive() {
				remaining = -1 // one lease, the lock's
			}
			info.Held, info.Kind = true, kind
			info.Owners = append(info.Owners, driver.OwnerHolds{Owner: v.node.owner, Holds: 1, Kind: kind, Remaining: remaining})
			info.Remaining = max(info.Remaining, v.remaining)
		default:
			info.Queued++
		}
	}
	return info, nil
}

// List implements [driver.Admin]: it lists the lock directories under
// Root/locks whose names match pattern and that a live holder holds.
// Znodes there that are not leash lock directories are left out.
func (s *Store) List(ctx context.Context, pattern string) ([]string, error) {
	re, err := driver.Glob(pattern)
	if err != nil {
		return nil, err
	}
	children, err := call(ctx, func() ([]string, error) { c, _, err := s.conn.Children(s.locks); return c, err })
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zkstore: list %s: %w", s.locks, err)
	}
	var names []string
	for _, c := range children {
		if name, ok := unescapeSegment(c); ok && (pattern == "" || re.MatchString(name)) {
			names = append(names, name)
		}
	}
	held := make([]bool, len(names))
	errs := make([]error, len(names))
	sem := make(chan struct{}, renewConcurrency)
	var wg sync.WaitGroup
	for i, name := range names {
		sem <- struct{}{}
		// Owner: List, which waits for it (wg.Wait); ctx bounds it.
		wg.Go(func() {
			defer func() { <-sem }()
			info, err := s.Inspect(ctx, name)
			var nl *driver.NotALockError
			if errors.As(err, &nl) {
				return
			}
			held[i], errs[i] = info.Held, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("zkstore: list %q: %w", pattern, err)
	}
	var out []string
	for i, name := range names {
		if held[i] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ForceRelease implements [driver.Admin]: it deletes every node of name —
// holds, permits, queue places, writers' marks — each only if it still
// has the data it was read with (a leash node's), which wakes every
// watcher. A holder learns of it at its next renewal, whose check finds
// its node gone. The directory stays: its data version and zxid carry the
// lock's fencing.
func (s *Store) ForceRelease(ctx context.Context, name string) (bool, error) {
	for range maxAttempts {
		d, err := s.readDir(ctx, name)
		if err != nil || !d.exists || len(d.nodes) == 0 {
			return false, err
		}
		dir := s.dir(name)
		var ops []any
		for _, n := range d.nodes {
			data, st, err := getData(ctx, s, dir+"/"+n.name)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return false, fmt.Errorf("zkstore: force release %q: %w", name, err)
			}
			if _, ok := parseNodeData(n.kind, data); !ok {
				return false, &driver.NotALockError{Name: name,
					Found: fmt.Sprintf("leash lock znode %s with a child %q holding %s, not a leash lock node", dir, n.name, describeData(data))}
			}
			ops = append(ops, &zk.DeleteRequest{Path: dir + "/" + n.name, Version: st.Version})
		}
		if len(ops) == 0 {
			return false, nil
		}
		_, err = call(ctx, func() ([]zk.MultiResponse, error) { return s.conn.Multi(ops...) })
		if changed(err) {
			continue // a node left or changed meanwhile: read again
		}
		if err != nil {
			return false, fmt.Errorf("zkstore: force release %q: %w", name, err)
		}
		return true, nil
	}
	return false, fmt.Errorf("zkstore: force release %q: it changed under every one of %d attempts", name, maxAttempts)
}

// SetPermits implements [driver.PermitSetter]: it sets the permit count in
// the semaphore's directory (creating it if there is none), which wakes the
// semaphore's watchers.
func (s *Store) SetPermits(ctx context.Context, name string, n int) error {
	if n < 0 {
		return fmt.Errorf("zkstore: set permits of %q to %d: a count cannot be negative", name, n)
	}
	if err := s.ensureRoot(ctx); err != nil {
		return err
	}
	for range maxAttempts {
		d, err := s.readDir(ctx, name)
		if err != nil {
			return err
		}
		if !d.exists {
			if err := s.createDir(ctx, name, true, n); err != nil {
				return err
			}
			continue
		}
		if err := d.wrongKind(name, driver.KindPermit); err != nil {
			return err
		}
		_, err = call(ctx, func() (*zk.Stat, error) { return s.conn.Set(s.dir(name), semData(n), d.version) })
		if changed(err) {
			continue
		}
		return wrapErr("set the permits of", name, err)
	}
	return fmt.Errorf("zkstore: set permits of %q: it changed under every one of %d attempts", name, maxAttempts)
}
