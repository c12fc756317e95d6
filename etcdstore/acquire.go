package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leash-go/leash/driver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Acquire implements driver.Store: for a Mutex, one transaction that
// creates the lock key, attached to the client's lease, and stamps the
// name's fence key, if the lock key is absent, no reader holds and the name
// is no semaphore (see the package doc; the other kinds are in the package
// doc too). Its fencing token is the
// lock key's create revision. A retry by the holder re-puts its key, which
// keeps the create revision (the token) and moves the key to the lease for
// req.Lease.
func (s *Store) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	switch req.Kind {
	case driver.KindFair:
		return s.acquireFair(ctx, req)
	case driver.KindPermit:
		return s.acquirePermit(ctx, req)
	case driver.KindWrite:
		return s.acquireWrite(ctx, req)
	case driver.KindRead:
		return s.acquireRead(ctx, req)
	}
	mg, err := s.acquire(ctx, []driver.Request{req})
	g := driver.Grant{Acquired: mg.Acquired, Remaining: mg.Remaining}
	if mg.Acquired {
		g.Fence = mg.Fences[0]
	}
	return g, err
}

// maxAttempts bounds the transactions of one acquire that race with other
// clients' acquires and releases of the same names, after which it reports
// the names busy (Remaining busyRetry) rather than keep trying.
const (
	maxAttempts = 8
	busyRetry   = 50 * time.Millisecond
)

// A fenceState is what a name's fence key was last seen to hold.
type fenceState uint8

const (
	fenceUnknown fenceState = iota // not read yet: marked or absent
	fenceAbsent
	fenceMarked
)

// nameState is what an acquire has learnt of one name.
type nameState struct {
	fence fenceState
	own   *mvccpb.KeyValue // the lock key, when the requesting owner holds it already
}

// acquire takes every request's lock, all KindMutex for one owner and one
// lease, in one transaction, or none (see Acquire and AcquireMany).
func (s *Store) acquire(ctx context.Context, reqs []driver.Request) (driver.MultiGrant, error) {
	send := time.Now()
	if err := s.checkRequests(reqs); err != nil {
		return driver.MultiGrant{}, err
	}
	client := driver.OwnerClient(reqs[0].Owner)
	states := make([]nameState, len(reqs))
	for attempt := 0; ; attempt++ {
		if attempt == maxAttempts {
			return driver.MultiGrant{Remaining: busyRetry}, nil
		}
		l, err := s.session(ctx, client, reqs[0].Lease, send)
		if err != nil {
			return driver.MultiGrant{}, err
		}
		s.claims.begin(reqs)
		resp, err := s.cli.Txn(ctx).If(s.grantIf(reqs, states, fenceMarked)...).
			Then(s.grantOps(reqs, states, l.id)...).
			Else(s.elseOps(reqs, states, l.id)...).Commit()
		fences := s.granted(reqs, states, resp, err, true)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.forget(client, l) // expired or revoked since its last keep-alive
			continue
		}
		if err != nil {
			return driver.MultiGrant{}, fmt.Errorf("etcdstore: acquire %q: %w", reqs[0].Name, err)
		}
		gets := resp.Responses
		if !resp.Succeeded && s.hasUnknown(states) {
			gets = resp.Responses[0].GetResponseTxn().Responses
		}
		if fences != nil {
			return driver.MultiGrant{Acquired: true, Fences: fences}, nil
		}
		remaining, err := s.learn(reqs, states, gets)
		if err != nil || remaining > 0 {
			return driver.MultiGrant{Remaining: remaining}, err
		}
	}
}

// granted ends the claims' record of an exclusive acquire transaction of
// reqs (begun with claims.begin), which answered resp, err, and returns the
// tokens it granted: each lock key's create revision (nil when it granted
// nothing, or its outcome is unknown). nested says whether a refused
// transaction grants in a nested one (see elseOps).
func (s *Store) granted(reqs []driver.Request, states []nameState, resp *clientv3.TxnResponse, err error, nested bool) []int64 {
	var fences []int64
	if err == nil && (resp.Succeeded || nested && s.hasUnknown(states) && resp.Responses[0].GetResponseTxn().GetSucceeded()) {
		fences = make([]int64, len(reqs))
		for i, st := range states {
			if st.own != nil {
				fences[i] = st.own.CreateRevision
			} else {
				fences[i] = resp.Header.Revision
			}
		}
	}
	// A lease the server did not find refused the whole transaction; any
	// other error leaves its outcome unknown.
	s.claims.end(reqs, fences, err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound))
	return fences
}

// checkRequests refuses, before any round trip, requests acquire cannot
// take together.
func (s *Store) checkRequests(reqs []driver.Request) error {
	if len(reqs) == 0 {
		return errors.New("etcdstore: acquire of no lock")
	}
	for _, r := range reqs {
		switch {
		case r.Kind != driver.KindMutex:
			return fmt.Errorf("etcdstore: acquire %q: %w", r.Name, driver.Unsupported(s, r.Kind.String()+" locks"))
		case r.Lease <= 0:
			return fmt.Errorf("etcdstore: acquire %q: lease %v is not positive", r.Name, r.Lease)
		case r.Owner != reqs[0].Owner || r.Lease != reqs[0].Lease:
			return fmt.Errorf("etcdstore: acquire %q: every lock of one acquire must have the same owner and lease", r.Name)
		}
	}
	return nil
}

// hasUnknown reports whether some fence key has not been read yet: the
// transaction then tries it as marked, and, in its Else branch, as absent.
func (s *Store) hasUnknown(states []nameState) bool {
	return slices.ContainsFunc(states, func(st nameState) bool { return st.fence == fenceUnknown })
}

// grantIf is the condition of a grant: each lock key absent (or as the
// owner left it), each fence key as last seen, an unknown one as guess.
func (s *Store) grantIf(reqs []driver.Request, states []nameState, guess fenceState) []clientv3.Cmp {
	cmps := make([]clientv3.Cmp, 0, 2*len(reqs))
	for i, r := range reqs {
		st := states[i]
		if st.own != nil {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.lockKey(r.Name)), "=", st.own.ModRevision))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.lockKey(r.Name)), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(s.semKey(r.Name)), "=", 0),        // not a semaphore
				clientv3.Compare(clientv3.Version(s.readDir(r.Name)), "=", 0).WithPrefix()) // no reader
		}
		f := st.fence
		if f == fenceUnknown {
			f = guess
		}
		cmps = append(cmps, s.fenceIf(r.Name, f))
	}
	return cmps
}

// grantOps are the writes of a grant: each lock key put under lease id,
// and the fence key of each fresh grant stamped (its mod revision becomes
// the grant's token).
func (s *Store) grantOps(reqs []driver.Request, states []nameState, id clientv3.LeaseID) []clientv3.Op {
	ops := make([]clientv3.Op, 0, 2*len(reqs))
	for i, r := range reqs {
		ops = append(ops, clientv3.OpPut(s.lockKey(r.Name), encode(r), clientv3.WithLease(id)))
		if states[i].own == nil {
			ops = append(ops, clientv3.OpPut(s.fenceKey(r.Name), fenceMark))
		}
	}
	return ops
}

// elseOps are what a refused grant reads: with a fence key still unknown, a
// nested transaction that grants if every unknown fence key is absent.
func (s *Store) elseOps(reqs []driver.Request, states []nameState, id clientv3.LeaseID) []clientv3.Op {
	gets := s.readOps(reqs)
	if !s.hasUnknown(states) {
		return gets
	}
	return []clientv3.Op{clientv3.OpTxn(s.grantIf(reqs, states, fenceAbsent), s.grantOps(reqs, states, id), gets)}
}

// readOps reads each request's lock key, fence key and semaphore key
// (readsPerName reads).
func (s *Store) readOps(reqs []driver.Request) []clientv3.Op {
	ops := make([]clientv3.Op, 0, readsPerName*len(reqs))
	for _, r := range reqs {
		ops = append(ops, clientv3.OpGet(s.lockKey(r.Name)), clientv3.OpGet(s.fenceKey(r.Name)), clientv3.OpGet(s.semKey(r.Name)),
			clientv3.OpGet(s.readDir(r.Name), clientv3.WithPrefix(), clientv3.WithLimit(1)))
	}
	return ops
}

// readsPerName is how many reads readOps makes per name: the lock key, the
// fence key, the semaphore key and one reader.
const readsPerName = 4

// learn reads a refused grant's reads (readOps) into states. It returns the
// shortest remaining lease of the holders that block the grant (positive),
// zero when none does (the grant is to be tried again with what it
// learnt), or a *driver.NotALockError for a key that is not the Store's.
func (s *Store) learn(reqs []driver.Request, states []nameState, gets []*pb.ResponseOp) (time.Duration, error) {
	var remaining time.Duration
	for i, r := range reqs {
		lock, fence, sem := only(gets[readsPerName*i]), only(gets[readsPerName*i+1]), only(gets[readsPerName*i+2])
		if reader := only(gets[readsPerName*i+3]); reader != nil && lock == nil {
			v, ok := decodeKind(reader.Value, kindRead)
			if !ok {
				return 0, s.notALock(r.Name, string(reader.Key), reader.Value)
			}
			if remaining == 0 || v.lease() < remaining {
				remaining = v.lease() // readers hold the name
			}
		}
		if sem != nil {
			if _, ok := decodeSem(sem.Value); !ok {
				return 0, s.notALock(r.Name, string(sem.Key), sem.Value)
			}
			return 0, &driver.NotALockError{Name: r.Name, Found: foundSemaphore}
		}
		switch {
		case fence == nil:
			states[i].fence = fenceAbsent
		case string(fence.Value) == fenceMark:
			states[i].fence = fenceMarked
		default:
			return 0, s.notALock(r.Name, string(fence.Key), fence.Value)
		}
		states[i].own = nil
		if lock == nil {
			continue
		}
		v, ok := decode(lock.Value)
		switch {
		case !ok:
			return 0, s.notALock(r.Name, string(lock.Key), lock.Value)
		case v.Owner == r.Owner:
			states[i].own = lock
		case remaining == 0 || v.lease() < remaining:
			remaining = v.lease()
		}
	}
	return remaining, nil
}
