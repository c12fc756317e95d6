package testkit

import (
	"sync"
	"sync/atomic"
)

// Loop runs body on exactly goroutines goroutines, which share iterations
// between them: each calls next before an iteration and stops when it
// returns false. It returns when every goroutine has. A benchmark whose rows
// are labelled by goroutine count runs Loop(n, b.N, ...) rather than
// b.RunParallel, which starts a multiple of GOMAXPROCS goroutines: on a
// 2-core machine a row labelled one goroutine would run two, and its ns/op
// would be half a Lock+Unlock's latency.
func Loop(goroutines, iterations int, body func(next func() bool)) {
	var (
		left atomic.Int64
		wg   sync.WaitGroup
	)
	left.Store(int64(iterations))
	next := func() bool { return left.Add(-1) >= 0 }
	for range max(goroutines, 1) {
		wg.Go(func() { body(next) })
	}
	wg.Wait()
}
