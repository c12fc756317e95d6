package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// TestHandoffWake decodes the fair channel's hand-off messages, as
// release.lua publishes them, and leaves every other payload as it was.
func TestHandoffWake(t *testing.T) {
	const owner = "0a1b2c3d-0000-4000-8000-000000000001:7@job:1"
	for _, tc := range []struct {
		payload string
		want    driver.Wake
	}{
		{"=1732451234567890:2500:" + owner, driver.Wake{To: driver.WakeHead, Head: owner, Fence: 1732451234567890, Lease: 2500 * time.Millisecond}},
		{owner, driver.Wake{To: driver.WakeHead, Head: owner}},
		{"0", driver.Wake{To: driver.WakeOne}},
		{"=12:0:" + owner, driver.Wake{To: driver.WakeAll}},    // no lease
		{"=0:100:" + owner, driver.Wake{To: driver.WakeAll}},   // no token
		{"=x:100:" + owner, driver.Wake{To: driver.WakeAll}},   // not a number
		{"=12:100:", driver.Wake{To: driver.WakeAll}},          // no owner
		{"=12:100", driver.Wake{To: driver.WakeAll}},           // cut short
		{"=012:100:" + owner, driver.Wake{To: driver.WakeAll}}, // not as release.lua writes it
		{"=+12:100:" + owner, driver.Wake{To: driver.WakeAll}},
		{"=1e5:100:" + owner, driver.Wake{To: driver.WakeAll}}, // Lua's number format
	} {
		if got := wakeOf(tc.payload); got != tc.want {
			t.Errorf("wakeOf(%q) = %+v, want %+v", tc.payload, got, tc.want)
		}
	}
}

// FuzzHandoffWake: a hand-off message decodes to a grant only when it names
// an owner, a positive token and a positive lease, which format back to the
// message; anything else wakes every waiter.
func FuzzHandoffWake(f *testing.F) {
	for _, s := range []string{"=1:1:a", "=1732451234567890:2500:0a1b2c3d-0000-4000-8000-000000000001:7", "=", "=:", "=-1:5:o", "=+1:5:o"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		if !isHandoff(payload) {
			return
		}
		w := handoffWake(payload)
		if w.To == driver.WakeAll {
			return
		}
		if w.To != driver.WakeHead || w.Head == "" || w.Fence <= 0 || w.Lease <= 0 {
			t.Fatalf("handoffWake(%q) = %+v", payload, w)
		}
		back := handoffMark + strconv.FormatInt(w.Fence, 10) + ":" + strconv.FormatInt(w.Lease.Milliseconds(), 10) + ":" + w.Head
		if back != payload {
			t.Fatalf("handoffWake(%q) = %+v, which formats as %q", payload, w, back)
		}
	})
}
