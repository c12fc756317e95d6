package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/leash-go/leash/driver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	_ driver.KindStore  = (*Store)(nil)
	_ driver.Withdrawer = (*Store)(nil)
)

// kinds are the lock kinds the Store grants.
var kinds = []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindRead, driver.KindWrite, driver.KindPermit}

// Kinds implements driver.KindStore: every lock kind.
func (s *Store) Kinds() []driver.Kind { return kinds }

// placeValue is the value of a place key, JSON-encoded.
type placeValue struct {
	Leash  int    `json:"leash"`   // formatVersion
	Kind   string `json:"kind"`    // kindPlace
	Owner  string `json:"owner"`   // the waiting owner
	WaitMS int64  `json:"wait_ms"` // how long the place lasts without a new attempt
}

// kindPlace is placeValue.Kind.
const kindPlace = "place"

func encodePlace(req driver.Request) string {
	b, err := json.Marshal(placeValue{Leash: formatVersion, Kind: kindPlace, Owner: req.Owner, WaitMS: max(req.Wait.Milliseconds(), 1)})
	if err != nil {
		panic(err) // a struct of strings and ints always encodes
	}
	return string(b)
}

// decodePlace parses a place key's value; false means it is not a place.
func decodePlace(b []byte) (placeValue, bool) {
	v, ok := decodeJSON[placeValue](b)
	return v, ok && v.Leash == formatVersion && v.Kind == kindPlace && v.Owner != "" && v.WaitMS > 0
}

// placeSession is the session key of client's queue places: leases apart
// from its locks', which its keep-alives do not extend, so that a place
// lasts as long as its waiter's attempts refresh it.
func placeSession(client string) string { return "places " + client }

// acquireFair takes a KindFair lock: granted when the lock key is absent
// and the name's queue is empty, or its head (its oldest place, by create
// revision) is req.Owner's place, which the grant deletes. A request that is
// not granted, with a Wait, puts its place (or refreshes it, keeping its
// create revision, so its position) under a lease that lasts at least Wait.
//
// The first transaction guesses an empty queue: an uncontended fair lock
// takes one round trip. When it is refused it puts the place and reads the
// lock, the queue's head and the place, and a second transaction grants
// if the lock is free and the place is the head.
func (s *Store) acquireFair(ctx context.Context, req driver.Request) (driver.Grant, error) {
	send := time.Now()
	r0 := req
	r0.Kind = driver.KindMutex
	if err := s.checkRequests([]driver.Request{r0}); err != nil {
		return driver.Grant{}, err
	}
	states := make([]nameState, 1)
	var mine *mvccpb.KeyValue // req.Owner's place, as last read
	dir, key := s.queueDir(req.Name), s.placeKey(req.Name, req.Owner)
	for range maxAttempts {
		var cmps []clientv3.Cmp
		if states[0].own == nil {
			if mine == nil {
				cmps = append(cmps, clientv3.Compare(clientv3.Version(dir), "=", 0).WithPrefix())
			} else {
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", mine.CreateRevision),
					clientv3.Compare(clientv3.CreateRevision(dir), ">", mine.CreateRevision-1).WithPrefix())
			}
		}
		a, err := s.waitingAttempt(ctx, r0, states, send, req.Wait, key, cmps, headOp(dir), clientv3.OpGet(key))
		if a.retry {
			continue
		}
		if err != nil || a.granted {
			return a.grant(), err
		}
		var head *placeValue
		if head, err = s.place(req.Name, only(a.reads[0])); err == nil {
			mine, err = s.placeKV(req.Name, only(a.reads[1]))
		}
		if err = a.refresh(s, ctx, mine, err); err != nil || a.remaining > 0 {
			return driver.Grant{Remaining: a.remaining}, err
		}
		if states[0].own == nil && head != nil && head.Owner != req.Owner {
			// Free, but another waiter is first: it has until its place
			// runs out.
			return driver.Grant{Remaining: time.Duration(head.WaitMS) * time.Millisecond}, nil
		}
	}
	return driver.Grant{Remaining: busyRetry}, nil
}

// An attempt is one transaction of an exclusive acquire that waits in a
// place (a fair queue place, a writer mark): see waitingAttempt.
type attempt struct {
	retry     bool             // a lease expired meanwhile: try again
	granted   bool             // the lock was granted
	fence     int64            // its token, when granted
	remaining time.Duration    // when refused: the blocking holder's lease (0: none blocks)
	reads     []*pb.ResponseOp // when refused: the caller's own reads
	place     string           // the place's key
	rev       int64            // the transaction's revision
	pl        *lease           // the place's lease; nil without a Wait
	put       bool             // when refused: the transaction put the place
	value     string           // the place's value
}

// waitingAttempt is one transaction of an exclusive acquire of req (its
// lock key's kind) that waits in a place at key place: it grants if the
// lock is free (grantIf) and cmps hold, deleting the place; when refused,
// it puts the place (wait > 0), unless a key is there, and reads the name
// (readOps, which learn reads into states) and then reads, the caller's.
// A definite refusal (not a lock, an upgrade) is an error, and the place
// the transaction put is deleted.
func (s *Store) waitingAttempt(ctx context.Context, req driver.Request, states []nameState, send time.Time, wait time.Duration,
	place string, cmps []clientv3.Cmp, reads ...clientv3.Op) (attempt, error) {
	client := driver.OwnerClient(req.Owner)
	reqs := []driver.Request{req}
	a := attempt{place: place}
	l, err := s.session(ctx, client, req.Lease, send)
	if err != nil {
		return a, err
	}
	var els []clientv3.Op
	if wait > 0 {
		if a.pl, err = s.session(ctx, placeSession(client), wait, send); err != nil {
			return a, err
		}
		pr := req
		pr.Wait = wait
		a.value = encodePlace(pr)
		els = append(els, putPlaceOp(place, a.value, a.pl.id))
	}
	els = append(els, s.readOps(reqs)...)
	els = append(els, reads...)
	s.claims.begin(reqs)
	resp, err := s.cli.Txn(ctx).If(append(s.grantIf(reqs, states, fenceMarked), cmps...)...).
		Then(append(s.grantOps(reqs, states, l.id), dropPlaceOp(place, a.value))...).
		Else(els...).Commit()
	fences := s.granted(reqs, states, resp, err, false)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The lock lease (Then) or the place lease (Else): etcd checks
		// only the lease of the branch that runs, so which one is gone is
		// asked of the server, and only a lease it says is gone is
		// forgotten. Forgetting the live lock lease would stop its
		// keep-alives while its locks still look held.
		if err := s.findGone(ctx, client, l, a.pl); err != nil {
			return a, fmt.Errorf("etcdstore: acquire %q: %w", req.Name, err)
		}
		a.retry = true
		return a, nil
	}
	if err != nil {
		return a, fmt.Errorf("etcdstore: acquire %q: %w", req.Name, err)
	}
	a.rev = resp.Header.Revision
	if fences != nil {
		a.granted, a.fence = true, fences[0]
		if drop := resp.Responses[len(resp.Responses)-1].GetResponseTxn(); !drop.Succeeded &&
			only(drop.Responses[0]) != nil {
			// A place this attempt did not put (another Wait's, or
			// changed since): deleted only if it is a place. The lock is
			// granted either way: a place left behind ends with its lease.
			_ = s.withdraw(ctx, req.Name, place)
		}
		return a, nil
	}
	// Whether the put ran: a refused transaction that put nothing has the
	// revision of the last write, which may be the key's own.
	a.put = a.pl != nil && resp.Responses[0].GetResponseTxn().GetSucceeded()
	gets := resp.Responses[len(els)-readsPerName-len(reads):]
	a.reads = gets[readsPerName:]
	a.remaining, err = s.learn(reqs, states, gets[:readsPerName])
	if err != nil {
		s.dropPlace(ctx, place, a.rev, a.put)
	}
	return a, err
}

// grant is the Grant of a granted attempt (the zero Grant otherwise).
func (a attempt) grant() driver.Grant {
	if !a.granted {
		return driver.Grant{}
	}
	return driver.Grant{Acquired: true, Fence: a.fence}
}

// refresh ends a refused attempt's reading of its own reads: err, what the
// reading found wrong, is a definite refusal, which deletes the place the
// attempt put; otherwise the place read (mine; nil: none) is moved to the
// attempt's place lease if it is on another.
func (a attempt) refresh(s *Store, ctx context.Context, mine *mvccpb.KeyValue, err error) error {
	if err != nil {
		s.dropPlace(ctx, a.place, a.rev, a.put)
		return err
	}
	if a.pl == nil {
		return nil
	}
	if err := s.refreshPlace(ctx, mine, a.value, a.pl.id); err != nil {
		return fmt.Errorf("etcdstore: refresh the waiting place %q: %w", a.place, err)
	}
	return nil
}

// putPlaceOp puts a waiter's place (or writer mark) at key, under lease id,
// if there is none: one that is there is refreshed by refreshPlace once
// read as a place, never overwritten unread.
func putPlaceOp(key, value string, id clientv3.LeaseID) clientv3.Op {
	return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, value, clientv3.WithLease(id))}, nil)
}

// refreshPlace moves the place kv (read as a place; nil: none) to lease id,
// which lasts the waiter's Wait, when it is under another (an expired or
// shorter one), keeping its create revision: its position.
func (s *Store) refreshPlace(ctx context.Context, kv *mvccpb.KeyValue, value string, id clientv3.LeaseID) error {
	if kv == nil || kv.Lease == int64(id) {
		return nil
	}
	key := string(kv.Key)
	_, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(id))).Commit()
	return err
}

// dropPlaceOp deletes the place at key when it holds value, the place the
// attempt puts, and reads the key otherwise: a key holding anything else is
// left for withdraw, which deletes it only if it is a place.
func dropPlaceOp(key, value string) clientv3.Op {
	return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", value)},
		[]clientv3.Op{clientv3.OpDelete(key)}, []clientv3.Op{clientv3.OpGet(key, clientv3.WithKeysOnly())})
}

// dropPlace deletes the place key if the transaction at rev put it (put),
// and it is unchanged since.
func (s *Store) dropPlace(ctx context.Context, key string, rev int64, put bool) {
	if !put {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grantTimeout)
	defer cancel()
	_, _ = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(clientv3.OpDelete(key)).Commit()
}

// headOp reads the oldest place under dir: the head of a fair queue.
func headOp(dir string) clientv3.Op {
	return clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithLimit(1),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
}

// place decodes a place key (nil when absent); a key that is not a place is
// a *driver.NotALockError.
func (s *Store) place(name string, kv *mvccpb.KeyValue) (*placeValue, error) {
	if kv == nil {
		return nil, nil
	}
	v, ok := decodePlace(kv.Value)
	if !ok {
		return nil, s.notALock(name, string(kv.Key), kv.Value)
	}
	return &v, nil
}

// placeKV is kv, when it is a place (or nil), or a *driver.NotALockError.
func (s *Store) placeKV(name string, kv *mvccpb.KeyValue) (*mvccpb.KeyValue, error) {
	_, err := s.place(name, kv)
	if err != nil {
		return nil, err
	}
	return kv, nil
}

// findGone sends a keep-alive for the lock lease l of client and the
// place lease pl (nil: none), after a transaction that used both was
// refused with "lease not found": each forgets its lease only if the server
// says it is not found. An error is an unknown outcome of a keep-alive.
func (s *Store) findGone(ctx context.Context, client string, l, pl *lease) error {
	if err := s.keepAlive(ctx, client, l); err != nil && !errors.Is(err, driver.ErrNotHeld) {
		return err
	}
	if pl == nil {
		return nil
	}
	if err := s.keepAlive(ctx, placeSession(client), pl); err != nil && !errors.Is(err, driver.ErrNotHeld) {
		return err
	}
	return nil
}

// forgetAll drops every lease of session key client.
func (s *Store) forgetAll(client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, client)
	delete(s.rounds, client)
}

// Withdraw implements driver.Withdrawer: it deletes req.Owner's place in
// req.Name's fair queue (KindFair) or its waiting-writer mark (KindWrite),
// if it is one, in a transaction that checks it is the key it read. The
// deletion wakes the queue's new head, or the waiting readers.
func (s *Store) Withdraw(ctx context.Context, req driver.Request) error {
	key := s.placeKey(req.Name, req.Owner)
	if req.Kind == driver.KindWrite {
		key = s.markKey(req.Name, req.Owner)
	}
	return s.withdraw(ctx, req.Name, key)
}

// withdraw deletes the place (or mark) at key of name, if it is one,
// unchanged since read.
func (s *Store) withdraw(ctx context.Context, name, key string) error {
	for range maxAttempts {
		resp, err := s.cli.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("etcdstore: withdraw from %q: %w", name, err)
		}
		kv, err := s.placeKV(name, first(resp.Kvs))
		if err != nil || kv == nil {
			return err
		}
		tr, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(key)).Commit()
		if err != nil {
			return fmt.Errorf("etcdstore: withdraw from %q: %w", name, err)
		}
		if tr.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("etcdstore: withdraw from %q: the place kept changing under %d transactions", name, maxAttempts)
}

// first returns kvs[0], or nil.
func first(kvs []*mvccpb.KeyValue) *mvccpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	return kvs[0]
}

// wakeFair wakes the waiter a change of name's lock or queue is for, as
// they were at revision rev (the change's): with the lock free, the queue's head (WakeHead), or, with no queue, one
// waiter per client (WakeOne); with the lock held, nobody.
func (s *Store) wakeFair(ctx context.Context, name string, rev int64, wake func(driver.Wake)) {
	at := clientv3.WithRev(rev)
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.lockKey(name), clientv3.WithCountOnly(), at),
		clientv3.OpGet(s.queueDir(name), clientv3.WithPrefix(), clientv3.WithLimit(1), at,
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))).Commit()
	if err != nil {
		if ctx.Err() == nil { // not stopped: the waiters must not miss this change
			wake(driver.Wake{To: driver.WakeAll})
		}
		return
	}
	if resp.Responses[0].GetResponseRange().GetCount() > 0 {
		return
	}
	head, err := s.place(name, only(resp.Responses[1]))
	switch {
	case err != nil:
		wake(driver.Wake{To: driver.WakeAll})
	case head == nil:
		wake(driver.Wake{To: driver.WakeOne})
	default:
		wake(driver.Wake{To: driver.WakeHead, Head: head.Owner})
	}
}
