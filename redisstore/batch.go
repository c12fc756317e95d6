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
var batchedScripts = map[*redis.Script]*batchSpec{
	acquireScript:     withLibBatched(acquireLua, acquireLayout),
	acquireFairScript: withLibBatched(acquireFairLua, acquireFairLayout),
	releaseScript[0]:  withLibBatched(releaseLua, releaseLayout),
	releaseScript[1]:  withLibBatched(shardedPublish(releaseLua), releaseLayout), // see pubScript
}

// A batchLayout is what the requests of a batched script look like: how
// many keys and arguments each has, and the places (from 0) of those that
// the requests of one call must all have the same, which the call carries
// once (see batchArgs): the restart marker, the lease, the grace argument,
// a place's lifetime, a release's mode and hand-off lease (not its latch
// lifetime, which follows each caller's deadline: the batch's latch lives
// as long as the longest). Calls that differ there go in calls of their
// own. latch, when not 0, is the place (from 1) of a release's latch among
// its keys, and latchMS the place (from 1) of its lifetime among its
// arguments (see lua/batch_latch.lua).
type batchLayout struct {
	nk, na         int
	keys, args     []int
	latch, latchMS int
}

// The layouts of acquire.lua, acquire_fair.lua and release.lua (see their
// headers, and runAcquire and release for the arguments).
var (
	acquireLayout     = batchLayout{nk: 5, na: 3, keys: []int{4}, args: []int{0, 2}}
	acquireFairLayout = batchLayout{nk: 5, na: 4, keys: []int{4}, args: []int{0, 2, 3}}
	releaseLayout     = batchLayout{nk: 8, na: 6, keys: []int{7}, args: []int{1, 2, 4, 5}, latch: 3, latchMS: 4}
)

// A batchSpec is a batched variant of a script and its layout; onCluster,
// when not nil, is the variant to use on Cluster (see withLibBatched).
type batchSpec struct {
	batchLayout
	script    *redis.Script
	source    string
	onCluster *batchSpec
}

// maxCoalesce is the most requests one batched script call carries, which
// bounds how long Redis's one thread is busy with one call.
const maxCoalesce = 128

// withLibBatched makes the batched variant of body (see withLib), which
// takes the keys and arguments of several requests of layout l as
// batchArgs lays them out. It returns one reply per request, in order: the
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
// With l.latch, the call records every request's release answer in the
// first request's latch, one key written once (lua/batch_latch.lua), where
// the requests alone would each create a key of their own that Redis
// keeps, expires and deletes (about a seventh of Redis's CPU per
// uncontended Lock+Unlock, bench/NOTES.md).
//
// On Cluster a batched release keeps a latch per request, as alone
// (onCluster): there a call refused with TRYAGAIN is sent again by its
// callers one by one (see pipeliner.run), and a request sent apart from its
// batch would not find the batch's one latch, should go-redis's own resend
// of the batch have been the refused one, after the first had run and its
// reply was lost.
func withLibBatched(body string, l batchLayout) *batchSpec {
	src := batchedSource(body, l)
	spec := &batchSpec{batchLayout: l, script: redis.NewScript(src), source: src}
	if l.latch > 0 {
		l.latch = 0
		spec.onCluster = withLibBatched(body, l)
	}
	return spec
}

// variant returns the batched variant of script to use (on Cluster or
// not), nil for none.
func variant(specs map[*redis.Script]*batchSpec, script *redis.Script, cluster bool) *batchSpec {
	spec := specs[script]
	if spec != nil && cluster && spec.onCluster != nil {
		return spec.onCluster
	}
	return spec
}

// batchedSource is the source of withLibBatched's script.
func batchedSource(body string, l batchLayout) string {
	tail := batchTail(l)
	lib, first, libAfter, rest, split := libSplit(body)
	if l.latch > 0 {
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

// batchTail ends the batched script of layout l: it runs each request and
// returns their replies. The keys and arguments every request shares are
// put in place once, each request's own before it runs, in straight lines
// made for l. With l.latch, it starts the call's record of release answers
// (lua/batch_latch.lua), says which request runs and which latch is the
// call's (the first request's), and writes it at the end.
func batchTail(l batchLayout) string {
	ownKeys, ownArgs := ownPlaces(l.nk, l.keys), ownPlaces(l.na, l.args)
	var b strings.Builder
	b.WriteString(`
end

local n = tonumber(ARGV[1])
local all_keys, all_args = KEYS, ARGV
local replies = {}
local keys = {nil, nil, nil, nil, nil, nil, nil, nil} -- room for a request's keys and arguments
local args = {nil, nil, nil, nil, nil, nil, nil, nil}
-- What every request shares, once (see batchArgs), then each request's own.
`)
	b.WriteString(luaAssign("keys", l.keys, "all_keys[%d]", 0))
	b.WriteString(luaAssign("args", l.args, "all_args[%d]", 1))
	fmt.Fprintf(&b, "local ki, ai = %d, %d\n", len(l.keys), 1+len(l.args))
	if l.latch > 0 {
		b.WriteString("latch_got, latch_ms, latch_new = {}, '', false\n")
	}
	b.WriteString("for i = 0, n - 1 do\n")
	b.WriteString("    " + luaAssign("keys", ownKeys, "all_keys[ki + %d]", 0))
	b.WriteString("    " + luaAssign("args", ownArgs, "all_args[ai + %d]", 0))
	fmt.Fprintf(&b, "    ki, ai = ki + %d, ai + %d\n", len(ownKeys), len(ownArgs))
	if l.latch > 0 {
		fmt.Fprintf(&b, "    latch_i = i + 1\n    latch_asks(args[%d])\n    if i == 0 then\n        latch_key = keys[%d]\n    end\n", l.latchMS, l.latch)
	}
	b.WriteString(`    local ok, r = pcall(leash_request, keys, args)
    if not ok then
        if type(r) ~= 'table' or not r.err then
            r = {err = tostring(r)}
        end
    elseif r == nil then
        r = false
    end
    replies[i + 1] = r
end
`)
	if l.latch > 0 {
		// The latch serves only a reply that is lost: a latch that cannot
		// be written fails no request.
		b.WriteString("pcall(write_latch, n)\n")
	}
	b.WriteString("return replies\n")
	return b.String()
}

// ownPlaces returns the places 0..n-1 not in shared.
func ownPlaces(n int, shared []int) []int {
	var own []int
	for j := range n {
		if !slices.Contains(shared, j) {
			own = append(own, j)
		}
	}
	return own
}

// luaAssign returns the Lua line that sets dst's places (from 0, Lua's from
// 1) to the values src names (a format of one %d) from base+1 on, or "" for
// no places.
func luaAssign(dst string, places []int, src string, base int) string {
	if len(places) == 0 {
		return ""
	}
	lhs, rhs := make([]string, len(places)), make([]string, len(places))
	for j, p := range places {
		lhs[j] = fmt.Sprintf("%s[%d]", dst, p+1)
		rhs[j] = fmt.Sprintf(src, base+j+1)
	}
	return strings.Join(lhs, ", ") + " = " + strings.Join(rhs, ", ") + "\n"
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
// With separate set, every call is a unit of its own. specs are the
// batched variants, batchedScripts unless a test gives others.
func coalesce(batch []*call, specs map[*redis.Script]*batchSpec, cluster, separate bool) []unit {
	type group struct {
		script *redis.Script
		slot   int
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
		spec := variant(specs, c.script, cluster)
		if spec == nil || separate || len(c.keys) != spec.nk || len(c.args) != spec.na {
			units = append(units, unit{calls: one})
			continue
		}
		g := group{script: c.script, slot: -1}
		if cluster {
			g.slot = slot(c.keys[0])
		}
		k := slices.IndexFunc(open, func(o opened) bool { return o.g == g && spec.shares(units[o.unit].calls[0], c) })
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
		spec := variant(specs, c.script, cluster)
		u.script = spec.script
		u.keys, u.args = spec.batchArgs(u.calls)
	}
	return units
}

// batchArgs lays out the keys and arguments of a batched script call of
// calls (see batchTail), which share what l says they do: ARGV[1] is the
// number of requests; then come the shared keys, once, in their order, then
// each request's own, request after request; the same for the arguments
// after ARGV[1]. Redis makes a Lua string of every key and argument of a
// script call, and the client writes each: what the requests share goes
// once.
func (l batchLayout) batchArgs(calls []*call) ([]string, []any) {
	c := calls[0]
	ownK, ownA := l.nk-len(l.keys), l.na-len(l.args)
	keys := make([]string, 0, len(l.keys)+len(calls)*ownK)
	args := append(make([]any, 0, 1+len(l.args)+len(calls)*ownA), len(calls))
	for _, j := range l.keys {
		keys = append(keys, c.keys[j])
	}
	for _, j := range l.args {
		args = append(args, c.args[j])
	}
	for _, c := range calls {
		keys = appendOwn(keys, c.keys, l.keys)
		args = appendOwn(args, c.args, l.args)
	}
	return keys, args
}

// shares reports whether calls a and b have the same keys and arguments
// where l's requests share them, and so may go in one batched call.
func (l batchLayout) shares(a, b *call) bool {
	for _, j := range l.keys {
		if a.keys[j] != b.keys[j] {
			return false
		}
	}
	for _, j := range l.args {
		if !sameArg(a.args[j], b.args[j]) {
			return false
		}
	}
	return true
}

// appendOwn appends to dst the elements of src whose places are not in
// shared.
func appendOwn[T any](dst, src []T, shared []int) []T {
	for j, v := range src {
		if !slices.Contains(shared, j) {
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
