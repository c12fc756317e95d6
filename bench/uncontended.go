package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// uncontendedResult is one uncontended run: every goroutine locks and
// unlocks a name of its own, through one shared client.
type uncontendedResult struct {
	opsPerSec float64
	p50, p99  time.Duration // of one Lock+Unlock
	stuck     int           // Lock calls on a free name still waiting after stuckAfter
	locks     int           // Lock+Unlock pairs completed in the timed interval
	// clientCPU is this process's CPU time (getrusage) over the timed
	// interval, serverCPU redis-server's (INFO cpu, used_cpu_sys +
	// used_cpu_user); zero when not measured.
	clientCPU, serverCPU time.Duration
}

// cpuPerLock returns the client's and the server's CPU time per Lock+Unlock.
func (u uncontendedResult) cpuPerLock() (client, server time.Duration) {
	if u.locks == 0 {
		return 0, 0
	}
	return u.clientCPU / time.Duration(u.locks), u.serverCPU / time.Duration(u.locks)
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stuckAfter bounds one uncontended Lock call: the name is free, so a call
// that takes longer is stuck (it is cancelled, counted and retried).
const stuckAfter = 5 * time.Second

// runUncontended runs the uncontended scenario of l for dur. serverCPU, if
// not nil, reads the server's CPU time so far; the result then carries the
// server's CPU over the timed interval beside the client's.
func runUncontended(l lib, addr string, goroutines int, dur time.Duration, tag string, serverCPU func() (time.Duration, error)) (uncontendedResult, error) {
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
	var srv0, srv1 time.Duration
	if serverCPU != nil {
		if srv0, err = serverCPU(); err != nil {
			return uncontendedResult{}, err
		}
	}
	cpu0 := processCPU()
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	cpu1 := processCPU()
	if serverCPU != nil {
		if srv1, err = serverCPU(); err != nil {
			return uncontendedResult{}, err
		}
	}
	if firstEr != nil {
		return uncontendedResult{}, fmt.Errorf("%s, %d goroutines: %w", l.name, goroutines, firstEr)
	}
	slices.Sort(lats)
	return uncontendedResult{
		opsPerSec: float64(len(lats)) / elapsed.Seconds(),
		p50:       pct(lats, 0.50),
		p99:       pct(lats, 0.99),
		stuck:     int(stuckN.Load()),
		locks:     len(lats),
		clientCPU: cpu1 - cpu0,
		serverCPU: srv1 - srv0,
	}, nil
}
