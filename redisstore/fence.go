package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

//go:embed lua/raise_fence.lua
var raiseFenceLua string

var raiseFenceScript = withLib(raiseFenceLua)

// maxToken is 2^53-1, the last fencing token the scripts count exactly (Lua's
// numbers are doubles): a counter there is refused (see lib.lua's mint).
const maxToken = 1<<53 - 1

// RaiseFence implements [driver.FenceRaiser]: it raises name's fencing
// counter (Redisson's redisson_lock_token:{name}, the key every grant mints
// its token from) to floor when it is lower, in one script. Every later
// grant's token is then max(counter + 1, the server's time in µs), above
// floor. A counter key holding anything but a decimal counter below 2^53-1
// (the last token a script counts exactly) is refused with
// leash.ErrNotALock and left unchanged; a floor past 2^53-1 is refused
// before any round trip, with leash.ErrInvalidArgument.
func (s *Store) RaiseFence(ctx context.Context, name string, floor int64) error {
	if s.err != nil {
		return s.err
	}
	if floor <= 0 || floor > maxToken {
		return fmt.Errorf("%w: redisstore: raise the fencing counter of %q to %d: the floor must be positive and at most 2^53-1, the last token a script counts exactly",
			leash.ErrInvalidArgument, name, floor)
	}
	v, err := raiseFenceScript.Run(ctx, s.rdb, []string{tokenKey(s.key(name))}, strconv.FormatInt(floor, 10)).Result()
	if err != nil {
		return fmt.Errorf("redisstore: raise the fencing counter of %q: %w", name, err)
	}
	if e := notALock(name, v); e != nil {
		return fmt.Errorf("redisstore: raise the fencing counter: %w", e)
	}
	return nil
}

var _ driver.FenceRaiser = (*Store)(nil)
