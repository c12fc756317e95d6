package testkit

import (
	"errors"
	"fmt"
)

// FenceLua is the fenced resource of the tests and the demo, run with EVAL
// (or EVALSHA) on a server that no fault touches: a row that accepts a
// write whose token is not below the highest it has accepted (a holder
// writes more than once), and optionally numbers the accepted writes in the
// order it took them.
//
//	KEYS[1]  the row: the highest token accepted so far
//	KEYS[2]  optional: a counter of accepted writes
//	ARGV[1]  the writer's fencing token
//	ARGV[2]  optional: "0" accepts any token (an unfenced resource, a
//	         negative control); absent or anything else fences
//	Returns  {accepted 1|0, the row's token after the write,
//	          the write's number in KEYS[2], or 0 when rejected or uncounted}
//
// Read the reply with ParseFence.
const FenceLua = `
local seen = tonumber(redis.call('get', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if ARGV[2] ~= '0' and token < seen then return {0, seen, 0} end
if token > seen then
  redis.call('set', KEYS[1], ARGV[1])
  seen = token
end
local seq = 0
if KEYS[2] then seq = redis.call('incr', KEYS[2]) end
return {1, seen, seq}`

// Fence is FenceLua's answer to one write.
type Fence struct {
	// Accepted reports whether the resource took the write.
	Accepted bool
	// Seen is the highest token the resource has accepted, this write's
	// included.
	Seen int64
	// Seq numbers the accepted writes to a counted resource, from 1; it is
	// 0 when the write was rejected or the resource counts nothing.
	Seq int64
}

// ErrFenceReply reports a reply that FenceLua does not give.
var ErrFenceReply = errors.New("testkit: not a fenced resource's reply")

// ParseFence reads the reply to FenceLua as a Redis client returns it (for
// go-redis, Cmd.Result): a slice of three integers. It returns err, if not
// nil, as it is.
func ParseFence(reply any, err error) (Fence, error) {
	if err != nil {
		return Fence{}, err
	}
	v, ok := reply.([]any)
	if !ok || len(v) != 3 {
		return Fence{}, fmt.Errorf("%w: %#v", ErrFenceReply, reply)
	}
	var n [3]int64
	for i := range n {
		if n[i], ok = v[i].(int64); !ok {
			return Fence{}, fmt.Errorf("%w: %#v", ErrFenceReply, reply)
		}
	}
	return Fence{Accepted: n[0] == 1, Seen: n[1], Seq: n[2]}, nil
}
