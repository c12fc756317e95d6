package redisstore

import (
	"slices"
	"strings"
	"testing"
)

// TestLibFor checks that each script carries the lib.lua functions it calls,
// through other functions too, and no others. (Every script runs against a
// real Redis in the other tests, which would fail on a missing function.)
func TestLibFor(t *testing.T) {
	for _, tc := range []struct {
		name      string
		body      string
		want, not []string
	}{
		{"acquire", acquireLua, []string{"fresh_grant", "fresh_token", "grace_at", "same_process", "same_node", "take", "reenter", "last_token", "purge_queue", "now_ms"}, []string{"grant", "grace", "drop_hold", "is_stale"}},
		{"acquire_fair", acquireFairLua, []string{"fresh_grant", "fresh_token", "grace_at", "is_stale"}, []string{"drop_hold"}},
		{"release", releaseLua, []string{"drop_hold", "latched", "purge_queue", "now_ms", "same_process", "fresh_token"}, []string{"fresh_grant", "is_stale"}},
		{"release_write", releaseWriteLua, []string{"drop_hold", "latched"}, []string{"fresh_grant"}},
		{"acquire_many", acquireManyLua, []string{"fresh_token", "grace_at", "take", "grant", "next_token", "server_time"}, []string{"fresh_grant", "drop_hold"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lib := libFor(tc.body)
			if !strings.Contains(lib, "redis.replicate_commands()") {
				t.Errorf("libFor(%s) lacks the preamble", tc.name)
			}
			for _, f := range tc.want {
				if !strings.Contains(lib, "local function "+f+"(") {
					t.Errorf("libFor(%s) lacks %s", tc.name, f)
				}
			}
			for _, f := range tc.not {
				if strings.Contains(lib, "local function "+f+"(") {
					t.Errorf("libFor(%s) carries %s, which it does not call", tc.name, f)
				}
			}
		})
	}
}

// TestLibSplit checks the scripts whose common path comes first (see
// withLibSource): that path is preceded by only the lib.lua functions it
// calls, the rest of the script by every other function the script calls,
// and no function is defined twice. An uncontended release builds 4
// closures, not 19; an acquire of a free name leaves out those only a held
// lock or a queue needs.
func TestLibSplit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		body        string
		first, rest []string
	}{
		{"release", releaseLua, []string{"drop_hold", "latched", "set_latch", "try"}, []string{"companion", "not_lock", "purge_queue", "fresh_token", "client_of"}},
		{"acquire", acquireLua, []string{"fresh_grant", "fresh_token", "grace_at", "take"}, []string{"not_lock", "reenter", "purge_queue", "last_token", "now_ms"}},
		{"acquire_fair", acquireFairLua, []string{"fresh_grant", "is_stale"}, []string{"refusal", "purge_queue", "reenter", "extend", "now_ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := withLibSource(tc.body)
			first, rest, ok := strings.Cut(src, "\n"+libRest+"\n")
			if !ok {
				t.Fatalf("no %q line in the script", libRest)
			}
			defined := func(text string) []string {
				var out []string
				for _, m := range libFuncRE.FindAllStringSubmatch(text, -1) {
					out = append(out, m[1])
				}
				return out
			}
			before := defined(first)
			// Whatever the common path calls, directly or through the
			// functions it calls, is defined before it.
			lib := defined(libLua)
			for name := range called(first) {
				if slices.Contains(lib, name) && !slices.Contains(before, name) {
					t.Errorf("%s is called before the %q line but defined after it", name, libRest)
				}
			}
			if tc.name == "release" && len(before) != len(tc.first) {
				t.Errorf("the uncontended release builds %d closures %v, want %v", len(before), before, tc.first)
			}
			for _, f := range tc.first {
				if !slices.Contains(before, f) {
					t.Errorf("%s is not defined before the common path, which calls it", f)
				}
			}
			for _, f := range tc.rest {
				if slices.Contains(before, f) {
					t.Errorf("%s is defined before the common path, which does not call it", f)
				}
				if !slices.Contains(defined(rest), f) {
					t.Errorf("%s is not defined for the rest of the script", f)
				}
			}
			all := append(before, defined(rest)...)
			if got, want := len(all), len(defined(libFor(tc.body)))+len(defined(tc.body)); got != want {
				t.Errorf("the script defines %d functions, libFor and the body %d", got, want)
			}
			slices.Sort(all)
			if d := slices.Compact(slices.Clone(all)); len(d) != len(all) {
				t.Errorf("a function is defined twice: %v", all)
			}
			// The batched variant defines the rest's functions per request:
			// whatever the functions before the request's call is defined
			// before it, nothing twice, and the state that lib.lua's
			// functions keep for the script call is declared before it.
			batch := batchedSource(tc.body, map[string]batchLayout{"release": releaseLayout, "acquire": acquireLayout, "acquire_fair": acquireFairLayout}[tc.name])
			top, inside, _ := strings.Cut(batch, batchHead)
			for name := range called(top) {
				if slices.Contains(lib, name) && !slices.Contains(defined(top), name) {
					t.Errorf("batched: %s is called before the request's function but defined inside it", name)
				}
			}
			extra := 1 // leash_request
			if tc.name == "release" {
				extra += 2 // latch_asks and write_latch (lua/batch_latch.lua)
			}
			if b := defined(batch); len(b) != len(all)+extra {
				t.Errorf("batched: the script defines %d functions %v, the plain one %d", len(b), b, len(all))
			}
			for _, line := range perCallLocal.FindAllString(libFor(tc.body), -1) {
				if !strings.Contains(top, line) || strings.Contains(inside, line) {
					t.Errorf("batched: lib.lua's per-call state %q is not declared (only) before the request's function", line)
				}
			}
		})
	}
}

// TestShardedPublish checks the SPUBLISH versions of the scripts that
// publish: every publication on a channel in KEYS (the lock's slot) becomes
// SPUBLISH, and those on channels named from ARGV (revocations, in other
// slots) stay PUBLISH.
func TestShardedPublish(t *testing.T) {
	for name, body := range map[string]string{"release": releaseLua, "release_read": releaseReadLua,
		"release_write": releaseWriteLua, "release_permit": releasePermitLua, "withdraw": withdrawLua,
		"force": forceLua, "ack_revoke": ackRevokeLua, "set_permits": setPermitsLua} {
		sharded := shardedPublish(body)
		n := strings.Count(body, "redis.call('publish', KEYS[")
		if n == 0 || strings.Count(sharded, "redis.call('spublish', KEYS[") != n || strings.Contains(sharded, "redis.call('publish', KEYS[") {
			t.Errorf("%s: %d publications on KEYS channels; the sharded version:\n%s", name, n, sharded)
		}
		if a := strings.Count(body, "redis.call('publish', ARGV"); strings.Count(sharded, "redis.call('publish', ARGV") != a {
			t.Errorf("%s: the sharded version changed a publication on an ARGV channel", name)
		}
		if strings.Count(body, "'publish'") != strings.Count(body, "redis.call('publish', KEYS[")+strings.Count(body, "redis.call('publish', ARGV") {
			t.Errorf("%s: a publication written otherwise, which the sharded version would miss", name)
		}
	}
}
