package etcdstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/leash-go/leash/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Release implements driver.Store: one transaction deletes the lock key if
// it holds exactly the value req's Acquire wrote. When it holds the owner's
// lock with another value (a retry changed its lease), a second transaction
// deletes it if it is unchanged since read. The deletion wakes the name's
// watchers (see Watch). A lock key that is absent or held by another owner
// is ErrNotHeld (and a *driver.NotALockError when the name is a semaphore
// and a lock's release is asked, or the reverse); one that holds something
// else is ErrNotHeld and a *driver.NotALockError, left as it is.
func (s *Store) Release(ctx context.Context, req driver.Request) error {
	err := s.release(ctx, req)
	if err == nil || errors.Is(err, driver.ErrNotHeld) {
		s.claims.drop(req) // the owner holds the key no more
	}
	return err
}

// release is Release, without the claims' record.
func (s *Store) release(ctx context.Context, req driver.Request) error {
	key := s.heldKey(req)
	cmp := clientv3.Compare(clientv3.Value(key), "=", encode(req))
	for range maxAttempts {
		resp, err := s.cli.Txn(ctx).If(cmp).Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return fmt.Errorf("etcdstore: release %q: %w", req.Name, err)
		}
		if resp.Succeeded {
			return nil
		}
		kv := only(resp.Responses[0])
		if kv == nil {
			if nal := s.otherKind(ctx, req); nal != nil {
				return fmt.Errorf("etcdstore: release %q: %w: %w", req.Name, driver.ErrNotHeld, nal)
			}
			return fmt.Errorf("etcdstore: release %q by %q: %w: no lock is held", req.Name, req.Owner, driver.ErrNotHeld)
		}
		v, ok := decodeKind(kv.Value, heldKind(req))
		if k := heldKind(req); k == kindMutex || k == kindWrite {
			v, ok = decode(kv.Value) // one exclusive lock, whichever kind took it
		}
		switch {
		case !ok:
			return fmt.Errorf("etcdstore: release %q: %w: %w", req.Name, driver.ErrNotHeld, s.notALock(req.Name, key, kv.Value))
		case v.Owner != req.Owner:
			return fmt.Errorf("etcdstore: release %q by %q: %w: another owner holds it", req.Name, req.Owner, driver.ErrNotHeld)
		}
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
	}
	return fmt.Errorf("etcdstore: release %q: the lock key kept changing under %d transactions", req.Name, maxAttempts)
}

// otherKind returns, for a release that found no key of req's kind, a
// *driver.NotALockError when the name is of the other kind: a semaphore,
// for a lock's release; a lock or readers, for a permit's. It returns nil
// when the name is not, or the read fails (the release is ErrNotHeld
// either way).
func (s *Store) otherKind(ctx context.Context, req driver.Request) error {
	ops := []clientv3.Op{clientv3.OpGet(s.semKey(req.Name), clientv3.WithCountOnly())}
	found := []string{foundSemaphore}
	if req.Kind == driver.KindPermit {
		ops = []clientv3.Op{clientv3.OpGet(s.lockKey(req.Name), clientv3.WithCountOnly()),
			clientv3.OpGet(s.readDir(req.Name), clientv3.WithPrefix(), clientv3.WithCountOnly())}
		found = []string{foundLock, foundReaders}
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil
	}
	for i, r := range resp.Responses {
		if r.GetResponseRange().GetCount() > 0 {
			return &driver.NotALockError{Name: req.Name, Found: found[i]}
		}
	}
	return nil
}

// What a kind refusal says a name holds.
const (
	foundSemaphore = "a semaphore, not a lock"                      // to a lock's request
	foundLock      = "a lock, not a semaphore"                      // to a permit's
	foundReaders   = "a read-write lock's readers, not a semaphore" // to a permit's
)
