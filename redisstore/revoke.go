package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// revokePrefix is the prefix of a client's revocation channel: its client
// id follows. The channel is the client's, not a lock's: one subscription
// per Store serves every lock its clients hold, and Redisson, which never
// subscribes to it, hears nothing of revocations (its waiters are woken on
// their own channels only when the name is free).
const revokePrefix = "leash_revoke__channel:"

func (s *Store) revokeChannel(client string) string { return s.opts.KeyPrefix + revokePrefix + client }

// Revoke implements [driver.Revoker]: one script (revoke.lua) replaces the
// exclusive lock's owner fields with a tombstone that keeps the lock's TTL,
// and publishes the revocation on the holder's client's channel.
func (s *Store) Revoke(ctx context.Context, name string) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	k := s.key(name)
	v, err := revokeScript.Run(ctx, s.rdb, []string{k, readersKey(k), semSizeKey(k)}, s.revokeChannel(""), name).Result()
	if err != nil {
		return false, fmt.Errorf("redisstore: revoke %q: %w", name, err)
	}
	if e := notALock(name, v); e != nil {
		return false, fmt.Errorf("redisstore: revoke: %w", e)
	}
	if a, ok := v.([]any); ok && len(a) == 2 && a[0] == int64(-2) {
		return false, fmt.Errorf("redisstore: revoke %q: %w: the name holds %v, whose holders are not revoked; force release it",
			name, leash.ErrUnsupported, a[1])
	}
	r, ok := v.(int64)
	if !ok {
		return false, fmt.Errorf("redisstore: revoke %q: unexpected reply %v", name, v)
	}
	return r == 1, nil
}

// AckRevoke implements [driver.Revoker].
func (s *Store) AckRevoke(ctx context.Context, req driver.Request) error {
	if s.err != nil {
		return s.err
	}
	k := s.key(req.Name)
	keys := []string{k, channelName(k), fairChannel(k), rwChannel(k), redissonRWChannel(k)}
	script, err := s.pick(ctx, ackRevokeScript)
	if err == nil {
		err = script.Run(ctx, s.rdb, keys, req.Owner).Err()
	}
	if err != nil {
		return fmt.Errorf("redisstore: acknowledge the revocation of %q: %w", req.Name, err)
	}
	return nil
}

// WatchRevokes implements [driver.Revoker] on the Store's pub/sub
// connection, which its waiters share.
func (s *Store) WatchRevokes(ctx context.Context, client string, revoked func(driver.Revocation)) (func(), error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.notify.add(ctx, []string{s.revokeChannel(client)}, &watcher{raw: func(payload string) {
		if rv, err := parseRevocation(payload); err == nil {
			revoked(rv)
		}
	}})
}

// parseRevocation decodes a revocation message, "revoked\n<owner>\n<name>"
// or "freed\n<owner>\n<name>" (see revoke.lua and force.lua). Names and
// owners hold no control characters.
func parseRevocation(payload string) (driver.Revocation, error) {
	what, rest, ok1 := strings.Cut(payload, "\n")
	owner, name, ok2 := strings.Cut(rest, "\n")
	if !ok1 || !ok2 || (what != "revoked" && what != "freed") {
		return driver.Revocation{}, errors.New("redisstore: not a revocation message")
	}
	return driver.Revocation{Name: name, Owner: owner, Freed: what == "freed"}, nil
}

var _ driver.Revoker = (*Store)(nil)
