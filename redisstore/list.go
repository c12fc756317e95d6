package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

const (
	// listScanCount is the COUNT hint of each SCAN step of List.
	listScanCount = 500
)

// List implements [driver.Admin]: it returns, sorted, the names of the locks held in the store whose names
// match pattern, a Redis glob as in SCAN MATCH ("" means "*"), matched
// against the names, not the keys: Options.KeyPrefix is added to the
// pattern and taken off the names. It walks the
// keyspace with SCAN, never KEYS, so it does not block the server; on
// Cluster it walks every master.
//
// A key counts as a lock when every script would take it for one (see
// [leash.ErrNotALock]): Redisson's RLock layout (a hash with an expiry whose
// fields are owners "<id>:<n>" with positive hold counts), the RWMutex layout
// (the same, with a field "mode" of "read" or "write"), or a held semaphore (a
// zset of owners with leash's permit count beside it). Other keys are skipped
// without being read in full. A lock taken or released
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
	prefix := s.opts.KeyPrefix
	match := globEscape(prefix) + pattern
	var (
		mu    sync.Mutex
		names []string
	)
	add := func(found []string) {
		mu.Lock()
		for _, k := range found {
			names = append(names, strings.TrimPrefix(k, prefix))
		}
		mu.Unlock()
	}
	var err error
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return listNode(ctx, node, match, add)
		})
	default:
		err = listNode(ctx, s.rdb, match, add)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: list %q: %w", pattern, err)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// globEscape escapes the glob characters of s, for SCAN MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// listNode walks one server's keyspace and passes each batch of locks to add.
func listNode(ctx context.Context, rdb redis.UniversalClient, pattern string, add func([]string)) error {
	for _, typ := range []string{"hash", "zset"} {
		var cursor uint64
		for {
			keys, next, err := rdb.ScanType(ctx, cursor, pattern, listScanCount, typ).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				locks, err := lockKeys(ctx, rdb, keys)
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

// lockKeys returns those of keys that are locks or semaphores, as every
// script judges it (is_lock.lua), in one pipeline.
func lockKeys(ctx context.Context, rdb redis.UniversalClient, keys []string) ([]string, error) {
	cmds := make([]*redis.Cmd, len(keys))
	_ = evalGroup(ctx, rdb, replicaGuard{}, nil, func(i int) (*redis.Script, []string, []any) {
		return isLockScript, []string{keys[i], semSizeKey(keys[i])}, nil
	}, cmds)
	var locks []string
	for i, k := range keys {
		n, err := cmds[i].Int64()
		if err != nil {
			return nil, err
		}
		if n == 1 {
			locks = append(locks, k)
		}
	}
	return locks, nil
}
