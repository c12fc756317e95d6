package driver_test

import (
	"testing"

	"github.com/leash-go/leash/driver"
)

func TestKindString(t *testing.T) {
	for k, want := range map[driver.Kind]string{
		driver.KindMutex: "mutex", driver.KindPermit: "permit", 7: "kind(7)", 12: "kind(12)", 255: "kind(255)",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}
