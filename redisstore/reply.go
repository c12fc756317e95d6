package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/leash-go/leash"
)

// parseGrant decodes acquire.lua's reply: {1, token, holds} or {0, pttl}.
func parseGrant(v any) (leash.Grant, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 2 {
		return leash.Grant{}, fmt.Errorf("unexpected acquire reply %#v", v)
	}
	ints := make([]int64, len(a))
	for i, x := range a {
		n, ok := x.(int64)
		if !ok {
			return leash.Grant{}, fmt.Errorf("unexpected acquire reply %#v", v)
		}
		ints[i] = n
	}
	switch {
	case ints[0] == 1 && len(ints) == 3 && ints[1] > 0 && ints[2] > 0:
		return leash.Grant{Acquired: true, Fence: ints[1], Holds: int(ints[2])}, nil
	case ints[0] == 0 && len(ints) == 2:
		rem := time.Duration(-1)
		if ints[1] >= 0 {
			rem = time.Duration(ints[1]) * time.Millisecond
		}
		return leash.Grant{Remaining: rem}, nil
	}
	return leash.Grant{}, fmt.Errorf("unexpected acquire reply %#v", v)
}

// parseRenew decodes renew.lua's reply for n keys.
func parseRenew(v any, n int) ([]leash.RenewStatus, error) {
	a, ok := v.([]any)
	if !ok || len(a) != n {
		return nil, fmt.Errorf("unexpected renew reply for %d keys: %#v", n, v)
	}
	out := make([]leash.RenewStatus, n)
	for i, x := range a {
		switch x {
		case int64(1):
			out[i] = leash.Renewed
		case int64(0):
			out[i] = leash.RenewGone
		case int64(2):
			out[i] = leash.RenewTaken
		default:
			return nil, fmt.Errorf("unexpected renew status %#v for key %d", x, i)
		}
	}
	return out, nil
}

// parseInfo decodes inspect.lua's reply: {fields, pttl, token}.
func parseInfo(name string, v any) (leash.Info, error) {
	info := leash.Info{Name: name, Remaining: -1}
	a, ok := v.([]any)
	if !ok || len(a) < 2 || len(a) > 3 {
		return info, fmt.Errorf("unexpected inspect reply %#v", v)
	}
	fields, ok := a[0].([]any)
	if !ok || len(fields)%2 != 0 {
		return info, fmt.Errorf("unexpected inspect fields %#v", a[0])
	}
	for i := 0; i < len(fields); i += 2 {
		owner, ok1 := fields[i].(string)
		count, ok2 := fields[i+1].(string)
		holds, err := strconv.Atoi(count)
		if !ok1 || !ok2 || err != nil {
			return info, fmt.Errorf("key %q is not a lock hash: field %#v = %#v", name, fields[i], fields[i+1])
		}
		info.Owners = append(info.Owners, leash.OwnerHolds{Owner: owner, Holds: holds})
	}
	info.Held = len(info.Owners) > 0
	pttl, ok := a[1].(int64)
	if !ok {
		return info, fmt.Errorf("unexpected inspect pttl %#v", a[1])
	}
	if info.Held && pttl >= 0 {
		info.Remaining = time.Duration(pttl) * time.Millisecond
	}
	if len(a) == 3 && a[2] != nil {
		tok, ok := a[2].(string)
		f, err := strconv.ParseInt(tok, 10, 64)
		if !ok || err != nil {
			return info, fmt.Errorf("fencing counter of %q is not an integer: %#v", name, a[2])
		}
		info.Fence = f
	}
	return info, nil
}
