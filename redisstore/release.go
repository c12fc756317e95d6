package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/redis/go-redis/v9"
)

// Release implements [driver.Store]: it drops every hold of req.Owner.
func (s *Store) Release(ctx context.Context, req driver.Request) error {
	_, err := s.release(ctx, req, "all")
	return err
}

// Withdraw implements [driver.Withdrawer].
func (s *Store) Withdraw(ctx context.Context, req driver.Request) error {
	if s.err != nil {
		return s.err
	}
	n := s.key(req.Name)
	keys := []string{n, fairQueueKey(n), fairPlacesKey(n), fairChannel(n), writersKey(n), rwChannel(n), channelName(n)}
	script, err := s.pick(ctx, withdrawScript)
	if err == nil {
		_, err = s.pipe.run(ctx, script, keys, req.Owner)
	}
	if err != nil {
		return fmt.Errorf("redisstore: withdraw from %q: %w", req.Name, err)
	}
	return nil
}

// release drops one hold of req.Owner (m "one", as a Redisson unlock does:
// what the store's own undo of a grant needs, since a Redisson-layout lock
// counts re-entries) or every hold (m "all"), and reports whether the lock
// was freed.
func (s *Store) release(ctx context.Context, req driver.Request, m string) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	n := s.key(req.Name)
	// The latch lives as long as a transport retry of this call may arrive.
	// In whole seconds, so that its boxed argument is reused (see lastArg).
	latchTTL := 30 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		latchTTL = min(latchTTL, (time.Until(dl) + 2*time.Second).Truncate(time.Second))
	}
	latch := s.nextLatch(n)
	var (
		script *pubScript
		keys   []string
		args   []any
	)
	switch req.Kind {
	case driver.KindMutex, driver.KindFair:
		script, keys = releaseScript, releaseKeys(n, latch)
		var owner *string
		args, owner = ownerArgs(req.Owner)
		args = append(args, owner, s.leaseMS(req.Lease), m, s.latchArg.get(latchTTL, msArg))
		wait, grace := s.handoffArgs(ctx, req)
		keys = append(keys, s.markerKey(req.Name))
		args = append(args, wait, grace)
	case driver.KindWrite:
		script = releaseWriteScript
		keys = []string{n, readersKey(n), writersKey(n), rwChannel(n), latch, redissonRWChannel(n)}
		args = []any{req.Owner, ms(req.Lease), m, ms(latchTTL)}
	case driver.KindRead:
		script = releaseReadScript
		keys = []string{n, readersKey(n), writersKey(n), rwChannel(n), latch, readerTimeoutKey(n, req.Owner), redissonRWChannel(n)}
		args = []any{req.Owner, ms(latchTTL)}
	case driver.KindPermit:
		script = releasePermitScript
		keys = []string{n, semChannel(n), latch, semSizeKey(n)}
		args = []any{req.Owner, ms(latchTTL)}
	default:
		return false, fmt.Errorf("redisstore: release %q: kind %v: %w", req.Name, req.Kind, leash.ErrUnsupported)
	}
	sc, err := s.pick(ctx, script)
	if err != nil {
		return false, fmt.Errorf("redisstore: release %q: %w", req.Name, err)
	}
	v, err := s.pipe.run(ctx, sc, keys, args...)
	if errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("redisstore: release %q: %w", req.Name, leash.ErrNotHeld)
	}
	if err != nil {
		return false, fmt.Errorf("redisstore: release %q: %w", req.Name, err)
	}
	if e := notALock(req.Name, v); e != nil {
		// Nothing was changed: the owner holds nothing there.
		return false, fmt.Errorf("redisstore: release: %w: %w", leash.ErrNotHeld, e)
	}
	r, ok := v.(int64)
	if !ok || (r != 0 && r != 1) {
		return false, fmt.Errorf("redisstore: release %q: unexpected reply %v", req.Name, v)
	}
	return r == 1, nil
}

// releaseKeys are the KEYS of release.lua, with latch, the request's
// latch key (see nextLatch), all but the restart marker.
func releaseKeys(name, latch string) []string {
	keys := make([]string, 2, 8)
	keys[0], keys[1] = name, latch
	keys = companions(keys, name, channelPrefix, fairQueuePrefix, fairPlacesPrefix, fairChanPrefix, tokenPrefix)
	// The order of release.lua: name, channel, latch, queue, places, fair
	// channel, counter; the caller appends the restart marker.
	keys[1], keys[2] = keys[2], keys[1]
	return keys
}

// ForceRelease implements [driver.Admin]. Each holder deleted is told on
// its client's revocation channel (see Revoke).
func (s *Store) ForceRelease(ctx context.Context, name string) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	k := s.key(name)
	keys := []string{k, fairQueueKey(k), fairPlacesKey(k), readersKey(k), writersKey(k),
		channelName(k), fairChannel(k), rwChannel(k), semChannel(k), semSizeKey(k), redissonRWChannel(k)}
	script, err := s.pick(ctx, forceScript)
	if err != nil {
		return false, fmt.Errorf("redisstore: force release %q: %w", name, err)
	}
	v, err := script.Run(ctx, s.rdb, keys, s.revokeChannel(""), name).Result()
	if err != nil {
		return false, fmt.Errorf("redisstore: force release %q: %w", name, err)
	}
	if e := notALock(name, v); e != nil {
		return false, fmt.Errorf("redisstore: force release: %w", e)
	}
	r, ok := v.(int64)
	if !ok {
		return false, fmt.Errorf("redisstore: force release %q: unexpected reply %v", name, v)
	}
	return r == 1, nil
}

// SetPermits implements [driver.PermitSetter].
func (s *Store) SetPermits(ctx context.Context, name string, n int) error {
	if s.err != nil {
		return s.err
	}
	k := s.key(name)
	keys := []string{semSizeKey(k), semChannel(k), k}
	script, err := s.pick(ctx, setPermitsScript)
	if err != nil {
		return fmt.Errorf("redisstore: set permits of %q: %w", name, err)
	}
	v, err := script.Run(ctx, s.rdb, keys, n).Result()
	if err != nil {
		return fmt.Errorf("redisstore: set permits of %q: %w", name, err)
	}
	if e := notALock(name, v); e != nil {
		return fmt.Errorf("redisstore: set permits: %w", e)
	}
	return nil
}

var _ driver.PermitSetter = (*Store)(nil)
var _ driver.MultiStore = (*Store)(nil)
