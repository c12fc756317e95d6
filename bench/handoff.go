package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// handoffResult is one hand-off run: one client holds a name while another
// waits for it, then releases it.
type handoffResult struct {
	handoffs []time.Duration // sorted: holder's Unlock returned → waiter's Lock returned
	rtt      time.Duration   // the loopback round trip measured before the run; zero when not measured
	// stuck counts waiters whose Lock had not returned by handoffWait
	// (cancelled then, and left out of handoffs).
	stuck int
}

// handoffStuckTolerated is how many stuck waiters a run of the programme's
// hand-off table tolerates (they are counted there): one more ends it.
const handoffStuckTolerated = 2

// rtts returns the hand-off p50 in round trips (0 when no round trip was
// measured).
func (h handoffResult) rtts() float64 {
	if h.rtt <= 0 {
		return 0
	}
	return float64(pct(h.handoffs, 0.5)) / float64(h.rtt)
}

// handoffWait bounds the waiter's Lock in a hand-off run (the slowest peer
// retries after a 3 s lease): a waiter still waiting then is stuck, counted
// and cancelled, and the run goes on while runHandoff's caller tolerates it.
// It also bounds the holder's Lock on the name, free by then; a holder that
// cannot take it ends the programme.
const handoffWait = 30 * time.Second

// A gap is how long the holder keeps the name after the waiter has called
// Lock; a polling waiter's hand-off depends on it.
type gap func() time.Duration

// uniformGap draws gaps uniformly from [lo, hi].
func uniformGap(lo, hi time.Duration) gap {
	return func() time.Duration { return lo + rand.N(hi-lo+1) }
}

// runHandoff measures hand-offs of one name between two clients of l, opened
// on addr (or,
// with sameClient, two goroutines of one client): the holder takes the name,
// the waiter calls Lock, the holder releases after a gap, and the time from
// the holder's Unlock returning to the waiter's Lock returning is one
// hand-off. It takes up to samples hand-offs, and stops early once budget
// has passed (after at least one). A waiter granted before the holder
// called Unlock fails the programme, and so does a stuck waiter beyond the
// tolerated (0 where the report has no column for them).
func runHandoff(l lib, addr string, samples int, budget time.Duration, g gap, sameClient bool, tolerated int, name string) (handoffResult, error) {
	holder, err := l.open(addr)
	if err != nil {
		return handoffResult{}, err
	}
	defer holder.close()
	waiter := holder
	if !sameClient {
		if waiter, err = l.open(addr); err != nil {
			return handoffResult{}, err
		}
		defer waiter.close()
	}
	ctx := context.Background()
	// Warm up both clients on the name: connections, prepared statements,
	// the schema check, subscriptions.
	for _, c := range []locker{holder, waiter} {
		unlock, err := c.lock(ctx, name)
		if err != nil {
			return handoffResult{}, fmt.Errorf("%s: warm-up: %w", l.name, err)
		}
		if err := unlock(); err != nil {
			return handoffResult{}, fmt.Errorf("%s: warm-up: %w", l.name, err)
		}
	}
	type grant struct {
		at     time.Time
		unlock func() error
		err    error
	}
	var res handoffResult
	start := time.Now()
	for len(res.handoffs) < samples && (len(res.handoffs) == 0 || time.Since(start) < budget) {
		hctx, hcancel := context.WithTimeout(ctx, handoffWait)
		unlock, err := holder.lock(hctx, name) // some libraries' locks live as long as their ctx: hctx ends after the Unlock
		if err != nil {
			hcancel()
			return res, fmt.Errorf("%s: holder: %w", l.name, err)
		}
		got := make(chan grant, 1)
		wctx, cancel := context.WithTimeout(ctx, handoffWait)
		go func() { // the waiter; ends when its Lock returns (by handoffWait at the latest)
			u, err := waiter.lock(wctx, name)
			got <- grant{time.Now(), u, err}
		}()
		time.Sleep(g()) // the holder's work; the waiter is waiting meanwhile
		calling := time.Now()
		err = unlock()
		unlocked := time.Now()
		hcancel()
		w := <-got
		if err != nil {
			cancel()
			return res, fmt.Errorf("%s: holder: unlock: %w", l.name, err)
		}
		if w.err != nil {
			cancel()
			if errors.Is(w.err, context.DeadlineExceeded) && wctx.Err() != nil {
				res.stuck++ // still waiting handoffWait after it called Lock
				if res.stuck > tolerated {
					return res, fmt.Errorf("%s: the waiter's Lock had not returned after %v, %d times", l.name, handoffWait, res.stuck)
				}
				continue
			}
			return res, fmt.Errorf("%s: waiter: %w", l.name, w.err)
		}
		if w.at.Before(calling) {
			cancel()
			return res, fmt.Errorf("%w: %s granted %q to the waiter before the holder released it", errExclusion, l.name, name)
		}
		res.handoffs = append(res.handoffs, max(w.at.Sub(unlocked), 0))
		// The waiter releases with its Lock's own context (redsync's and
		// bsm/redislock's release use it), as a caller would; then it ends.
		err = w.unlock()
		cancel()
		if err != nil {
			return res, fmt.Errorf("%s: waiter: unlock: %w", l.name, err)
		}
	}
	slices.Sort(res.handoffs)
	return res, nil
}

// rttPings is how many PINGs measureRTT sends.
const rttPings = 1000

// measureRTT returns the median of n PINGs, one after another, on rdb: the
// loopback round trip that a go-redis client sees, the unit in which the
// report states hand-offs.
func measureRTT(ctx context.Context, rdb *redis.Client, n int) (time.Duration, error) {
	rtts := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return 0, fmt.Errorf("measuring the round trip: %w", err)
		}
		rtts = append(rtts, time.Since(t0))
	}
	slices.Sort(rtts)
	return pct(rtts, 0.5), nil
}
