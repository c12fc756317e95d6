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

// renewBatch is how many lock keys one transaction of Renew's per-key check
// reads: under etcd's default limit of 128 operations per transaction
// (--max-txn-ops).
const renewBatch = 100

// renewParallel is how many of the per-key check's transactions are in
// flight at once.
const renewParallel = 8

// Renew implements driver.Store for a session store: it extends nothing
// (KeepAlive does) and checks that each request's owner still holds its
// lock.
//
// It first asks the server, for each etcd lease of the requests' sessions,
// which keys are attached to it: one LeaseTimeToLive with its keys per
// lease (usually one per client), whatever the number of locks. A request
// whose key is on that lease, when the presence proves that its owner holds
// it (see claims: always for a read or permit key, which names its owner;
// for a lock key, when this Store's record of the client's grants of the
// name says the owner's is the last and none is in flight or unknown), is
// Renewed, if the lease is kept (below). Every other request — its key
// absent from the lease, or present but not proved the owner's, or its
// lease unknown to the Store — is checked as before, by reading its key in
// read-only transactions of 100 keys, 8 of them at a time: a lock key that
// is absent, or holds something that is not a lock, is RenewGone; one held
// by another owner is RenewTaken; one held by the owner is Renewed only
// when it is on a lease the Store keeps alive for the owner's client.
//
// A lock is Renewed only on a lease kept at least the lock's lease from
// the send of the client's last KeepAlive that succeeded: on any other
// lease (which nobody extends) it is RenewGone, and on one of the client's
// leases not kept that long, an unknown outcome. A failed request makes its
// own requests' outcomes unknown and no other's.
//
// What the lease check relies on: etcd answers LeaseTimeToLive on its
// leader once the leader has applied every entry it knows to be committed
// (a member that is not the leader forwards it), so the keys listed
// include every write acknowledged before the request was sent — but for a
// leader cut off from its cluster that has not stepped down yet, which
// answers from its older state, as it answers keep-alives; and only this
// Store attaches keys to a lease it granted (a key another program put on
// it would be taken for the lock its name says).
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	res := make([]driver.RenewResult, len(reqs))
	s.checkEach(ctx, reqs, res, s.checkLeases(ctx, reqs, res))
	return res
}

// A leaseGroup is the requests of Renew whose keys are attached to one
// lease.
type leaseGroup struct {
	client string
	l      *lease
	idx    []int // indexes into Renew's requests
}

// checkLeases settles, into res, every request whose key is on its lease
// and proved its owner's (see Renew), with one LeaseTimeToLive per lease,
// concurrently. It returns the indexes of the requests left to the
// per-key check.
func (s *Store) checkLeases(ctx context.Context, reqs []driver.Request, res []driver.RenewResult) []int {
	var rest []int
	var groups []*leaseGroup
	s.mu.Lock()
	byLease := make(map[*lease]*leaseGroup)
	for i, r := range reqs {
		client := driver.OwnerClient(r.Owner)
		l := s.sessions[client][ttlFor(r.Lease)]
		if l == nil || !l.granted() {
			rest = append(rest, i)
			continue
		}
		g := byLease[l]
		if g == nil {
			g = &leaseGroup{client: client, l: l}
			byLease[l] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	s.mu.Unlock()
	rests := make([][]int, len(groups))
	var wg sync.WaitGroup
	for gi, g := range groups {
		// Owner: this call. Stops when the lease's answer is read or ctx ends.
		wg.Go(func() { rests[gi] = s.checkLease(ctx, g, reqs, res) })
	}
	wg.Wait()
	for _, r := range rests {
		rest = append(rest, r...)
	}
	return rest
}

// checkLease asks the server for the keys attached to g's lease and
// settles, into res, each request of g whose key is there and proved its
// owner's. It returns the indexes of g's other requests.
func (s *Store) checkLease(ctx context.Context, g *leaseGroup, reqs []driver.Request, res []driver.RenewResult) []int {
	// Two requests may name one key (two owners of the client on one
	// name): slot is, for each request, the first of g's requests with its
	// key, whose place in on says whether the key is on the lease.
	keys := make(map[string]int, len(g.idx))
	slot := make([]int, len(g.idx))
	for j, i := range g.idx {
		k := s.heldKey(reqs[i])
		first, ok := keys[k]
		if !ok {
			first = j
			keys[k] = j
		}
		slot[j] = first
	}
	resp, err := s.cli.TimeToLive(ctx, g.l.id, clientv3.WithAttachedKeys())
	if err != nil {
		err = fmt.Errorf("etcdstore: check the %d locks of lease %x: %w", len(g.idx), int64(g.l.id), err)
		for _, i := range g.idx {
			res[i].Err = err
		}
		return nil
	}
	if resp.TTL < 0 {
		// The lease is gone and every key on it deleted: the per-key check
		// tells each lock where its key is now.
		return g.idx
	}
	on := make([]bool, len(g.idx))
	for _, k := range resp.Keys {
		if j, ok := keys[string(k)]; ok {
			on[j] = true
		}
	}
	var rest []int
	s.mu.Lock()
	defer s.mu.Unlock()
	for j, i := range g.idx {
		r := reqs[i]
		if !on[slot[j]] || !s.proves(r) {
			rest = append(rest, i)
			continue
		}
		switch err := s.kept(g.client, int64(g.l.id), r.Lease); {
		case errors.Is(err, errLeaseNotKept):
			rest = append(rest, i)
		case err != nil:
			res[i].Err = fmt.Errorf("etcdstore: check %q: %w", r.Name, err)
		default:
			res[i].Status = driver.Renewed
		}
	}
	return rest
}

// proves reports whether r's key on its lease proves r's owner holds it
// (see claims.proves): always, under the test-only presence rule.
func (s *Store) proves(r driver.Request) bool {
	return s.presenceOnly || s.claims.proves(r)
}

// checkEach checks the requests at idx by reading their keys (see Renew),
// in transactions of renewBatch keys, renewParallel of them at a time.
func (s *Store) checkEach(ctx context.Context, reqs []driver.Request, res []driver.RenewResult, idx []int) {
	if len(idx) == 0 {
		return
	}
	s.slow.Add(int64(len(idx)))
	sub := make([]driver.Request, len(idx))
	for j, i := range idx {
		sub[j] = reqs[i]
	}
	subRes := make([]driver.RenewResult, len(idx))
	var wg sync.WaitGroup
	sem := make(chan struct{}, renewParallel)
	for lo := 0; lo < len(sub); lo += renewBatch {
		hi := min(lo+renewBatch, len(sub))
		sem <- struct{}{}
		// Owner: this call. Stops when its transaction answers or ctx ends.
		wg.Go(func() {
			defer func() { <-sem }()
			s.check(ctx, sub[lo:hi], subRes[lo:hi])
		})
	}
	wg.Wait()
	for j, i := range idx {
		res[i] = subRes[j]
		if st := subRes[j].Status; st == driver.RenewGone || st == driver.RenewTaken {
			s.claims.drop(sub[j])
		}
	}
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
