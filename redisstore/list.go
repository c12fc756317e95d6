package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

const (
	// listScanCount is the COUNT hint of each SCAN step of List.
	listScanCount = 500
	// listMaxOwners is the most owner fields a hash may have to be taken for
	// a lock: a mutex has one, and List never reads a large hash in full.
	listMaxOwners = 64
)

// List returns, sorted, the names of the locks held in the store whose names
// match pattern, a Redis glob as in SCAN MATCH ("" means "*"). It walks the
// keyspace with SCAN, never KEYS, so it does not block the server; on
// Cluster it walks every master.
//
// A key counts as a lock when it has Redisson's RLock layout (a hash with an
// expiry whose fields are owners "<id>:<n>" with positive hold counts), the
// RWMutex layout (the same, with a field "mode" of "read" or "write"), or is
// a held semaphore (a zset with leash's permit count beside it). Other keys
// are skipped without being read in full. A lock taken or released
// during the walk may or may not be listed, and the answer may be stale by
// the time it is read: List is an operator's tool, never a basis for a
// locking decision.
func (s *Store) List(ctx context.Context, pattern string) ([]string, error) {
	if s.err != nil {
		return nil, s.err
	}
	if pattern == "" {
		pattern = "*"
	}
	var (
		mu    sync.Mutex
		names []string
	)
	add := func(found []string) {
		mu.Lock()
		names = append(names, found...)
		mu.Unlock()
	}
	var err error
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return listNode(ctx, node, pattern, add)
		})
	default:
		err = listNode(ctx, s.rdb, pattern, add)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: list %q: %w", pattern, err)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// listNode walks one server's keyspace and passes each batch of locks to add.
func listNode(ctx context.Context, rdb redis.Cmdable, pattern string, add func([]string)) error {
	for typ, filter := range map[string]func(context.Context, redis.Cmdable, []string) ([]string, error){
		"hash": lockKeys, "zset": semaphoreKeys,
	} {
		var cursor uint64
		for {
			keys, next, err := rdb.ScanType(ctx, cursor, pattern, listScanCount, typ).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				locks, err := filter(ctx, rdb, keys)
				if err != nil {
					return err
				}
				add(locks)
			}
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	return nil
}

// semaphoreKeys returns those of keys, all zsets, that are held semaphores:
// non-empty, with leash's permit count beside them.
func semaphoreKeys(ctx context.Context, rdb redis.Cmdable, keys []string) ([]string, error) {
	pipe := rdb.Pipeline()
	sizes := make([]*redis.IntCmd, len(keys))
	cards := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		sizes[i] = pipe.Exists(ctx, semSizeKey(k))
		cards[i] = pipe.ZCard(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var sems []string
	for i, k := range keys {
		if sizes[i].Val() == 1 && cards[i].Val() > 0 {
			sems = append(sems, k)
		}
	}
	return sems, nil
}

// lockKeys returns those of keys, all hashes, that have the lock layout. It
// reads the size and expiry of every key first, and the fields only of small
// hashes with an expiry.
func lockKeys(ctx context.Context, rdb redis.Cmdable, keys []string) ([]string, error) {
	pipe := rdb.Pipeline()
	lens := make([]*redis.IntCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		lens[i] = pipe.HLen(ctx, k)
		ttls[i] = pipe.PTTL(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var small []string
	for i, k := range keys {
		if n := lens[i].Val(); n >= 1 && n <= listMaxOwners && ttls[i].Val() > 0 {
			small = append(small, k)
		}
	}
	if len(small) == 0 {
		return nil, nil
	}
	pipe = rdb.Pipeline()
	fields := make([]*redis.MapStringStringCmd, len(small))
	for i, k := range small {
		fields[i] = pipe.HGetAll(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var locks []string
	for i, k := range small {
		if isLockHash(fields[i].Val()) {
			locks = append(locks, k)
		}
	}
	return locks, nil
}

// isLockHash reports whether the fields of a hash are those of a held lock:
// at least one, each an owner "<id>:<n>" with a positive hold count.
func isLockHash(fields map[string]string) bool {
	if len(fields) == 0 {
		return false
	}
	for owner, count := range fields {
		if owner == "mode" && (count == "read" || count == "write") {
			continue // an RWMutex; a read-held one has no owner fields
		}
		id, n, ok := strings.Cut(owner, ":")
		if !ok || id == "" || n == "" {
			return false
		}
		if holds, err := strconv.Atoi(count); err != nil || holds < 1 {
			return false
		}
	}
	return true
}
