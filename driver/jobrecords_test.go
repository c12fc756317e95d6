package driver_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/leash-go/leash/driver"
)

func TestTruncateRunError(t *testing.T) {
	short := strings.Repeat("é", driver.MaxRunError/2) // exactly MaxRunError bytes
	for name, in := range map[string]string{
		"ascii":                          strings.Repeat("x", 3*driver.MaxRunError),
		"a two-byte rune at the cut":     strings.Repeat("x", driver.MaxRunError-len("…")-1) + strings.Repeat("é", 10),
		"a four-byte rune at the cut":    strings.Repeat("x", driver.MaxRunError-len("…")-2) + strings.Repeat("𝄞", 10),
		"only multi-byte runes":          strings.Repeat("日本", driver.MaxRunError),
		"one byte over, ending in runes": short + "x",
	} {
		got := driver.TruncateRunError(in)
		if len(got) > driver.MaxRunError || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") ||
			!strings.HasPrefix(in, strings.TrimSuffix(got, "…")) || len(got) < driver.MaxRunError-utf8.UTFMax {
			t.Errorf("%s: TruncateRunError gave %d bytes ending %q, want a prefix cut on a rune boundary, ending in …, within %d bytes",
				name, len(got), got[max(len(got)-8, 0):], driver.MaxRunError)
		}
	}
	if got := driver.TruncateRunError(short); got != short {
		t.Errorf("a text of MaxRunError bytes was changed: %d bytes", len(got))
	}
}
