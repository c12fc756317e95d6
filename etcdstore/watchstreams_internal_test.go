package etcdstore

import (
	"testing"
	"time"
)

// TestWatchStreamsMoves: a creation unanswered for stuckAfter moves new
// watches to a new stream, at most once per gap, which doubles up to
// moveGapMax while no creation on the new stream is answered and starts
// again from nothing once one is; a quick give-up, or one on a stream that
// is no longer current, moves nothing.
func TestWatchStreamsMoves(t *testing.T) {
	var w watchStreams
	want := func(n uint64, gap time.Duration) {
		t.Helper()
		if w.current() != n || w.gap != gap {
			t.Fatalf("stream %d, gap %v; want stream %d, gap %v", w.current(), w.gap, n, gap)
		}
	}
	w.unanswered(0, stuckAfter/2)
	want(0, 0) // gave up within a slow round trip
	w.unanswered(0, stuckAfter)
	want(1, moveGapMin)
	w.unanswered(0, time.Minute)
	want(1, moveGapMin) // stream 0 is no longer current
	w.unanswered(1, time.Minute)
	want(1, moveGapMin) // within the gap
	n := uint64(1)
	for _, gap := range []time.Duration{2 * moveGapMin, 4 * moveGapMin, 8 * moveGapMin, moveGapMax, moveGapMax} {
		w.next = time.Now().Add(-time.Millisecond) // the gap has passed
		w.unanswered(n, createPatience)
		n++
		want(n, gap)
	}
	w.answered(n - 1)
	want(n, moveGapMax) // an answer on an old stream says nothing of the current one
	w.answered(n)
	want(n, 0)
	w.unanswered(n, createPatience)
	want(n+1, moveGapMin) // at once, and the gap from its start
}
