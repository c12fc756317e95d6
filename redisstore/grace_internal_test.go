package redisstore

import (
	"strings"
	"testing"
)

func TestSlotTagHashesToItsSlot(t *testing.T) {
	for sl := range 16384 {
		if got := slot("leash:epoch:{" + slotTag(sl) + "}"); got != sl {
			t.Fatalf("slot of the marker for slot %d = %d", sl, got)
		}
	}
}

func TestParseFactsStartNeverBeforeTheRealStart(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\nserver_time_usec:1700000005999999\r\nuptime_in_seconds:5\r\n# Replication\r\nrole:master\r\nsecond_repl_offset:-1\r\n"
	// Both ends of uptime_in_seconds are truncated: the real uptime is in
	// (4s, 6s), so the latest possible start is 4s before server_time_usec.
	var f serverFacts
	if parseFacts(&f, info); f.start != "1700000001999999" || f.runID != "abc" {
		t.Errorf("parseFacts start = %q, run id %q; want 1700000001999999 (the latest possible start), abc", f.start, f.runID)
	}
	for _, promoted := range []string{
		strings.Replace(info, "second_repl_offset:-1", "second_repl_offset:1234", 1),
		strings.Replace(info, "role:master", "role:slave", 1),
		strings.Replace(info, "server_time_usec:1700000005999999\r\n", "", 1),
	} {
		f = serverFacts{}
		if parseFacts(&f, promoted); f.start != "" {
			t.Errorf("parseFacts(%q) start = %q, want none (the grace starts when the script runs)", promoted, f.start)
		}
	}
}

func TestParseGrace(t *testing.T) {
	for _, tc := range []struct {
		in any
		ok bool
	}{
		{[]any{int64(0), int64(1500), "grace"}, true},
		{[]any{int64(0), int64(1500)}, false},        // a busy lock
		{[]any{int64(1), int64(7), int64(1)}, false}, // a grant
		{[]any{int64(0), int64(0), "grace"}, false},  // no time left
		{[]any{int64(0), int64(5), int64(3)}, false}, // not the grace
		{[]any{int64(0), "x", "grace"}, false},       // bad type
		{"OK", false},
	} {
		if _, ok := parseGrace(tc.in); ok != tc.ok {
			t.Errorf("parseGrace(%#v) ok = %v, want %v", tc.in, ok, tc.ok)
		}
	}
}
