package redisstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/redis/go-redis/v9"
)

// Acquire implements [driver.Store].
func (s *Store) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if s.err != nil {
		return driver.Grant{}, s.err
	}
	n := s.key(req.Name)
	var (
		script *redis.Script
		keys   []string
		args   []any
	)
	// Room for the restart marker and grace that runAcquire appends.
	switch req.Kind {
	case driver.KindMutex:
		if req.Wait > 0 {
			// A starving waiter: its mark is a place in the fair queue,
			// served by the FairMutex's script (see Starvation).
			script = acquireFairScript
			keys = mutexKeys(n)
			args = s.fairArgs(req)
			break
		}
		script = acquireScript
		keys = mutexKeys(n)
		var owner *string
		args, owner = ownerArgs(req.Owner)
		args = append(args, s.leaseMS(req.Lease), owner)
	case driver.KindFair:
		script = acquireFairScript
		keys = mutexKeys(n)
		args = s.fairArgs(req)
	case driver.KindRead:
		script, keys = acquireReadScript, []string{n, tokenKey(n), readersKey(n), writersKey(n), readerTimeoutKey(n, req.Owner)}
		args = append(make([]any, 0, 4), ms(req.Lease), req.Owner, req.Parent)
	case driver.KindWrite:
		script, keys = acquireWriteScript, []string{n, tokenKey(n), readersKey(n), writersKey(n)}
		args = []any{ms(req.Lease), req.Owner, waitMS(req.Wait)}
	case driver.KindPermit:
		script, keys = acquirePermitScript, []string{n, tokenKey(n), semSizeKey(n)}
		args = []any{ms(req.Lease), req.Owner, req.Permits}
	default:
		return driver.Grant{}, fmt.Errorf("redisstore: acquire %q: kind %v: %w", req.Name, req.Kind, leash.ErrUnsupported)
	}
	v, left, ok, err := s.runAcquire(ctx, script, []driver.Request{req}, keys, args, false)
	if err != nil {
		if strings.HasPrefix(err.Error(), "LEASH_UPGRADE") {
			return driver.Grant{}, fmt.Errorf("redisstore: acquire %q: %w", req.Name, leash.ErrUpgrade)
		}
		return driver.Grant{}, fmt.Errorf("redisstore: acquire %q: %w", req.Name, err)
	}
	if !ok {
		return driver.Grant{Remaining: left, Grace: true}, nil
	}
	if e := notALock(req.Name, v); e != nil {
		return driver.Grant{}, fmt.Errorf("redisstore: acquire: %w", e)
	}
	g, err := parseGrant(v)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("redisstore: acquire %q: %w", req.Name, err)
	}
	return g, nil
}

// mutexKeys are the KEYS of acquire.lua and acquire_fair.lua, with room
// for the restart marker that runAcquire appends.
func mutexKeys(n string) []string {
	return companions(append(make([]string, 0, 5), n), n, tokenPrefix, fairQueuePrefix, fairPlacesPrefix)
}

// Starvation implements [driver.StarvationStore]. A starving Mutex
// waiter's mark is a place in the name's fair queue
// (leash_fair_queue:{name}, leash_fair_places:{name}): acquire.lua refuses a
// fresh grant while a live place is queued, and release.lua wakes the
// first place's waiter on its client's fair channel (see WatchClient).
// Redisson's RLock ignores the queue and is still excluded by the lock hash.
func (s *Store) Starvation() bool { return true }

// fairArgs are acquire_fair.lua's arguments for req, with room for the
// grace that runAcquire appends: the lease and the place lifetime boxed
// once while they stay the same, the owner and the list in one allocation.
func (s *Store) fairArgs(req driver.Request) []any {
	args, owner := ownerArgs(req.Owner)
	return append(args, s.leaseMS(req.Lease), owner, s.waitArg.get(req.Wait, waitMSArg))
}

// waitMS is a place lifetime in milliseconds; 0 means no place.
func waitMS(d time.Duration) int64 { return max(d.Milliseconds(), 0) }

// Partition implements [driver.MultiStore]: on one server every name can be
// taken together; on Cluster, names are grouped by hash slot, groups in slot
// order and names sorted within each, which is the global order MultiLock
// follows.
func (s *Store) Partition(names []string) [][]string {
	sorted := slices.Sorted(slices.Values(names))
	if !s.cluster {
		return [][]string{sorted}
	}
	bySlot := map[int][]string{}
	for _, n := range sorted {
		sl := slot(s.key(n))
		bySlot[sl] = append(bySlot[sl], n)
	}
	var out [][]string
	for _, sl := range slices.Sorted(maps.Keys(bySlot)) {
		out = append(out, bySlot[sl])
	}
	return out
}

// AcquireMany implements [driver.MultiStore]. The requests must be in one
// group of Partition.
func (s *Store) AcquireMany(ctx context.Context, reqs []driver.Request) (driver.MultiGrant, error) {
	if s.err != nil {
		return driver.MultiGrant{}, s.err
	}
	if len(reqs) == 0 {
		return driver.MultiGrant{Acquired: true}, nil
	}
	keys := make([]string, 0, 2*len(reqs))
	for _, r := range reqs {
		k := s.key(r.Name)
		keys = append(keys, k, tokenKey(k))
	}
	// acquire_many.lua grants every name to the first request's owner, as
	// a Mutex; that is what an undo gives back.
	undo := make([]driver.Request, len(reqs))
	for i, r := range reqs {
		undo[i] = driver.Request{Kind: driver.KindMutex, Name: r.Name, Owner: reqs[0].Owner, Lease: reqs[0].Lease}
	}
	v, left, ok, err := s.runAcquire(ctx, acquireManyScript, undo, keys, []any{ms(reqs[0].Lease), reqs[0].Owner}, true)
	if err != nil {
		return driver.MultiGrant{}, fmt.Errorf("redisstore: acquire %d locks from %q: %w", len(reqs), reqs[0].Name, err)
	}
	if !ok {
		return driver.MultiGrant{Remaining: left, Grace: true}, nil
	}
	if a, isArr := v.([]any); isArr && len(a) == 3 {
		// {-1, what, i}: the i-th name (from 1) is not a lock.
		if i, _ := a[2].(int64); i >= 1 && int(i) <= len(reqs) {
			if e := notALock(reqs[i-1].Name, v); e != nil {
				return driver.MultiGrant{}, fmt.Errorf("redisstore: acquire %d locks: %w", len(reqs), e)
			}
		}
	}
	mg, err := parseMultiGrant(v, len(reqs))
	if err != nil {
		return driver.MultiGrant{}, fmt.Errorf("redisstore: acquire %d locks from %q: %w", len(reqs), reqs[0].Name, err)
	}
	return mg, nil
}
