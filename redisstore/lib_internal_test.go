package redisstore

import (
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
