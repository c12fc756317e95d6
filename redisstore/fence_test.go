package redisstore_test

import (
	"errors"
	"testing"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/redisstore"
)

// RaiseFence writes only the name's fencing counter, and only when that key
// is absent or holds a counter: a user's data there is refused with
// ErrNotALock and left as it was.
func TestRaiseFenceLeavesUserDataAlone(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	s := redisstore.New(rdb, nil)
	for _, ud := range userDataKinds {
		t.Run(ud.name, func(t *testing.T) {
			name := lockName(t)
			counter := "redisson_lock_token:{" + name + "}"
			if err := ud.write(bg(t), rdb, counter); err != nil {
				t.Fatal(err)
			}
			before := stateOf(t, rdb, counter)
			if err := s.RaiseFence(bg(t), name, 1<<40); !errors.Is(err, leash.ErrNotALock) {
				t.Errorf("RaiseFence over %s = %v, want ErrNotALock", ud.name, err)
			}
			checkUnchanged(t, rdb, counter, before)
		})
	}
	// A counter already above the floor stays as it is: counters compare as
	// decimals, never as Lua numbers.
	name := lockName(t) + "/above"
	rdb.Set(bg(t), "redisson_lock_token:{"+name+"}", "9007199254740990", 0) // 2^53-2
	if err := s.RaiseFence(bg(t), name, 9007199254740989); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(bg(t), "redisson_lock_token:{"+name+"}").Val(); v != "9007199254740990" {
		t.Errorf("counter 2^53-2 after a raise to 2^53-3 = %q, want it unchanged", v)
	}
	// One at 2^53-1 or past it is no fencing counter leash or Redisson
	// would write (see TestTokenIsMaxOfCounterAndClock): refused, kept.
	rdb.Set(bg(t), "redisson_lock_token:{"+name+"}", "9007199254740993", 0) // 2^53+1: not a Lua number
	if err := s.RaiseFence(bg(t), name, 1<<40); !errors.Is(err, leash.ErrNotALock) {
		t.Errorf("RaiseFence over counter 2^53+1 = %v, want ErrNotALock", err)
	}
	if err := s.RaiseFence(bg(t), name, 1<<53); !errors.Is(err, leash.ErrInvalidArgument) {
		t.Errorf("RaiseFence to 2^53 = %v, want ErrInvalidArgument", err)
	}
	if v := rdb.Get(bg(t), "redisson_lock_token:{"+name+"}").Val(); v != "9007199254740993" {
		t.Errorf("counter 2^53+1 after a refused raise = %q, want it unchanged", v)
	}
}
