package main

import (
	"testing"
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
