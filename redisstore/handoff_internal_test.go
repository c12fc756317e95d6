package redisstore

import (
	"strconv"
	"strings"
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

// TestGivenBackHandoffWakesPlainly plays the wake-up of a hand-off that the
// waiter picked up before it arrived and that confirm gave back (the script
// ran while a connection was dialed, and the server process could not be
// vouched for): the lock went free to the next waiter, and the wake-up,
// late on a lagging subscriber connection, must not pass for a grant. Before
// confirm, the same message carries the grant; after it, the owner's waiter
// is woken as a plain head (it tries again), and a later grant to the same
// owner still carries its token.
func TestGivenBackHandoffWakesPlainly(t *testing.T) {
	s, rdb := batchStore(t)
	ctx := t.Context()
	name := "test/given-back-handoff"
	holder, waiter := owner(0), owner(1)
	client, _, _ := strings.Cut(waiter, ":")
	wakes := make(chan driver.Wake, 8)
	stop, err := s.WatchClient(ctx, driver.KindFair, name, client, func(w driver.Wake) { wakes <- w })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	req := func(o string, wait time.Duration) driver.Request {
		return driver.Request{Kind: driver.KindFair, Name: name, Owner: o, Lease: time.Minute, Wait: wait}
	}
	if g, err := s.Acquire(ctx, req(holder, 3*time.Second)); err != nil || !g.Acquired {
		t.Fatalf("holder's Acquire = %+v, %v", g, err)
	}
	if g, err := s.Acquire(ctx, req(waiter, 3*time.Second)); err != nil || g.Acquired {
		t.Fatalf("waiter's Acquire = %+v, %v; want refused, with a place", g, err)
	}
	if err := s.Release(ctx, req(holder, 3*time.Second)); err != nil { // hands the lock to the waiter
		t.Fatal(err)
	}
	handed := <-wakes
	if handed.Fence == 0 || handed.Head != waiter {
		t.Fatalf("the release's wake-up = %+v, want a grant to %s", handed, waiter)
	}
	msg := handoffMark + strconv.FormatInt(handed.Fence, 10) + ":" + strconv.FormatInt(handed.Lease.Milliseconds(), 10) + ":" + waiter
	late := func() driver.Wake { // the same message, as a lagging connection delivers it
		t.Helper()
		if err := rdb.Publish(ctx, clientFairChannel(name, client), msg).Err(); err != nil {
			t.Fatal(err)
		}
		return <-wakes
	}
	if w := late(); w != handed {
		t.Fatalf("before confirm, the message wakes %+v, want the grant %+v", w, handed)
	}
	// The waiter's next attempt picked the grant up, on a connection dialed
	// meanwhile, and INFO then named another process: confirm gives it back.
	stale := &serverFacts{gen: s.watch.dials.Load() + 1, runID: "old", id: "old"}
	pickup := []any{int64(1), handed.Fence, int64(1)}
	if keep, err := s.confirm(ctx, epochKey, stale, pickup, []driver.Request{req(waiter, 3*time.Second)}); keep || err != nil {
		t.Fatalf("confirm = %v, %v; want the grant given back", keep, err)
	}
	if n, _ := rdb.Exists(ctx, name).Result(); n != 0 {
		t.Fatalf("the handed lock is still held after confirm gave it back: %v", rdb.HGetAll(ctx, name).Val())
	}
	if w := late(); w != (driver.Wake{To: driver.WakeHead, Head: waiter}) {
		t.Errorf("after confirm, the late message wakes %+v, want a plain wake-up of %s (no grant)", w, waiter)
	}
	next := handed.Fence + 1
	if err := rdb.Publish(ctx, clientFairChannel(name, client), handoffMark+strconv.FormatInt(next, 10)+":2500:"+waiter).Err(); err != nil {
		t.Fatal(err)
	}
	if w := <-wakes; w.Fence != next {
		t.Errorf("a later grant to the same owner wakes %+v, want its token %d", w, next)
	}
}
