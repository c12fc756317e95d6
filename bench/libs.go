package main

import (
	"context"
	"errors"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// A lib is one lock library under test, configured as its documentation
// recommends.
type lib struct {
	name     string
	settings string // what the configuration is, for BENCHMARKS.md
	// fair reports whether waiters are served in arrival order; the report
	// compares the first fair library with the FIFO ideal.
	fair bool
	// open makes one client, as one process of the application would.
	open func(addr string) (locker, error)
}

// A locker is one client of a lock library.
type locker interface {
	// lock waits for name; the returned func releases it.
	lock(ctx context.Context, name string) (unlock func() error, err error)
	close() error
}

// errGaveUp is a peer's own "tried enough" error (redsync's tries, bsm's
// deadline). The contended runs retry after it and count it.
var errGaveUp = errors.New("the library gave up waiting")

// leashLease is leash's default lease; the renewal scenario shortens it to
// rueidislock's validity so that both renew on a comparable schedule.
const peerLease = 30 * time.Second

func goRedis(addr string) *redis.Client {
	// go-redis defaults (PoolSize 10 per CPU), as each library's README shows.
	return redis.NewClient(&redis.Options{Addr: addr})
}

func libs() []lib {
	return []lib{
		{
			name:     "leash Mutex",
			settings: "`leash.New(redisstore.New(rdb, nil), nil)`: defaults (30 s lease renewed every 10 s, pub/sub wake-ups); `c.Mutex(name).Lock(ctx)`",
			open:     openLeash(false),
		},
		{
			name:     "leash FairMutex",
			settings: "as leash Mutex; `c.FairMutex(name, nil).Lock(ctx)` (3 s queue places)",
			fair:     true,
			open:     openLeash(true),
		},
		{
			name:     "redsync",
			settings: "`redsync.New(goredis.NewPool(rdb)).NewMutex(name)`: defaults (8 s expiry, 32 tries, 50–250 ms random retry delay); `LockContext`/`UnlockContext`",
			open:     openRedsync,
		},
		{
			name:     "bsm/redislock",
			settings: "`redislock.New(rdb).Obtain(ctx, name, 30s, &redislock.Options{RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond)})` (no retry by default; 100 ms is the value in its example); `Release`",
			open:     openBSM,
		},
		{
			name:     "rueidislock",
			settings: "`rueidislock.NewLocker(LockerOption{KeyMajority: 1, NoLoopTracking: true})` as its README recommends for one Redis ≥ 7.0.5; other fields default (5 s validity extended every 2.5 s, client-side-caching wake-ups); `WithContext`, `cancel()`",
			open:     openRueidis,
		},
	}
}

// leash

type leashLocker struct {
	c    *leash.Client
	rdb  *redis.Client
	fair bool
}

func openLeash(fair bool) func(string) (locker, error) {
	return func(addr string) (locker, error) { return newLeash(addr, fair, nil) }
}

func newLeash(addr string, fair bool, opts *leash.Options) (*leashLocker, error) {
	rdb := goRedis(addr)
	c, err := leash.New(redisstore.New(rdb, nil), opts)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &leashLocker{c: c, rdb: rdb, fair: fair}, nil
}

func (l *leashLocker) lock(ctx context.Context, name string) (func() error, error) {
	var (
		h   *leash.Hold
		err error
	)
	if l.fair {
		h, err = l.c.FairMutex(name, nil).Lock(ctx)
	} else {
		h, err = l.c.Mutex(name).Lock(ctx)
	}
	if err != nil {
		return nil, err
	}
	return func() error { return h.Unlock(ctx) }, nil
}

func (l *leashLocker) close() error {
	err := l.c.Close()
	return errors.Join(err, l.rdb.Close())
}

// redsync

type redsyncLocker struct {
	rs  *redsync.Redsync
	rdb *redis.Client
}

func openRedsync(addr string) (locker, error) {
	rdb := goRedis(addr)
	return &redsyncLocker{rs: redsync.New(goredis.NewPool(rdb)), rdb: rdb}, nil
}

func (r *redsyncLocker) lock(ctx context.Context, name string) (func() error, error) {
	m := r.rs.NewMutex(name)
	if err := m.LockContext(ctx); err != nil {
		if errors.Is(err, redsync.ErrFailed) && ctx.Err() == nil {
			return nil, errGaveUp
		}
		return nil, err
	}
	return func() error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock returned false")
		}
		return err
	}, nil
}

func (r *redsyncLocker) close() error { return r.rdb.Close() }

// bsm/redislock

type bsmLocker struct {
	c    *redislock.Client
	rdb  *redis.Client
	opts *redislock.Options
}

func openBSM(addr string) (locker, error) {
	rdb := goRedis(addr)
	return &bsmLocker{c: redislock.New(rdb), rdb: rdb,
		opts: &redislock.Options{RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond)}}, nil
}

func (b *bsmLocker) lock(ctx context.Context, name string) (func() error, error) {
	l, err := b.c.Obtain(ctx, name, peerLease, b.opts)
	if err != nil {
		if (errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() == nil {
			return nil, errGaveUp
		}
		return nil, err
	}
	return func() error { return l.Release(ctx) }, nil
}

func (b *bsmLocker) close() error { return b.rdb.Close() }

// rueidislock

type rueidisLocker struct{ l rueidislock.Locker }

func openRueidis(addr string) (locker, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
		KeyMajority:    1,
		NoLoopTracking: true,
	})
	if err != nil {
		return nil, err
	}
	return &rueidisLocker{l: l}, nil
}

func (r *rueidisLocker) lock(ctx context.Context, name string) (func() error, error) {
	_, cancel, err := r.l.WithContext(ctx, name)
	if err != nil {
		return nil, err
	}
	return func() error { cancel(); return nil }, nil
}

func (r *rueidisLocker) close() error { r.l.Close(); return nil }
