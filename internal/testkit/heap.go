package testkit

import (
	"os"
	"runtime"
	"runtime/pprof"
)

// HeapMark is the heap as a benchmark saw it at one moment, after a garbage
// collection: see MarkHeap.
type HeapMark struct {
	alloc, inuse uint64
}

// MarkHeap collects garbage and returns the heap's live bytes (HeapAlloc)
// and the bytes of the spans they occupy (HeapInuse).
func MarkHeap() HeapMark {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return HeapMark{alloc: ms.HeapAlloc, inuse: ms.HeapInuse}
}

// Metrics is a benchmark's report function (testing.B's ReportMetric).
type Metrics interface {
	ReportMetric(n float64, unit string)
}

// HeapProfileEnv names the environment variable that makes ProfileHeld
// write a heap profile to the file it names, for example with
//
//	LEASH_HELD_PROFILE=/tmp/held.prof go test -run '^$' -bench HeldLockMemory -benchtime 100000x -memprofilerate 1
//	go tool pprof -sample_index inuse_space -top *.test /tmp/held.prof
const HeapProfileEnv = "LEASH_HELD_PROFILE"

// ProfileHeld writes, when HeapProfileEnv is set, the heap profile of the
// moment (the objects live at the last garbage collection, which MarkHeap
// runs): called while the locks are held, it shows what each one keeps.
func ProfileHeld(t TB) {
	path := os.Getenv(HeapProfileEnv)
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("heap profile: %v", err)
	}
}

// ReportHeldHeap reports the heap's growth from before to after, divided by
// n held locks: "heap-B/held-lock" for the live bytes, "inuse-B/held-lock"
// for the spans (HeapInuse, what BENCHMARKS.md's stores table reports).
func ReportHeldHeap(b Metrics, before, after HeapMark, n int) {
	per := func(a, b uint64) float64 { return (float64(b) - float64(a)) / float64(n) }
	b.ReportMetric(per(before.alloc, after.alloc), "heap-B/held-lock")
	b.ReportMetric(per(before.inuse, after.inuse), "inuse-B/held-lock")
}
