package redisstore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// notALock decodes a script's refusal of a name that is not a lock, {-1,
// what, ...} (see not_lock in lib.lua), into a *leash.NotALockError; it
// returns nil for any other reply.
func notALock(name string, v any) *leash.NotALockError {
	a, ok := v.([]any)
	if !ok || len(a) < 2 || a[0] != int64(-1) {
		return nil
	}
	what, ok := a[1].(string)
	if !ok {
		return nil
	}
	return &leash.NotALockError{Name: name, Found: what}
}

// parseGrant decodes acquire.lua's reply: {1, token, holds}, {0, pttl}, or
// {0, pttl, 1} when waiters are queued.
func parseGrant(v any) (driver.Grant, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 2 {
		return driver.Grant{}, fmt.Errorf("unexpected acquire reply %#v", v)
	}
	ints := make([]int64, len(a))
	for i, x := range a {
		n, ok := x.(int64)
		if !ok {
			return driver.Grant{}, fmt.Errorf("unexpected acquire reply %#v", v)
		}
		ints[i] = n
	}
	switch {
	case ints[0] == 1 && len(ints) == 3 && ints[1] > 0 && ints[2] > 0:
		return driver.Grant{Acquired: true, Fence: ints[1]}, nil
	case ints[0] == 0 && len(ints) == 2:
		rem := time.Duration(-1)
		if ints[1] >= 0 {
			rem = time.Duration(ints[1]) * time.Millisecond
		}
		return driver.Grant{Remaining: rem}, nil
	case ints[0] == 0 && len(ints) == 3 && ints[2] == 1:
		rem := time.Duration(-1)
		if ints[1] >= 0 {
			rem = time.Duration(ints[1]) * time.Millisecond
		}
		return driver.Grant{Remaining: rem, Queued: true}, nil
	}
	return driver.Grant{}, fmt.Errorf("unexpected acquire reply %#v", v)
}

// parseRenew decodes renew.lua's reply for n keys.
func parseRenew(v any, n int) ([]driver.RenewStatus, error) {
	a, ok := v.([]any)
	if !ok || len(a) != n {
		return nil, fmt.Errorf("unexpected renew reply for %d keys: %#v", n, v)
	}
	out := make([]driver.RenewStatus, n)
	for i, x := range a {
		switch x {
		case int64(1):
			out[i] = driver.Renewed
		case int64(0):
			out[i] = driver.RenewGone
		case int64(2):
			out[i] = driver.RenewTaken
		case int64(3):
			out[i] = driver.RenewRevoked
		default:
			return nil, fmt.Errorf("unexpected renew status %#v for key %d", x, i)
		}
	}
	return out, nil
}

// parseMultiGrant decodes acquire_many.lua's reply for n locks:
// {1, token, ...} or {0, pttl}.
func parseMultiGrant(v any, n int) (driver.MultiGrant, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 2 {
		return driver.MultiGrant{}, fmt.Errorf("unexpected acquire reply %#v", v)
	}
	ints := make([]int64, len(a))
	for i, x := range a {
		if ints[i], ok = x.(int64); !ok {
			return driver.MultiGrant{}, fmt.Errorf("unexpected acquire reply %#v", v)
		}
	}
	switch {
	case ints[0] == 1 && len(ints) == n+1 && !slices.ContainsFunc(ints[1:], func(f int64) bool { return f <= 0 }):
		return driver.MultiGrant{Acquired: true, Fences: ints[1:]}, nil
	case ints[0] == 0 && len(ints) == 2:
		rem := time.Duration(-1)
		if ints[1] >= 0 {
			rem = time.Duration(ints[1]) * time.Millisecond
		}
		return driver.MultiGrant{Remaining: rem}, nil
	}
	return driver.MultiGrant{}, fmt.Errorf("unexpected acquire reply %#v for %d locks", v, n)
}

// parseInfo decodes inspect.lua's reply: {type, contents, pttl, token, now,
// readers, queued, permit count}.
func parseInfo(name string, v any) (driver.Info, error) {
	info := driver.Info{Name: name, Remaining: -1}
	a, ok := v.([]any)
	if !ok || len(a) != 8 {
		return info, fmt.Errorf("unexpected inspect reply %#v", v)
	}
	typ, ok1 := a[0].(string)
	contents, ok2 := a[1].([]any)
	pttl, ok3 := a[2].(int64)
	now, ok4 := a[4].(int64)
	readers, ok5 := a[5].([]any)
	queued, ok6 := a[6].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || len(contents)%2 != 0 || len(readers)%2 != 0 {
		return info, fmt.Errorf("unexpected inspect reply %#v", v)
	}
	info.Queued = int(queued)
	var err error
	if info.Fence, err = optInt(a[3]); err != nil {
		return info, fmt.Errorf("fencing counter of %q: %w", name, err)
	}
	permits, err := optInt(a[7])
	if err != nil {
		return info, fmt.Errorf("permit count of %q: %w", name, err)
	}
	// leases appends owners with per-owner deadlines (readers, permits).
	leases := func(kind driver.Kind, flat []any) error {
		for i := 0; i < len(flat); i += 2 {
			owner, ok1 := flat[i].(string)
			score, ok2 := flat[i+1].(string)
			end, err := strconv.ParseFloat(score, 64)
			if !ok1 || !ok2 || err != nil {
				return fmt.Errorf("unexpected lease %#v = %#v", flat[i], flat[i+1])
			}
			if rem := time.Duration(int64(end)-now) * time.Millisecond; rem > 0 {
				info.Owners = append(info.Owners, driver.OwnerHolds{Owner: owner, Holds: 1, Kind: kind, Remaining: rem})
				info.Remaining = max(info.Remaining, rem)
			}
		}
		return nil
	}
	switch typ {
	case "none":
		if permits > 0 {
			info.Kind, info.Permits = driver.KindPermit, int(permits)
		}
	case "hash":
		info.Kind = driver.KindMutex
		// Each leash reader keeps a field in the hash, as Redisson's readers
		// do (see acquire_read.lua); its lease is in the readers' zset.
		readerOwners := make(map[any]bool, len(readers)/2)
		for i := 0; i < len(readers); i += 2 {
			readerOwners[readers[i]] = true
		}
		var holders []driver.OwnerHolds
		for i := 0; i < len(contents); i += 2 {
			field, ok1 := contents[i].(string)
			value, ok2 := contents[i+1].(string)
			if !ok1 || !ok2 {
				return info, &leash.NotALockError{Name: name, Found: "a hash without lock fields"}
			}
			if field == "revoked" {
				info.Revoked = strings.Split(value, "\n")
				continue
			}
			if readerOwners[field] {
				continue // a leash reader's hold, listed with its lease below
			}
			if field == "mode" {
				switch value {
				case "write":
					info.Kind = driver.KindWrite
				case "read":
					info.Kind = driver.KindRead
				default:
					return info, &leash.NotALockError{Name: name, Found: "a hash without lock fields"}
				}
				continue
			}
			holds, err := strconv.Atoi(value)
			if err != nil {
				return info, &leash.NotALockError{Name: name, Found: "a hash without lock fields"}
			}
			holders = append(holders, driver.OwnerHolds{Owner: field, Holds: holds, Remaining: -1})
		}
		for i := range holders {
			holders[i].Kind = info.Kind
		}
		info.Owners = holders
		if (len(holders) > 0 || len(info.Revoked) > 0) && pttl >= 0 {
			info.Remaining = time.Duration(pttl) * time.Millisecond
		}
		if err := leases(driver.KindRead, readers); err != nil {
			return info, err
		}
	case "zset":
		info.Kind, info.Permits = driver.KindPermit, int(permits)
		if err := leases(driver.KindPermit, contents); err != nil {
			return info, err
		}
	default:
		return info, &leash.NotALockError{Name: name, Found: "a " + typ}
	}
	info.Held = len(info.Owners) > 0
	return info, nil
}

// optInt decodes an integer string reply that may be nil.
func optInt(v any) (int64, error) {
	if v == nil {
		return 0, nil
	}
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("not an integer: %#v", v)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not an integer: %q", s)
	}
	return n, nil
}
