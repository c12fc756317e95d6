package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// uncontendedResult is one uncontended run: every goroutine locks and
// unlocks a name of its own, through one shared client.
type uncontendedResult struct {
	opsPerSec float64
	p50, p99  time.Duration // of one Lock+Unlock
	stuck     int           // Lock calls on a free name still waiting after stuckAfter
}

// stuckAfter bounds one uncontended Lock call: the name is free, so a call
// that takes longer is stuck (it is cancelled, counted and retried).
const stuckAfter = 5 * time.Second

func runUncontended(l lib, addr string, goroutines int, dur time.Duration, tag string) (uncontendedResult, error) {
	lk, err := l.open(addr)
	if err != nil {
		return uncontendedResult{}, err
	}
	defer lk.close()
	ctx := context.Background()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lats    []time.Duration
		firstEr error
		stuckN  atomic.Int64
		start   = make(chan struct{})
	)
	for g := range goroutines {
		name := fmt.Sprintf("bench:uncontended:%s:%d", tag, g)
		// Warm up: connections, script caches, subscriptions.
		for range 3 {
			unlock, err := lk.lock(ctx, name)
			if err != nil {
				return uncontendedResult{}, err
			}
			if err := unlock(); err != nil {
				return uncontendedResult{}, err
			}
		}
		wg.Go(func() {
			mine := make([]time.Duration, 0, 4096)
			<-start
			end := time.Now().Add(dur)
			var err error
			for {
				t0 := time.Now()
				if t0.After(end) {
					break
				}
				lctx, cancel := context.WithTimeout(ctx, stuckAfter)
				unlock, lerr := lk.lock(lctx, name)
				if lerr != nil {
					stuck := lctx.Err() != nil
					cancel()
					if stuck {
						stuckN.Add(1)
						continue
					}
					err = lerr
					break
				}
				err = unlock() // with the lock's own context, as a caller would
				cancel()
				if err != nil {
					break
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			if err != nil && firstEr == nil {
				firstEr = err
			}
			mu.Unlock()
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	if firstEr != nil {
		return uncontendedResult{}, fmt.Errorf("%s, %d goroutines: %w", l.name, goroutines, firstEr)
	}
	slices.Sort(lats)
	return uncontendedResult{
		opsPerSec: float64(len(lats)) / elapsed.Seconds(),
		p50:       pct(lats, 0.50),
		p99:       pct(lats, 0.99),
		stuck:     int(stuckN.Load()),
	}, nil
}
