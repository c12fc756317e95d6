package etcdstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leash-go/leash/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ driver.Admin = (*Store)(nil)

// Inspect implements driver.Admin: it reads name's keys (lock, fence,
// readers, fair queue places, writer marks; a semaphore's permits) in one
// transaction, and asks the server how long each holder's etcd lease has
// left. A holder's Remaining is the shorter of that and the lease it asked
// for; Fence is the fence key's mod revision, the last token granted,
// whether or not the lock is held; Queued counts the places and marks; Waiters is -1 (etcd does not tell who watches a key). A name whose
// keys hold anything else is refused with a *driver.NotALockError.
func (s *Store) Inspect(ctx context.Context, name string) (driver.Info, error) {
	st, err := s.read(ctx, name)
	if err != nil {
		return driver.Info{}, err
	}
	if st.sem != nil {
		return s.inspectSem(ctx, name)
	}
	info := driver.Info{Name: name, Kind: driver.KindMutex, Remaining: -1, Waiters: -1, Queued: len(st.places) + len(st.marks)}
	if st.fence != nil {
		info.Fence = st.fence.ModRevision
	}
	for i, r := range st.readers {
		rem, err := s.remaining(ctx, r, st.readerv[i])
		if err != nil {
			return driver.Info{}, fmt.Errorf("etcdstore: inspect %q: %w", name, err)
		}
		info.Kind, info.Held = driver.KindRead, true
		info.Owners = append(info.Owners, driver.OwnerHolds{Owner: st.readerv[i].Owner, Holds: 1, Kind: driver.KindRead, Remaining: rem})
		info.Remaining = max(info.Remaining, rem)
	}
	lock := st.lock
	if lock == nil {
		return info, nil
	}
	v, _ := decode(lock.Value) // read checked it
	kind := driver.KindMutex
	if v.Kind == kindWrite {
		kind = driver.KindWrite
	}
	info.Held = true
	info.Fence = max(info.Fence, lock.CreateRevision)
	if len(st.readers) == 0 {
		info.Kind = kind
	}
	info.Owners = append(info.Owners, driver.OwnerHolds{Owner: v.Owner, Holds: 1, Kind: kind, Remaining: -1})
	rem, err := s.remaining(ctx, lock, v)
	if err != nil {
		return driver.Info{}, fmt.Errorf("etcdstore: inspect %q: %w", name, err)
	}
	info.Remaining = max(info.Remaining, rem)
	return info, nil
}

// remaining is how long the lock or permit kv, holding v, has left: the
// shorter of the lease its owner asked for and its etcd lease's time to
// live (at least a millisecond: it was there when read).
func (s *Store) remaining(ctx context.Context, kv *mvccpb.KeyValue, v lockValue) (time.Duration, error) {
	ttl, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		return 0, fmt.Errorf("the holder's lease: %w", err)
	}
	// TTL is in whole seconds, rounded down; -1 once the lease is gone.
	return max(min(v.lease(), time.Duration(ttl.TTL)*time.Second), time.Millisecond), nil
}

// inspectSem is Inspect of a semaphore.
func (s *Store) inspectSem(ctx context.Context, name string) (driver.Info, error) {
	k, err := s.readSem(ctx, name, "")
	if err != nil {
		return driver.Info{}, err
	}
	info := driver.Info{Name: name, Kind: driver.KindPermit, Held: len(k.permits) > 0, Remaining: -1,
		Permits: k.semv.Permits, Waiters: -1}
	if k.fence != nil {
		info.Fence = k.fence.ModRevision
	}
	for i, kv := range k.permits {
		rem, err := s.remaining(ctx, kv, k.permitv[i])
		if err != nil {
			return driver.Info{}, fmt.Errorf("etcdstore: inspect %q: %w", name, err)
		}
		info.Owners = append(info.Owners, driver.OwnerHolds{Owner: k.permitv[i].Owner, Holds: 1, Kind: driver.KindPermit, Remaining: rem})
		info.Remaining = max(info.Remaining, rem)
	}
	return info, nil
}

// nameKeys are the keys of one name, as read in one transaction.
type nameKeys struct {
	lock, fence, sem *mvccpb.KeyValue // nil when absent
	wake             *mvccpb.KeyValue
	places           []*mvccpb.KeyValue
	readers          []*mvccpb.KeyValue
	readerv          []lockValue
	marks            []*mvccpb.KeyValue
}

// read returns name's keys, read in one transaction, or a
// *driver.NotALockError when any holds something that is not the Store's.
func (s *Store) read(ctx context.Context, name string) (nameKeys, error) {
	ops := append(s.readOps([]driver.Request{{Name: name}}), clientv3.OpGet(s.queueDir(name), clientv3.WithPrefix()),
		clientv3.OpGet(s.readDir(name), clientv3.WithPrefix()), clientv3.OpGet(s.markDir(name), clientv3.WithPrefix()),
		clientv3.OpGet(s.wakeKey(name)))
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nameKeys{}, fmt.Errorf("etcdstore: read %q: %w", name, err)
	}
	all := func(i int) []*mvccpb.KeyValue { return resp.Responses[readsPerName+i].GetResponseRange().GetKvs() }
	k := nameKeys{lock: only(resp.Responses[0]), fence: only(resp.Responses[1]), sem: only(resp.Responses[2]),
		places: all(0), readers: all(1), marks: all(2), wake: only(resp.Responses[readsPerName+3])}
	if k.wake != nil && string(k.wake.Value) != wakeMark {
		return nameKeys{}, s.notALock(name, string(k.wake.Key), k.wake.Value)
	}
	if k.fence != nil && string(k.fence.Value) != fenceMark {
		return nameKeys{}, s.notALock(name, string(k.fence.Key), k.fence.Value)
	}
	if k.lock != nil {
		if _, ok := decode(k.lock.Value); !ok {
			return nameKeys{}, s.notALock(name, string(k.lock.Key), k.lock.Value)
		}
	}
	for _, p := range append(slices.Clip(k.places), k.marks...) {
		if _, err := s.place(name, p); err != nil {
			return nameKeys{}, err
		}
	}
	for _, r := range k.readers {
		v, ok := decodeKind(r.Value, kindRead)
		if !ok {
			return nameKeys{}, s.notALock(name, string(r.Key), r.Value)
		}
		k.readerv = append(k.readerv, v)
	}
	return k, nil
}

// listPage is how many keys one List read returns.
const listPage = 1000

// List implements driver.Admin: it reads the lock keys and permit keys
// whose names start with the pattern's literal prefix, a page at a time at
// one revision, and returns the names that match the pattern and hold a
// lock or a permit, sorted. Keys that hold anything else are left out.
func (s *Store) List(ctx context.Context, pattern string) ([]string, error) {
	match := func(string) bool { return true } // "" matches every name
	if pattern != "" {
		re, err := driver.Glob(pattern)
		if err != nil {
			return nil, fmt.Errorf("etcdstore: list %q: %w", pattern, err)
		}
		match = re.MatchString
	}
	var names []string
	var rev int64
	held := func(kind string) func([]byte) bool {
		return func(b []byte) bool { _, ok := decodeKind(b, kind); return ok }
	}
	for _, sp := range []struct {
		space string
		held  func([]byte) bool
	}{
		{lockSpace, func(b []byte) bool { _, ok := decode(b); return ok }},
		{readSpace, held(kindRead)},
		{permitSpace, held(kindPermit)},
	} {
		base := s.prefix + sp.space
		from := base + literalPrefix(pattern)
		end := clientv3.GetPrefixRangeEnd(from)
		for {
			opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPage)}
			if rev != 0 {
				opts = append(opts, clientv3.WithRev(rev))
			}
			resp, err := s.cli.Get(ctx, from, opts...)
			if err != nil {
				return nil, fmt.Errorf("etcdstore: list %q: %w", pattern, err)
			}
			rev = resp.Header.Revision
			for _, kv := range resp.Kvs {
				name, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), base), queueSep)
				if sp.held(kv.Value) && match(name) {
					names = append(names, name)
				}
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// literalPrefix returns the characters every name a driver.Glob pattern
// matches starts with.
func literalPrefix(pattern string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*', '?':
			return b.String()
		case '\\':
			if i+1 == len(pattern) {
				return b.String()
			}
			i++
			b.WriteByte(pattern[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ForceRelease implements driver.Admin: it deletes name's lock key,
// whoever holds it, its readers, permits, fair queue places and writer
// marks, in transactions that check each key is the one it read (so a key
// that is not the Store's is never deleted), and stamps the name's wake key
// (which wakes every waiter of a read-write lock). The fence key stays, so
// tokens keep growing. The deletions wake the name's watchers; the holder
// learns of it at its next renewal, whose check finds the key gone.
func (s *Store) ForceRelease(ctx context.Context, name string) (bool, error) {
	for range maxAttempts {
		st, err := s.read(ctx, name)
		if err != nil {
			return false, err
		}
		kvs := slices.Concat(st.places, st.readers, st.marks)
		if st.lock != nil {
			kvs = append([]*mvccpb.KeyValue{st.lock}, kvs...)
		}
		if st.sem != nil {
			k, err := s.readSem(ctx, name, "")
			if err != nil {
				return false, err
			}
			kvs = append(kvs, k.permits...)
		}
		if len(kvs) == 0 {
			return false, nil
		}
		ok, wake := true, true
		for len(kvs) > 0 && ok {
			n := min(len(kvs), renewBatch)
			var cmps []clientv3.Cmp
			var dels []clientv3.Op
			if wake {
				// The first transaction stamps the wake key: every waiter
				// of a read-write lock is woken (see Watch).
				cmps = append(cmps, unchanged(s.wakeKey(name), st.wake))
				dels = append(dels, clientv3.OpPut(s.wakeKey(name), wakeMark))
				wake = false
			}
			for _, kv := range kvs[:n] {
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision))
				dels = append(dels, clientv3.OpDelete(string(kv.Key)))
			}
			resp, err := s.cli.Txn(ctx).If(cmps...).Then(dels...).Commit()
			if err != nil {
				return false, fmt.Errorf("etcdstore: force release %q: %w", name, err)
			}
			ok = resp.Succeeded
			kvs = kvs[n:]
		}
		if ok {
			return true, nil
		}
	}
	return false, fmt.Errorf("etcdstore: force release %q: its keys kept changing under %d attempts", name, maxAttempts)
}
