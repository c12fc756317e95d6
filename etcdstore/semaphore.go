package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/leash-go/leash/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ driver.PermitSetter = (*Store)(nil)

// semValue is the value of a semaphore key, JSON-encoded.
type semValue struct {
	Leash   int    `json:"leash"`   // formatVersion
	Kind    string `json:"kind"`    // kindSemaphore
	Permits int    `json:"permits"` // the permit count
}

// The kinds of a semaphore key and of a permit key (a lockValue).
const (
	kindSemaphore = "semaphore"
	kindPermit    = "permit"
)

func encodeSem(permits int) string {
	b, err := json.Marshal(semValue{Leash: formatVersion, Kind: kindSemaphore, Permits: permits})
	if err != nil {
		panic(err) // a struct of strings and ints always encodes
	}
	return string(b)
}

// decodeSem parses a semaphore key's value; false means it is not one.
func decodeSem(b []byte) (semValue, bool) {
	v, ok := decodeJSON[semValue](b)
	return v, ok && v.Leash == formatVersion && v.Kind == kindSemaphore && v.Permits > 0
}

// semKeys are the keys of one semaphore, as read in one transaction.
type semKeys struct {
	rev            int64            // the revision they were read at
	lock, fence    *mvccpb.KeyValue // nil when absent
	sem            *mvccpb.KeyValue
	semv           semValue
	permits        []*mvccpb.KeyValue
	permitv        []lockValue
	mine           *mvccpb.KeyValue // owner's permit, if held
	shortestLeased time.Duration    // the shortest lease among the permits
}

// readSem reads name's lock key, fence key, semaphore key and permits in
// one transaction, and checks each is the Store's. A lock on the name is a
// *driver.NotALockError: a name is a lock or a semaphore, not both.
func (s *Store) readSem(ctx context.Context, name, owner string) (semKeys, error) {
	resp, err := s.cli.Txn(ctx).Then(append(s.readOps([]driver.Request{{Name: name}}),
		clientv3.OpGet(s.permitDir(name), clientv3.WithPrefix()))...).Commit()
	if err != nil {
		return semKeys{}, fmt.Errorf("etcdstore: read semaphore %q: %w", name, err)
	}
	k := semKeys{rev: resp.Header.Revision, lock: only(resp.Responses[0]), fence: only(resp.Responses[1]), sem: only(resp.Responses[2])}
	switch {
	case k.fence != nil && string(k.fence.Value) != fenceMark:
		return semKeys{}, s.notALock(name, string(k.fence.Key), k.fence.Value)
	case k.lock != nil:
		return semKeys{}, &driver.NotALockError{Name: name, Found: foundLock}
	case only(resp.Responses[3]) != nil:
		return semKeys{}, &driver.NotALockError{Name: name, Found: foundReaders}
	}
	if k.sem != nil {
		var ok bool
		if k.semv, ok = decodeSem(k.sem.Value); !ok {
			return semKeys{}, s.notALock(name, string(k.sem.Key), k.sem.Value)
		}
	}
	for _, kv := range resp.Responses[readsPerName].GetResponseRange().GetKvs() {
		v, ok := decodeKind(kv.Value, kindPermit)
		if !ok {
			return semKeys{}, s.notALock(name, string(kv.Key), kv.Value)
		}
		k.permits, k.permitv = append(k.permits, kv), append(k.permitv, v)
		if v.Owner == owner {
			k.mine = kv
		}
		if k.shortestLeased == 0 || v.lease() < k.shortestLeased {
			k.shortestLeased = v.lease()
		}
	}
	return k, nil
}

// acquirePermit takes one of semaphore req.Name's permits: it reads the
// semaphore, and when a permit is free, puts req.Owner's permit key (under
// its Client's lease), creating the semaphore with req.Permits if there is
// none, in a transaction that checks that no permit was taken since the
// read. A retry by a holder re-puts its permit (same token, its create
// revision).
func (s *Store) acquirePermit(ctx context.Context, req driver.Request) (driver.Grant, error) {
	send := time.Now()
	if req.Lease <= 0 {
		return driver.Grant{}, fmt.Errorf("etcdstore: acquire %q: lease %v is not positive", req.Name, req.Lease)
	}
	if err := s.checkTTL(req.Lease); err != nil {
		return driver.Grant{}, err // before the semaphore's read
	}
	client := driver.OwnerClient(req.Owner)
	key, dir := s.permitKey(req.Name, req.Owner), s.permitDir(req.Name)
	value := encodeKind(req, kindPermit)
	for range maxAttempts {
		k, err := s.readSem(ctx, req.Name, req.Owner)
		if err != nil {
			return driver.Grant{}, err
		}
		permits := k.semv.Permits
		if k.sem == nil {
			permits = req.Permits
		}
		if permits < 1 {
			return driver.Grant{}, fmt.Errorf("etcdstore: acquire %q: a semaphore of %d permits", req.Name, permits)
		}
		if k.mine == nil && len(k.permits) >= permits {
			return driver.Grant{Remaining: k.shortestLeased}, nil
		}
		l, err := s.session(ctx, client, req.Lease, send)
		if err != nil {
			return driver.Grant{}, err
		}
		put := clientv3.OpPut(key, value, clientv3.WithLease(l.id))
		var tx clientv3.Txn
		if k.mine != nil {
			tx = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", k.mine.ModRevision)).Then(put)
		} else {
			cmps := []clientv3.Cmp{
				clientv3.Compare(clientv3.CreateRevision(s.lockKey(req.Name)), "=", 0),
				clientv3.Compare(clientv3.Version(s.readDir(req.Name)), "=", 0).WithPrefix(),
				// No permit taken or changed since the read.
				clientv3.Compare(clientv3.ModRevision(dir), "<", k.rev+1).WithPrefix(),
				unchanged(s.fenceKey(req.Name), k.fence),
				unchanged(s.semKey(req.Name), k.sem),
			}
			ops := []clientv3.Op{put, clientv3.OpPut(s.fenceKey(req.Name), fenceMark)}
			if k.sem == nil {
				ops = append(ops, clientv3.OpPut(s.semKey(req.Name), encodeSem(permits)))
			}
			tx = s.cli.Txn(ctx).If(cmps...).Then(ops...)
		}
		resp, err := tx.Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.forget(client, l)
			continue
		}
		if err != nil {
			return driver.Grant{}, fmt.Errorf("etcdstore: acquire a permit of %q: %w", req.Name, err)
		}
		if resp.Succeeded {
			if k.mine != nil {
				return driver.Grant{Acquired: true, Fence: k.mine.CreateRevision}, nil
			}
			return driver.Grant{Acquired: true, Fence: resp.Header.Revision}, nil
		}
	}
	return driver.Grant{Remaining: busyRetry}, nil
}

// unchanged compares key with kv, as read: absent when kv is nil.
func unchanged(key string, kv *mvccpb.KeyValue) clientv3.Cmp {
	if kv == nil {
		return clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
}

// SetPermits implements driver.PermitSetter: it puts semaphore name's
// permit count, creating the semaphore if there is none, in a transaction
// that checks the name holds no lock and the semaphore key is as read.
// Permits held stay held. The put wakes the semaphore's watchers.
func (s *Store) SetPermits(ctx context.Context, name string, n int) error {
	if n < 1 {
		return fmt.Errorf("etcdstore: set permits of %q to %d: a semaphore has at least one permit", name, n)
	}
	for range maxAttempts {
		k, err := s.readSem(ctx, name, "")
		if err != nil {
			return err
		}
		resp, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(s.lockKey(name)), "=", 0),
			clientv3.Compare(clientv3.Version(s.readDir(name)), "=", 0).WithPrefix(),
			unchanged(s.semKey(name), k.sem),
		).Then(clientv3.OpPut(s.semKey(name), encodeSem(n))).Commit()
		if err != nil {
			return fmt.Errorf("etcdstore: set permits of %q: %w", name, err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("etcdstore: set permits of %q: its keys kept changing under %d transactions", name, maxAttempts)
}
