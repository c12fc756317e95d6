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
	acquireScript:     withLibBatched(acquireLua, 0),
	acquireFairScript: withLibBatched(acquireFairLua, 0),
	releaseScript[0]:  withLibBatched(releaseLua, releaseLatchKey),
	releaseScript[1]:  withLibBatched(shardedPublish(releaseLua), releaseLatchKey), // see pubScript
}

// releaseLatchKey is the place of a request's latch among release.lua's
// KEYS (see releaseKeys).
const releaseLatchKey = 3

// maxCoalesce is the most requests one batched script call carries, which
// bounds how long Redis's one thread is busy with one call.
const maxCoalesce = 128

// withLibBatched makes the batched variant of body (see withLib), which
// takes the keys and arguments of several requests as batchArgs lays them
// out. It returns one reply per request, in order: the
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
//
// latch, when not 0, is the place among a request's keys of its release
// latch (see latched and set_latch in lib.lua): the call records every
// request's answer in the first request's latch, one key written once,
// where the requests alone would each create a key of their own that Redis
// keeps, expires and deletes (about a tenth of Redis's CPU per uncontended
// Lock+Unlock, bench/NOTES.md).
func withLibBatched(body string, latch int) *redis.Script {
	return redis.NewScript(batchedSource(body, latch))
}

// batchedSource is the source of withLibBatched's script.
func batchedSource(body string, latch int) string {
	tail := batchTail(latch)
	lib, first, libAfter, rest, split := libSplit(body)
	if latch > 0 {
		lib, libAfter = withBatchLatch(lib, libAfter)
	}
	if !split {
		return lib + "\n" + batchHead + body + tail
	}
	state := strings.Join(perCallLocal.FindAllString(libAfter, -1), "\n")
	libAfter = perCallLocal.ReplaceAllString(libAfter, "")
	return lib + "\n" + state + "\n" + batchHead + first + "\n" + libRest + "\n" + libAfter + "\n" + rest + tail
}

// withBatchLatch puts lua/batch_latch.lua in place of lib.lua's paragraph
// that defines latched and set_latch, in whichever of a batched script's
// two parts of lib.lua holds it.
func withBatchLatch(lib, libAfter string) (string, string) {
	i := slices.IndexFunc(libParas, func(p libPara) bool { return slices.Contains(p.defines, "latched") })
	if i < 0 || !slices.Equal(libParas[i].defines, []string{"latched", "set_latch"}) {
		panic("redisstore: lib.lua has no paragraph that defines latched and set_latch alone")
	}
	plain := libParas[i].text
	switch {
	case strings.Contains(lib, plain):
		lib = strings.Replace(lib, plain, batchLatchLua, 1)
	case strings.Contains(libAfter, plain):
		libAfter = strings.Replace(libAfter, plain, batchLatchLua, 1)
	default:
		panic("redisstore: a batched release without lib.lua's latched and set_latch")
	}
	return lib, libAfter
}

const batchHead = `
-- One request of the batched script; its KEYS and ARGV are the request's, in two tables
-- that every request of the call reuses: a body reads them and keeps neither.
local function leash_request(KEYS, ARGV)
`

// batchTail ends the batched script: it runs each request and returns their
// replies. With latch (see withLibBatched), it starts the call's record of
// release answers (lua/batch_latch.lua), says which request runs and which
// latch is the call's (the first request's), and writes it at the end.
func batchTail(latch int) string {
	open, next, end := "", "", ""
	if latch > 0 {
		open = "latch_got, latch_ms = {}, ''\n"
		next = fmt.Sprintf("    latch_i = i + 1\n    if i == 0 then\n        latch_key = keys[%d]\n    end\n", latch)
		end = "write_latch(n)\n"
	}
	return `
end

local n = tonumber(ARGV[1])
local all_keys, all_args = KEYS, ARGV
local replies = {}
local keys = {nil, nil, nil, nil, nil, nil, nil, nil} -- room for a request's keys and arguments
local args = {nil, nil, nil, nil, nil, nil, nil, nil}
-- shared puts the shared values of all (from place at on) in their places in into, as mask
-- (see batchArgs) says, and returns the places of the requests' own and where they start.
local function shared(mask, all, at, into)
    local own, m = {}, {string.byte(mask, 1, -1)}
    for j = 1, #m do
        if m[j] == 49 then
            at = at + 1
            into[j] = all[at]
        else
            own[#own + 1] = j
        end
    end
    return own, at
end
local kown, ki = shared(ARGV[2], all_keys, 0, keys)
local aown, ai = shared(ARGV[3], all_args, 3, args)
local nko, nao = #kown, #aown
` + open + `for i = 0, n - 1 do
    for j = 1, nko do
        keys[kown[j]] = all_keys[ki + j]
    end
    ki = ki + nko
    for j = 1, nao do
        args[aown[j]] = all_args[ai + j]
    end
    ai = ai + nao
` + next + `    local ok, r = pcall(leash_request, keys, args)
    if not ok then
        if type(r) ~= 'table' or not r.err then
            r = {err = tostring(r)}
        end
    elseif r == nil then
        r = false
    end
    replies[i + 1] = r
end
` + end + `return replies
`
}

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
		u.script = batchedScripts[c.script]
		u.keys, u.args = batchArgs(u.calls)
	}
	return units
}

// batchArgs lays out the keys and arguments of a batched script call of
// calls (see batchTail): ARGV[1] is the number of requests, ARGV[2] and
// ARGV[3] say which of a request's keys and arguments every request has the
// same ("1", or "0" where they differ, a character for each key or argument
// of a request, in order). Then come the shared keys, once, then each
// request's other keys, request after request; and the same for the
// arguments after the three of the header. What the requests of a batch
// share (the restart marker, the lease, the grace argument, a release's
// mode and latch lifetime) goes once: Redis makes a Lua string of every key
// and argument of a script call, and the client writes each.
func batchArgs(calls []*call) ([]string, []any) {
	c := calls[0]
	nk, na := len(c.keys), len(c.args)
	kshared, sk := sharedPlaces(calls, nk, func(o *call, j int) bool { return o.keys[j] == c.keys[j] })
	ashared, sa := sharedPlaces(calls, na, func(o *call, j int) bool { return sameArg(o.args[j], c.args[j]) })
	keys := make([]string, 0, sk+len(calls)*(nk-sk))
	args := append(make([]any, 0, 3+sa+len(calls)*(na-sa)), len(calls), string(kshared), string(ashared))
	keys = appendPlaces(keys, c.keys, kshared, '1')
	args = appendPlaces(args, c.args, ashared, '1')
	for _, o := range calls {
		keys = appendPlaces(keys, o.keys, kshared, '0')
		args = appendPlaces(args, o.args, ashared, '0')
	}
	return keys, args
}

// sharedPlaces returns, for places 0..n-1, "1" where every call has the
// same as the first (same(o, j) for each other call o), "0" elsewhere, and
// how many places are shared.
func sharedPlaces(calls []*call, n int, same func(o *call, j int) bool) ([]byte, int) {
	mask, shared := make([]byte, n), 0
	for j := range mask {
		mask[j] = '1'
		for _, o := range calls[1:] {
			if !same(o, j) {
				mask[j] = '0'
				break
			}
		}
		if mask[j] == '1' {
			shared++
		}
	}
	return mask, shared
}

// appendPlaces appends to dst the elements of src whose place in mask is
// marked want.
func appendPlaces[T any](dst, src []T, mask []byte, want byte) []T {
	for j, v := range src {
		if mask[j] == want {
			dst = append(dst, v)
		}
	}
	return dst
}

// sameArg reports whether two script arguments are the same string or
// integer; any other argument counts as a request's own.
func sameArg(a, b any) bool {
	switch a := a.(type) {
	case string:
		b, ok := b.(string)
		return ok && a == b
	case int64:
		b, ok := b.(int64)
		return ok && a == b
	case int:
		b, ok := b.(int)
		return ok && a == b
	}
	return false
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
