package main

import (
	"testing"
	"time"
)

// TestSplitStores: the stores section is everything from its marker on, so
// that each mode rewrites its own part and keeps the other's.
func TestSplitStores(t *testing.T) {
	for name, tc := range map[string]struct {
		md, before, section string
	}{
		"no section":    {"# B\n\nredis\n", "# B\n\nredis\n", ""},
		"a section":     {"# B\n\nredis\n" + storesMarker + "\nstores\n", "# B\n\nredis\n", storesMarker + "\nstores\n"},
		"only sections": {storesMarker + "x\n", "", storesMarker + "x\n"},
	} {
		t.Run(name, func(t *testing.T) {
			before, section := splitStores([]byte(tc.md))
			if string(before) != tc.before || string(section) != tc.section {
				t.Errorf("splitStores(%q) = %q, %q, want %q, %q", tc.md, before, section, tc.before, tc.section)
			}
		})
	}
}

// TestNextPoll: mysqlstore's default schedule polls at 10, 30, 70, 150,
// 310, 630, 1270, 2270 ms… after a wait starts.
func TestNextPoll(t *testing.T) {
	for _, tc := range []struct{ waited, want time.Duration }{
		{0, 10 * time.Millisecond},
		{50 * time.Millisecond, 20 * time.Millisecond},
		{500 * time.Millisecond, 130 * time.Millisecond},
		{1400 * time.Millisecond, 870 * time.Millisecond},
		{2 * time.Second, 270 * time.Millisecond},
		{2270 * time.Millisecond, time.Second},
	} {
		if got := nextPoll(tc.waited); got != tc.want {
			t.Errorf("nextPoll(%v) = %v, want %v", tc.waited, got, tc.want)
		}
	}
}
