package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/leash-go/leash/internal/testserver"
)

// TestAB measures leash Mutex and FairMutex beside the peers on one
// redis-server, in the scenarios where a change to the core could show:
// uncontended Lock + Unlock with 1, 16 and 64 goroutines (beside
// bsm/redislock and rueidislock, the best peers there), and one hot name
// with 16 clients, hold 0 and 1 ms (beside redsync). It prints one
// line per figure, each
// labelled with $BENCH_AB, so that two builds of it — this tree and an
// earlier commit's, run one after the other several times — can be
// compared as ratios to a peer measured in the same run (see NOTES.md,
// "Checking a change against an earlier commit"). It rewrites nothing.
func TestAB(t *testing.T) {
	label, addr, byName := abSetup(t)
	for _, g := range []int{1, 16, 64} {
		for _, n := range []string{"leash Mutex", "leash FairMutex", "bsm/redislock", "rueidislock"} {
			r, err := runUncontended(byName[n], addr, g, 2*time.Second, fmt.Sprintf("ab/u/%d", g), nil)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%s\tuncontended g=%d\t%s\t%.0f ops/s\n", label, g, n, r.opsPerSec)
		}
	}
	for _, hold := range []time.Duration{0, time.Millisecond} {
		for _, n := range []string{"leash Mutex", "leash FairMutex", "redsync"} {
			r, err := runContended(byName[n], addr, 16, hold, 3*time.Second, fmt.Sprintf("ab/c/%v", hold))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%s\thot name hold=%v\t%s\t%.0f grants/s\n", label, hold, n, r.perSec)
		}
	}
}

// TestABHandoff measures the hand-off, from the holder's Unlock returning to
// the waiter's Lock returning (runHandoff: two clients, a 2–4 ms gap), p50
// over up to 200 hand-offs, for leash Mutex and FairMutex beside
// rueidislock in the same run, one line per figure labelled with $BENCH_AB,
// as TestAB does.
func TestABHandoff(t *testing.T) {
	label, addr, byName := abSetup(t)
	for _, n := range []string{"leash Mutex", "leash FairMutex", "rueidislock"} {
		r, err := runHandoff(byName[n], addr, 200, 10*time.Second, handoffGap, false, 0, "ab/h/"+n)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%s\thand-off p50\t%s\t%.0f µs (%d hand-offs)\n", label, n, float64(pct(r.handoffs, 0.5))/1e3, len(r.handoffs))
	}
}

// abSetup skips t unless $BENCH_AB names the build; it starts a
// redis-server for t and returns the label, the server's address and the
// libraries by name.
func abSetup(t *testing.T) (label, addr string, byName map[string]lib) {
	t.Helper()
	label = os.Getenv("BENCH_AB")
	if label == "" {
		t.Skip("set BENCH_AB=<label> to run")
	}
	srv, err := testserver.StartRedis(testserver.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	byName = map[string]lib{}
	for _, l := range libs() {
		byName[l.name] = l
	}
	return label, srv.Addr, byName
}
