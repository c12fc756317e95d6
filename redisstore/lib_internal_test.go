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
		{"acquire", acquireLua, []string{"fresh_grant", "fresh_token", "grace_at", "take", "reenter", "last_token", "purge_queue", "now_ms"}, []string{"grant", "grace", "drop_hold"}},
		{"release", releaseLua, []string{"drop_hold", "latched", "purge_queue", "now_ms"}, []string{"fresh_grant"}},
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
