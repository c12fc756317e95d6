package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leash-go/leash"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// renewalTakeLimit bounds taking the N locks of a renewal run.
const renewalTakeLimit = time.Minute

// renewalValidity is the lease both renewing libraries use in the renewal
// runs: rueidislock's default KeyValidity, so that both renew on a
// comparable schedule (leash every 5/3 s, rueidislock every 2.5 s).
const renewalValidity = 5 * time.Second

// renewalResult is the cost of keeping n locks held by one client.
type renewalResult struct {
	n           int
	interval    time.Duration // the library's renewal interval
	scriptsSec  float64       // script calls per second (EVALSHA/EVAL)
	commandsSec float64       // every command per second, those run inside scripts too
	cpu         float64       // Redis CPU, fraction of one core
	heapPerLock float64       // client heap bytes per held lock
	goroutines  int           // client goroutines while holding, beyond the baseline
	lost        int           // locks lost during the window (must be 0)
	acquireTime time.Duration // time to take the n locks
	failed      string        // why the library could not keep n locks, if it could not
	perInterval float64       // script calls per renewal interval
}

// A holder holds many locks of one library at once.
type holder interface {
	take(ctx context.Context, name string) error
	lostCount() int
	releaseAll()
	close()
}

// renewingLibs are the libraries that renew by themselves; the others are
// listed as unable.
func renewers() []struct {
	name     string
	interval time.Duration
	open     func(addr string) (holder, error)
} {
	return []struct {
		name     string
		interval time.Duration
		open     func(addr string) (holder, error)
	}{
		{"leash Mutex", renewalValidity / 3, openLeashHolder},
		{"rueidislock", renewalValidity / 2, openRueidisHolder},
	}
}

// heldLocks is a holder of one library: what it took, and how the library
// takes, checks and releases one lock.
type heldLocks[T any] struct {
	obtain  func(ctx context.Context, name string) (T, error)
	lost    func(T) bool
	release func(T)
	closeFn func()
	mu      sync.Mutex
	locks   []T
}

func (h *heldLocks[T]) take(ctx context.Context, name string) error {
	l, err := h.obtain(ctx, name)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.locks = append(h.locks, l)
	h.mu.Unlock()
	return nil
}

func (h *heldLocks[T]) lostCount() int {
	n := 0
	for _, l := range h.locks {
		if h.lost(l) {
			n++
		}
	}
	return n
}

func (h *heldLocks[T]) releaseAll() {
	parallel(len(h.locks), func(i int) { h.release(h.locks[i]) })
	h.locks = nil
}

func (h *heldLocks[T]) close() { h.closeFn() }

// leashHolds holds Mutex locks of c, and closes with closeFn.
func leashHolds(c *leash.Client, closeFn func()) *heldLocks[*leash.Hold] {
	return &heldLocks[*leash.Hold]{
		obtain:  func(ctx context.Context, name string) (*leash.Hold, error) { return c.Mutex(name).Lock(ctx) },
		lost:    func(h *leash.Hold) bool { return h.Err() != nil },
		release: func(h *leash.Hold) { _ = h.Unlock(context.Background()) },
		closeFn: closeFn,
	}
}

func openLeashHolder(addr string) (holder, error) {
	l, err := newLeash(addr, false, &leash.Options{Lease: renewalValidity})
	if err != nil {
		return nil, err
	}
	return leashHolds(l.c, func() { _ = l.close() }), nil
}

// rueidisHold is one lock of rueidislock: its context, and the cancel that
// releases it.
type rueidisHold struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func openRueidisHolder(addr string) (holder, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
		KeyMajority:    1,
		NoLoopTracking: true,
		KeyValidity:    renewalValidity,
	})
	if err != nil {
		return nil, err
	}
	return &heldLocks[rueidisHold]{
		obtain: func(ctx context.Context, name string) (rueidisHold, error) {
			lctx, cancel, err := l.WithContext(ctx, name)
			return rueidisHold{lctx, cancel}, err
		},
		lost:    func(h rueidisHold) bool { return h.ctx.Err() != nil },
		release: func(h rueidisHold) { h.cancel() },
		closeFn: l.Close,
	}, nil
}

// parallel runs f(0..n-1) on 64 goroutines.
func parallel(n int, f func(i int)) {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range 64 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// runRenewal takes n locks with one client, lets the renewals settle for
// settle, and measures the server's load over window.
func runRenewal(name string, open func(string) (holder, error), interval time.Duration, addr string, admin *redis.Client,
	n int, settle, window time.Duration, tag string) (renewalResult, error) {
	ctx := context.Background()
	res := renewalResult{n: n, interval: interval}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	h, err := open(addr)
	if err != nil {
		return res, err
	}
	defer h.close()
	tctx, cancel := context.WithTimeout(ctx, renewalTakeLimit)
	defer cancel()
	if res.acquireTime, _, res.failed = takeAll(tctx, h, n, func(i int) string { return fmt.Sprintf("bench:renew:%s:%d", tag, i) }); res.failed != "" {
		h.releaseAll()
		return res, nil
	}
	time.Sleep(settle)
	s0, err := serverStats(ctx, admin)
	if err != nil {
		return res, err
	}
	time.Sleep(window)
	s1, err := serverStats(ctx, admin)
	if err != nil {
		return res, err
	}
	secs := s1.at.Sub(s0.at).Seconds()
	res.scriptsSec = float64(s1.scripts-s0.scripts) / secs
	res.commandsSec = float64(s1.commands-s0.commands) / secs
	res.cpu = (s1.cpu - s0.cpu) / secs
	res.perInterval = res.scriptsSec * interval.Seconds()
	// The live heap after a GC, at its lowest of several samples over one
	// renewal interval: what the held locks keep, not a renewal round's
	// passing buffers.
	low := uint64(math.MaxUint64)
	for range 6 {
		runtime.GC()
		runtime.ReadMemStats(&after)
		low = min(low, after.HeapAlloc)
		time.Sleep(interval / 6)
	}
	res.heapPerLock = (float64(low) - float64(before.HeapAlloc)) / float64(n)
	res.goroutines = runtime.NumGoroutine() - g0
	res.lost = h.lostCount()
	h.releaseAll()
	if res.lost > 0 {
		res.failed = fmt.Sprintf("lost %d of %d held locks during the window", res.lost, n)
	}
	return res, nil
}

// takeAll takes n locks with h, on 64 goroutines, until ctx ends. Some
// libraries tie a lock to the context that took it (rueidislock ends the
// lock with it), so ctx must outlive the locks. It returns how many it
// took and, when it could not take them all, why; it releases nothing.
func takeAll(ctx context.Context, h holder, n int, name func(i int) string) (took time.Duration, held int, failed string) {
	t0 := time.Now()
	var (
		firstErr atomic.Pointer[error]
		taken    atomic.Int64
	)
	parallel(n, func(i int) {
		if ctx.Err() != nil {
			return
		}
		if err := h.take(ctx, name(i)); err != nil {
			firstErr.CompareAndSwap(nil, &err)
			return
		}
		taken.Add(1)
	})
	took, held = time.Since(t0), int(taken.Load())
	if held < n {
		failed = fmt.Sprintf("held only %d of %d locks after %v", held, n, took.Round(time.Second))
		if p := firstErr.Load(); p != nil {
			failed += fmt.Sprintf(" (%v)", *p)
		}
	}
	return took, held, failed
}

type stats struct {
	at                time.Time
	scripts, commands int64
	cpu               float64 // seconds
}

// serverStats reads INFO commandstats and cpu. Commands run inside scripts
// are counted in commandstats too; scripts are EVAL and EVALSHA calls.
func serverStats(ctx context.Context, rdb *redis.Client) (stats, error) {
	info, err := rdb.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return stats{}, err
	}
	st := stats{at: time.Now()}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			st.cpu += f
		case strings.HasPrefix(k, "cmdstat_"):
			cmd := strings.TrimPrefix(k, "cmdstat_")
			if cmd == "info" {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			c, _ := strconv.ParseInt(calls, 10, 64)
			st.commands += c
			if strings.HasPrefix(cmd, "eval") {
				st.scripts += c
			}
		}
	}
	return st, nil
}
