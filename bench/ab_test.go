package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/leash-go/leash/internal/testserver"
)

// TestAB measures leash Mutex beside redsync and rueidislock on one
// redis-server, in the scenarios where a change to the core could show:
// uncontended Lock + Unlock with 16 and 64 goroutines, and one hot name
// with 16 clients, hold 0 and 1 ms. It prints one line per figure, each
// labelled with $BENCH_AB, so that two builds of it — this tree and an
// earlier commit's, run one after the other several times — can be
// compared as ratios to a peer measured in the same run (see NOTES.md,
// "Checking a change against an earlier commit"). It rewrites nothing.
func TestAB(t *testing.T) {
	label := os.Getenv("BENCH_AB")
	if label == "" {
		t.Skip("set BENCH_AB=<label> to run")
	}
	srv, err := testserver.StartRedis(testserver.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	byName := map[string]lib{}
	for _, l := range libs() {
		byName[l.name] = l
	}
	for _, g := range []int{16, 64} {
		for _, n := range []string{"leash Mutex", "rueidislock"} {
			r, err := runUncontended(byName[n], srv.Addr, g, 2*time.Second, fmt.Sprintf("ab/u/%d", g))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%s\tuncontended g=%d\t%s\t%.0f ops/s\n", label, g, n, r.opsPerSec)
		}
	}
	for _, hold := range []time.Duration{0, time.Millisecond} {
		for _, n := range []string{"leash Mutex", "redsync"} {
			r, err := runContended(byName[n], srv.Addr, 16, hold, 3*time.Second, fmt.Sprintf("ab/c/%v", hold))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%s\thot name hold=%v\t%s\t%.0f grants/s\n", label, hold, n, r.perSec)
		}
	}
}
