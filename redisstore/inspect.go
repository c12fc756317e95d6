package redisstore

import (
	"context"
	"fmt"

	"github.com/leash-go/leash/driver"
)

// Inspect implements [driver.Admin].
func (s *Store) Inspect(ctx context.Context, name string) (driver.Info, error) {
	if s.err != nil {
		return driver.Info{}, s.err
	}
	k := s.key(name)
	keys := []string{k, tokenKey(k), fairQueueKey(k), readersKey(k), writersKey(k), semSizeKey(k)}
	v, err := inspectScript.Run(ctx, s.rdb, keys).Result()
	if err != nil {
		return driver.Info{}, fmt.Errorf("redisstore: inspect %q: %w", name, err)
	}
	if e := notALock(name, v); e != nil {
		return driver.Info{}, fmt.Errorf("redisstore: inspect: %w", e)
	}
	info, err := parseInfo(name, v)
	if err != nil {
		return driver.Info{}, fmt.Errorf("redisstore: inspect %q: %w", name, err)
	}
	info.Waiters = -1
	chans := []string{channelName(k), fairChannel(k), rwChannel(k), semChannel(k)}
	javaRW := redissonRWChannel(k)
	if subs, err := s.rdb.PubSubNumSub(ctx, append(chans, javaRW)...).Result(); err == nil {
		info.Waiters = 0
		for _, c := range chans {
			info.Waiters += int(subs[c])
		}
		// Leash's readers-writer waiters listen on Redisson's channel as
		// well as on leash's: the clients beyond them there are Java's.
		info.Waiters += max(0, int(subs[javaRW]-subs[rwChannel(k)]))
	}
	return info, nil
}
