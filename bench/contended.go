package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// contendedResult is one contended run: every goroutine has its own client
// (as separate processes would) and takes the same name in a loop.
type contendedResult struct {
	grants    int
	perSec    float64
	waits     []time.Duration // sorted: Lock called → Lock returned
	handoffs  []time.Duration // sorted: Unlock called → another client's Lock returned
	holds     []time.Duration // sorted: Lock returned → Unlock called (the hold's sleep, as long as it lasted)
	selfGrant int             // grants that went to the client that had just released
	gaveUp    int             // times a peer's Lock gave up (redsync's tries, bsm's deadline) and was called again
	stuck     int             // Lock calls still waiting stuckGrace after the run ended (cancelled; their waits count as censored)
}

// stuckGrace is how long past the end of a contended run a Lock call may
// still wait before it is cancelled and counted as stuck.
const stuckGrace = 10 * time.Second

// errExclusion is a mutual-exclusion violation: it fails the whole run.
var errExclusion = errors.New("MUTUAL EXCLUSION VIOLATED")

func runContended(l lib, addr string, workers int, hold, dur time.Duration, name string) (contendedResult, error) {
	lks := make([]locker, workers)
	for i := range lks {
		lk, err := l.open(addr)
		if err != nil {
			return contendedResult{}, err
		}
		defer lk.close()
		lks[i] = lk
	}
	t0 := time.Now()
	end := t0.Add(dur)
	ctx, cancel := context.WithDeadline(context.Background(), end.Add(stuckGrace))
	defer cancel()
	var (
		owner     atomic.Int64 // id+1 of the holder, 0 when free
		lastRel   atomic.Int64 // ns since t0 when the last holder called Unlock
		lastBy    atomic.Int64 // id+1 of that holder
		violation atomic.Pointer[error]
		gaveUp    atomic.Int64
		stuck     atomic.Int64
		mu        sync.Mutex
		res       contendedResult
		wg        sync.WaitGroup
	)
	fail := func(err error) {
		violation.CompareAndSwap(nil, &err)
	}
	for id, lk := range lks {
		wg.Go(func() {
			var waits, handoffs, holds []time.Duration
			self := 0
			for time.Now().Before(end) && violation.Load() == nil {
				asked := time.Now()
				var (
					unlock func() error
					err    error
				)
				for {
					unlock, err = lk.lock(ctx, name)
					if !errors.Is(err, errGaveUp) {
						break
					}
					gaveUp.Add(1)
				}
				if err != nil && ctx.Err() != nil {
					stuck.Add(1)
					waits = append(waits, time.Since(asked))
					break
				}
				if err != nil {
					fail(fmt.Errorf("%s: lock: %w", l.name, err))
					return
				}
				got := time.Now()
				if !owner.CompareAndSwap(0, int64(id+1)) {
					fail(fmt.Errorf("%w: %s granted %q to client %d while client %d held it",
						errExclusion, l.name, name, id, owner.Load()-1))
					return
				}
				waits = append(waits, got.Sub(asked))
				if by := lastBy.Load(); by == int64(id+1) {
					self++
				} else if by != 0 {
					handoffs = append(handoffs, got.Sub(t0)-time.Duration(lastRel.Load()))
				}
				if hold > 0 {
					time.Sleep(hold)
				}
				rel := time.Since(t0)
				holds = append(holds, rel-got.Sub(t0))
				lastBy.Store(int64(id + 1))
				lastRel.Store(int64(rel))
				if !owner.CompareAndSwap(int64(id+1), 0) {
					fail(fmt.Errorf("%w: %s: client %d lost %q to client %d while holding it",
						errExclusion, l.name, id, name, owner.Load()-1))
					return
				}
				if err := unlock(); err != nil {
					fail(fmt.Errorf("%s: unlock: %w", l.name, err))
					return
				}
			}
			mu.Lock()
			res.waits = append(res.waits, waits...)
			res.handoffs = append(res.handoffs, handoffs...)
			res.holds = append(res.holds, holds...)
			res.selfGrant += self
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if p := violation.Load(); p != nil {
		return contendedResult{}, *p
	}
	slices.Sort(res.waits)
	slices.Sort(res.handoffs)
	slices.Sort(res.holds)
	res.grants = len(res.waits)
	res.perSec = float64(res.grants) / elapsed.Seconds()
	res.gaveUp = int(gaveUp.Load())
	res.stuck = int(stuck.Load())
	return res, nil
}
