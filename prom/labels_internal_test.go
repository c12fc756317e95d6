package prom

import (
	"strings"
	"testing"

	"github.com/leash-go/leash"
)

// TestEveryReasonHasALabel: each reason leash knows has a label of its
// own, so that a new reason is never counted as "other", and no two share
// one.
func TestEveryReasonHasALabel(t *testing.T) {
	seen := map[string]leash.Reason{}
	for r := leash.Reason(1); !strings.HasPrefix(r.String(), "reason("); r++ {
		l := reasonLabel(r)
		if l == "other" {
			t.Errorf("reason %d (%s) has no label: counted as \"other\"", r, r)
		}
		if o, dup := seen[l]; dup {
			t.Errorf("reasons %s and %s share the label %q", o, r, l)
		}
		seen[l] = r
	}
	if len(seen) < 8 {
		t.Errorf("only %d reasons found; the loop's end test no longer matches leash.Reason.String", len(seen))
	}
}
