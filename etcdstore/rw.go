package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leash-go/leash/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// kindRead is lockValue.Kind on a read key.
const kindRead = "read"

// fenceIf compares name's fence key with what was last seen of it.
func (s *Store) fenceIf(name string, f fenceState) clientv3.Cmp {
	if f == fenceAbsent {
		return clientv3.Compare(clientv3.CreateRevision(s.fenceKey(name)), "=", 0)
	}
	return clientv3.Compare(clientv3.Value(s.fenceKey(name)), "=", fenceMark)
}

// acquireWrite takes an RWMutex's write lock: the name's lock key, as
// Acquire takes it for a Mutex (no lock, no reader), with the writer's
// mark deleted. A writer that is not granted puts its mark, which keeps new
// readers out, under a lease of its Client's places that lasts Wait. An
// owner that holds a read lease is refused with driver.ErrUpgrade.
func (s *Store) acquireWrite(ctx context.Context, req driver.Request) (driver.Grant, error) {
	send := time.Now()
	chk := req
	chk.Kind = driver.KindMutex
	if err := s.checkRequests([]driver.Request{chk}); err != nil {
		return driver.Grant{}, err
	}
	states := make([]nameState, 1)
	mark, mine := s.markKey(req.Name, req.Owner), s.readKey(req.Name, req.Owner)
	notReader := clientv3.Compare(clientv3.CreateRevision(mine), "=", 0)
	for range maxAttempts {
		a, err := s.waitingAttempt(ctx, req, states, send, req.Wait, mark, []clientv3.Cmp{notReader}, clientv3.OpGet(mine), clientv3.OpGet(mark))
		if a.retry {
			continue
		}
		if err != nil || a.granted {
			return a.grant(), err
		}
		var marked *mvccpb.KeyValue
		if only(a.reads[0]) != nil {
			err = fmt.Errorf("etcdstore: acquire %q by %q: %w", req.Name, req.Owner, driver.ErrUpgrade)
		} else {
			marked, err = s.placeKV(req.Name, only(a.reads[1]))
		}
		if err = a.refresh(s, ctx, marked, err); err != nil || a.remaining > 0 {
			return driver.Grant{Remaining: a.remaining}, err
		}
	}
	return driver.Grant{Remaining: busyRetry}, nil
}

// acquireRead takes a read lease of an RWMutex: the owner's read key, under
// its Client's lease, granted when no lock is held (or req.Parent holds the
// write lock: a downgrade) and no writer waits (but for a downgrade). Its
// token is the read key's create revision; the grant stamps the fence key.
// A retry by a reader re-puts its read key (same token).
func (s *Store) acquireRead(ctx context.Context, req driver.Request) (driver.Grant, error) {
	send := time.Now()
	if req.Lease <= 0 {
		return driver.Grant{}, fmt.Errorf("etcdstore: acquire %q: lease %v is not positive", req.Name, req.Lease)
	}
	client := driver.OwnerClient(req.Owner)
	key, lockKey := s.readKey(req.Name, req.Owner), s.lockKey(req.Name)
	fence := fenceMarked // a guess until read
	var mine, parent *mvccpb.KeyValue
	for range maxAttempts {
		l, err := s.session(ctx, client, req.Lease, send)
		if err != nil {
			return driver.Grant{}, err
		}
		put := clientv3.OpPut(key, encode(req), clientv3.WithLease(l.id))
		var cmps []clientv3.Cmp
		then := []clientv3.Op{put}
		if mine != nil {
			cmps = []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", mine.ModRevision)}
		} else {
			cmps = []clientv3.Cmp{
				clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(s.semKey(req.Name)), "=", 0),
				s.fenceIf(req.Name, fence),
			}
			if parent != nil {
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(lockKey), "=", parent.ModRevision))
			} else {
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(lockKey), "=", 0),
					clientv3.Compare(clientv3.Version(s.markDir(req.Name)), "=", 0).WithPrefix())
			}
			then = append(then, clientv3.OpPut(s.fenceKey(req.Name), fenceMark))
		}
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(then...).Else(
			clientv3.OpGet(lockKey), clientv3.OpGet(s.fenceKey(req.Name)), clientv3.OpGet(s.semKey(req.Name)),
			clientv3.OpGet(s.markDir(req.Name), clientv3.WithPrefix(), clientv3.WithLimit(1)), clientv3.OpGet(key),
		).Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.forget(client, l)
			continue
		}
		if err != nil {
			return driver.Grant{}, fmt.Errorf("etcdstore: acquire %q: %w", req.Name, err)
		}
		if resp.Succeeded {
			if mine != nil {
				return driver.Grant{Acquired: true, Fence: mine.CreateRevision}, nil
			}
			return driver.Grant{Acquired: true, Fence: resp.Header.Revision}, nil
		}
		r := resp.Responses
		lock, fkv, sem, mark, my := only(r[0]), only(r[1]), only(r[2]), only(r[3]), only(r[4])
		switch {
		case fkv == nil:
			fence = fenceAbsent
		case string(fkv.Value) == fenceMark:
			fence = fenceMarked
		default:
			return driver.Grant{}, s.notALock(req.Name, string(fkv.Key), fkv.Value)
		}
		if sem != nil {
			return driver.Grant{}, &driver.NotALockError{Name: req.Name, Found: "a semaphore, not a read-write lock"}
		}
		if my != nil {
			if _, ok := decodeKind(my.Value, kindRead); !ok {
				return driver.Grant{}, s.notALock(req.Name, string(my.Key), my.Value)
			}
		}
		if mine, parent = my, nil; mine != nil {
			continue // a retry: refresh it
		}
		if lock != nil {
			v, ok := decode(lock.Value)
			switch {
			case !ok:
				return driver.Grant{}, s.notALock(req.Name, string(lock.Key), lock.Value)
			case v.Kind == kindWrite && req.Parent != "" && v.Owner == req.Parent:
				parent = lock // a downgrade
				continue
			}
			return driver.Grant{Remaining: v.lease()}, nil
		}
		if mark != nil {
			pv, err := s.place(req.Name, mark)
			if err != nil {
				return driver.Grant{}, err
			}
			return driver.Grant{Remaining: time.Duration(pv.WaitMS) * time.Millisecond}, nil
		}
	}
	return driver.Grant{Remaining: busyRetry}, nil
}

// wakeRW wakes the waiters a change of name's lock, readers or writer
// marks is for, as they were at revision rev (the change's): with the lock free and no reader, a waiting writer when one
// is marked (WakeWriter), the readers otherwise (WakeReaders).
func (s *Store) wakeRW(ctx context.Context, name string, rev int64, wake func(driver.Wake)) {
	count, at := clientv3.WithCountOnly(), clientv3.WithRev(rev)
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.lockKey(name), count, at),
		clientv3.OpGet(s.readDir(name), clientv3.WithPrefix(), count, at),
		clientv3.OpGet(s.markDir(name), clientv3.WithPrefix(), count, at)).Commit()
	if err != nil {
		if ctx.Err() == nil { // not stopped: the waiters must not miss this change
			wake(driver.Wake{To: driver.WakeAll})
		}
		return
	}
	n := func(i int) int64 { return resp.Responses[i].GetResponseRange().GetCount() }
	switch {
	case n(0) > 0 || n(1) > 0: // held
	case n(2) > 0:
		wake(driver.Wake{To: driver.WakeWriter})
	default:
		wake(driver.Wake{To: driver.WakeReaders})
	}
}
