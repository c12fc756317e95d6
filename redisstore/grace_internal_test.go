package redisstore

import "testing"

func TestSlotTagHashesToItsSlot(t *testing.T) {
	for sl := range 16384 {
		if got := slot("leash:epoch:{" + slotTag(sl) + "}"); got != sl {
			t.Fatalf("slot of the marker for slot %d = %d", sl, got)
		}
	}
}

func TestServerStartNeverBeforeTheRealStart(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nserver_time_usec:1700000005999999\r\nuptime_in_seconds:5\r\n"
	// Both ends of uptime_in_seconds are truncated: the real uptime is in
	// (4s, 6s), so the latest possible start is 4s before server_time_usec.
	if got, ok := serverStart(info); !ok || got != 1700000001999999 {
		t.Errorf("serverStart = %d, %v; want 1700000001999999 (the latest possible start)", got, ok)
	}
	if _, ok := serverStart("uptime_in_seconds:5\r\n"); ok {
		t.Errorf("serverStart without server_time_usec succeeded")
	}
}

func TestParseGrace(t *testing.T) {
	for _, tc := range []struct {
		in      any
		ok      bool
		created bool
	}{
		{[]any{int64(0), int64(1500), int64(1), int64(42)}, true, true},
		{[]any{int64(0), int64(1500), int64(0), int64(42)}, true, false},
		{[]any{int64(0), int64(1500)}, false, false},                   // a busy lock
		{[]any{int64(1), int64(7), int64(1)}, false, false},            // a grant
		{[]any{int64(0), int64(0), int64(1), int64(42)}, false, false}, // no time left
		{[]any{int64(0), int64(5), int64(3), int64(42)}, false, false}, // bad flag
		{[]any{int64(0), int64(5), "x", int64(42)}, false, false},      // bad type
		{"OK", false, false},
	} {
		_, created, _, ok := parseGrace(tc.in)
		if ok != tc.ok || created != tc.created {
			t.Errorf("parseGrace(%#v) = created %v, ok %v; want %v, %v", tc.in, created, ok, tc.created, tc.ok)
		}
	}
}
