package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/leash-go/leash/driver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// renewBatch is how many lock keys one Renew transaction reads: under
// etcd's default limit of 128 operations per transaction (--max-txn-ops).
const renewBatch = 100

// renewParallel is how many of one Renew's transactions are in flight at
// once.
const renewParallel = 8

// Renew implements driver.Store for a session store: it extends nothing
// (KeepAlive does) and checks that each request's owner still holds its
// lock, reading the lock keys (read keys, permit keys) in read-only
// transactions of 100 keys, 8 of them at a time. A lock key that is absent, or holds
// something that is not a lock, is RenewGone; one held by another owner is
// RenewTaken. One held by the owner is Renewed only when it is on a lease
// the Store keeps alive for the owner's client, kept at least the lock's
// lease from the send of the client's last KeepAlive that succeeded: on any
// other lease (which nobody extends) it is RenewGone, and on one of the
// client's leases not kept that long, an unknown outcome. A failed transaction makes its own requests' outcomes unknown
// and no other's.
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	res := make([]driver.RenewResult, len(reqs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, renewParallel)
	for lo := 0; lo < len(reqs); lo += renewBatch {
		hi := min(lo+renewBatch, len(reqs))
		sem <- struct{}{}
		// Owner: this call. Stops when its transaction answers or ctx ends.
		wg.Go(func() {
			defer func() { <-sem }()
			s.check(ctx, reqs[lo:hi], res[lo:hi])
		})
	}
	wg.Wait()
	return res
}

// check reads the lock keys of reqs in one transaction into res.
func (s *Store) check(ctx context.Context, reqs []driver.Request, res []driver.RenewResult) {
	ops := make([]clientv3.Op, len(reqs))
	for i, r := range reqs {
		ops[i] = clientv3.OpGet(s.heldKey(r))
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		err = fmt.Errorf("etcdstore: check %d locks: %w", len(reqs), err)
		for i := range res {
			res[i].Err = err
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range reqs {
		kv := only(resp.Responses[i])
		res[i].Status = status(kv, r)
		if res[i].Status != driver.Renewed {
			continue
		}
		// Held by r's owner: on a lease this Store keeps alive for its
		// client, or the key expires with a lease nobody extends.
		switch err := s.kept(driver.OwnerClient(r.Owner), kv.Lease, r.Lease); {
		case errors.Is(err, errLeaseNotKept):
			res[i].Status = driver.RenewGone
		case err != nil:
			res[i].Err = fmt.Errorf("etcdstore: check %q: %w", r.Name, err)
		}
	}
}

// heldKey is the key of what r holds: its permit key for KindPermit, the
// name's lock key otherwise.
func (s *Store) heldKey(r driver.Request) string {
	switch r.Kind {
	case driver.KindPermit:
		return s.permitKey(r.Name, r.Owner)
	case driver.KindRead:
		return s.readKey(r.Name, r.Owner)
	}
	return s.lockKey(r.Name)
}

// heldKind is the kind of value heldKey holds.
func heldKind(r driver.Request) string {
	switch r.Kind {
	case driver.KindPermit:
		return kindPermit
	case driver.KindRead:
		return kindRead
	case driver.KindWrite:
		return kindWrite
	}
	return kindMutex
}

// status is the renewal status of r's lock, whose key holds kv (nil when
// absent).
func status(kv *mvccpb.KeyValue, r driver.Request) driver.RenewStatus {
	if kv == nil {
		return driver.RenewGone
	}
	owner := r.Owner
	v, ok := decodeKind(kv.Value, heldKind(r))
	if k := heldKind(r); k == kindMutex || k == kindWrite {
		v, ok = decode(kv.Value) // one exclusive lock, whichever kind took it
	}
	switch {
	case !ok:
		return driver.RenewGone
	case v.Owner != owner:
		return driver.RenewTaken
	}
	return driver.Renewed
}

// only returns the key a single-key get read, or nil when it was absent.
func only(op *pb.ResponseOp) *mvccpb.KeyValue {
	if kvs := op.GetResponseRange().GetKvs(); len(kvs) > 0 {
		return kvs[0]
	}
	return nil
}
