package redisstore

import (
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Coalescing. When the pipeliner sends several queued calls of the same
// script, and that script has a batched variant, they go as ONE script call
// carrying every request instead of a pipeline of one EVALSHA each: Redis
// pays the script call's own costs (the call, TIME, the closures of the
// lib.lua functions its common path needs) once per batch instead of once
// per lock, on its one thread, and the restart grace's check once per
// grace argument in a row (see grace_at in lib.lua): requests with the
// same lease's grace, on an uncontended name, check it once between them.
//
// The batched variant is made from the same source as the script: the
// script's body becomes a function of KEYS and ARGV, run once per request
// under pcall. So a change to acquire.lua or release.lua carries into the
// batch, and each request gets the reply the script alone would have given
// it at that instant, or its own error: a Lua error in one request (Redis
// undoes none of a script's writes, so whatever that request wrote before
// it failed stands, as it would without batching) fails that request alone,
// and the requests before and after it keep their replies and writes. The
// requests of a batch share one server TIME, as the calls of one script do.
//
// On Cluster a script may touch one hash slot: only requests of the same
// slot are coalesced (every key of a request shares its first key's slot).

// batchedScripts maps the scripts whose queued calls may be coalesced to
// their batched variants: the Mutex's and FairMutex's acquires and
// releases, the calls of an uncontended Lock and Unlock. (A FairMutex's
// waiters that share a batch share its TIME, and so an arrival time: the
// queue orders such ties by owner, as it may order any concurrent calls.)
var batchedScripts = map[*redis.Script]*redis.Script{
	acquireScript:     withLibBatched(acquireLua),
	acquireFairScript: withLibBatched(acquireFairLua),
	releaseScript[0]:  withLibBatched(releaseLua),
	releaseScript[1]:  withLibBatched(shardedPublish(releaseLua)), // see pubScript
}

// maxCoalesce is the most requests one batched script call carries, which
// bounds how long Redis's one thread is busy with one call.
const maxCoalesce = 128

// withLibBatched makes the batched variant of body (see withLib): ARGV[1]
// is the number of requests, ARGV[2] and ARGV[3] the number of keys and
// arguments of each; then come the requests' keys, and their arguments, one
// request after another. It returns one reply per request, in order: the
// body's reply (false for none, which Redis sends as nil, as it does the
// body's own nil), or an error reply.
//
// As in withLibSource, the functions only the part of body after its line
// libRest calls are defined there, in the request's function: a request
// that returns before it builds none of their closures, and one that goes
// on builds them for itself. The state those functions keep for the script
// call (their top-level locals that start nil, see perCallLocal) is
// declared before the request's function, so that it lasts the call, as
// in the script alone: one TIME, one INFO, one grace verdict for all.
func withLibBatched(body string) *redis.Script { return redis.NewScript(batchedSource(body)) }

// batchedSource is the source of withLibBatched's script.
func batchedSource(body string) string {
	lib, first, libAfter, rest, split := libSplit(body)
	if !split {
		return lib + "\n" + batchHead + body + batchTail
	}
	state := strings.Join(perCallLocal.FindAllString(libAfter, -1), "\n")
	libAfter = perCallLocal.ReplaceAllString(libAfter, "")
	return lib + "\n" + state + "\n" + batchHead + first + "\n" + libRest + "\n" + libAfter + "\n" + rest + batchTail
}

const batchHead = `
-- One request of the batched script; its KEYS and ARGV are the request's, in two tables
-- that every request of the call reuses: a body reads them and keeps neither.
local function leash_request(KEYS, ARGV)
`

const batchTail = `
end

local n, nk, na = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local all_keys, all_args = KEYS, ARGV
local replies = {}
local keys = {nil, nil, nil, nil, nil, nil, nil, nil} -- room for a request's keys and arguments
local args = {nil, nil, nil, nil, nil, nil, nil, nil}
for i = 0, n - 1 do
    for j = 1, nk do
        keys[j] = all_keys[i * nk + j]
    end
    for j = 1, na do
        args[j] = all_args[3 + i * na + j]
    end
    local ok, r = pcall(leash_request, keys, args)
    if not ok then
        if type(r) ~= 'table' or not r.err then
            r = {err = tostring(r)}
        end
    elseif r == nil then
        r = false
    end
    replies[i + 1] = r
end
return replies
`

// A unit is what the pipeliner sends as one command: one call's script, or
// the batched script of several calls.
type unit struct {
	calls  []*call
	script *redis.Script
	keys   []string
	args   []any
}

// coalesce turns a batch of queued calls into the commands to send: the
// calls of one script with a batched variant (and, on Cluster, of one hash
// slot) become one unit, up to maxCoalesce each; every other call is a unit
// of its own. Units keep the order of their first calls. The calls in the
// queue were concurrent, so no order among them is owed to anyone.
// With separate set, every call is a unit of its own.
func coalesce(batch []*call, cluster, separate bool) []unit {
	type group struct {
		script *redis.Script
		slot   int
		nk, na int
	}
	type opened struct {
		g    group
		unit int
	}
	var (
		units = make([]unit, 0, len(batch))
		buf   [16]opened
		open  = buf[:0] // the unit still taking calls of each group seen
	)
	for i, c := range batch {
		one := batch[i : i+1 : i+1] // a unit of c alone; appending copies
		if _, ok := batchedScripts[c.script]; !ok || separate || len(c.keys) == 0 {
			units = append(units, unit{calls: one})
			continue
		}
		g := group{script: c.script, slot: -1, nk: len(c.keys), na: len(c.args)}
		if cluster {
			g.slot = slot(c.keys[0])
		}
		k := slices.IndexFunc(open, func(o opened) bool { return o.g == g })
		if k >= 0 && len(units[open[k].unit].calls) < maxCoalesce {
			units[open[k].unit].calls = append(units[open[k].unit].calls, c)
			continue
		}
		if k >= 0 {
			open[k].unit = len(units)
		} else {
			open = append(open, opened{g, len(units)})
		}
		units = append(units, unit{calls: one})
	}
	for i := range units {
		u := &units[i]
		c := u.calls[0]
		if len(u.calls) == 1 {
			u.script, u.keys, u.args = c.script, c.keys, c.args
			continue
		}
		nk, na := len(c.keys), len(c.args)
		u.script = batchedScripts[c.script]
		u.keys = make([]string, 0, len(u.calls)*nk)
		u.args = append(make([]any, 0, 3+len(u.calls)*na), len(u.calls), nk, na)
		for _, c := range u.calls {
			u.keys = append(u.keys, c.keys...)
			u.args = append(u.args, c.args...)
		}
	}
	return units
}

// answer hands each call of u its reply from cmd, u's command: the command
// itself for a unit of one call; for a batched script, the request's own
// reply or error, or the script call's error for every request when the
// call failed as a whole (a lost connection, an unreachable node).
func (u *unit) answer(cmd *redis.Cmd) {
	if len(u.calls) == 1 {
		u.calls[0].cmd = cmd
		return
	}
	v, err := cmd.Result()
	replies, ok := v.([]any)
	if err == nil && (!ok || len(replies) != len(u.calls)) {
		err = fmt.Errorf("redisstore: batched script: unexpected reply %T for %d requests", v, len(u.calls))
	}
	for i, c := range u.calls {
		r := redis.NewCmd(c.ctx)
		switch {
		case err != nil:
			r.SetErr(err)
		case replies[i] == nil:
			r.SetErr(redis.Nil)
		default:
			if e, isErr := replies[i].(redis.Error); isErr {
				r.SetErr(e)
			} else {
				r.SetVal(replies[i])
			}
		}
		c.cmd = r
	}
}
