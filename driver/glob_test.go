package driver

import "testing"

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		match         bool
	}{
		{"", "anything/at:all", true}, // "" matches every name
		{"", "", true},
		{"*", "a/b:c", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{"a.c", "abc", false}, // regexp characters are literal
		{"jobs/*", "jobs/nightly", true},
		{"jobs/*", "other/jobs/nightly", false}, // the whole name
	} {
		re, err := Glob(tc.pattern)
		if err != nil {
			t.Fatalf("Glob(%q): %v", tc.pattern, err)
		}
		if got := re.MatchString(tc.name); got != tc.match {
			t.Errorf("Glob(%q) matches %q: %v, want %v", tc.pattern, tc.name, got, tc.match)
		}
	}
	if _, err := Glob(`a\`); err == nil {
		t.Error(`Glob("a\\") = nil error, want one for the lone '\'`)
	}
}
