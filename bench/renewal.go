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

type leashHolder struct {
	l     *leashLocker
	mu    sync.Mutex
	holds []*leash.Hold
}

func openLeashHolder(addr string) (holder, error) {
	l, err := newLeash(addr, false, &leash.Options{Lease: renewalValidity})
	if err != nil {
		return nil, err
	}
	return &leashHolder{l: l}, nil
}

func (h *leashHolder) take(ctx context.Context, name string) error {
	hd, err := h.l.c.Mutex(name).Lock(ctx)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.holds = append(h.holds, hd)
	h.mu.Unlock()
	return nil
}

func (h *leashHolder) lostCount() int {
	n := 0
	for _, hd := range h.holds {
		if hd.Err() != nil {
			n++
		}
	}
	return n
}

func (h *leashHolder) releaseAll() {
	parallel(len(h.holds), func(i int) { _ = h.holds[i].Unlock(context.Background()) })
	h.holds = nil
}

func (h *leashHolder) close() { _ = h.l.close() }

type rueidisHolder struct {
	l       rueidislock.Locker
	mu      sync.Mutex
	ctxs    []context.Context
	cancels []context.CancelFunc
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
	return &rueidisHolder{l: l}, nil
}

func (h *rueidisHolder) take(ctx context.Context, name string) error {
	lctx, cancel, err := h.l.WithContext(ctx, name)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.ctxs = append(h.ctxs, lctx)
	h.cancels = append(h.cancels, cancel)
	h.mu.Unlock()
	return nil
}

func (h *rueidisHolder) lostCount() int {
	n := 0
	for _, c := range h.ctxs {
		if c.Err() != nil {
			n++
		}
	}
	return n
}

func (h *rueidisHolder) releaseAll() {
	parallel(len(h.cancels), func(i int) { h.cancels[i]() })
	h.ctxs, h.cancels = nil, nil
}

func (h *rueidisHolder) close() { h.l.Close() }

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
	t0 := time.Now()
	var (
		firstErr atomic.Pointer[error]
		taken    atomic.Int64
	)
	tctx, cancel := context.WithTimeout(ctx, renewalTakeLimit)
	defer cancel()
	parallel(n, func(i int) {
		if tctx.Err() != nil {
			return
		}
		if err := h.take(tctx, fmt.Sprintf("bench:renew:%s:%d", tag, i)); err != nil {
			firstErr.CompareAndSwap(nil, &err)
			return
		}
		taken.Add(1)
	})
	res.acquireTime = time.Since(t0)
	if k := taken.Load(); k < int64(n) {
		res.failed = fmt.Sprintf("held only %d of %d locks after %v", k, n, res.acquireTime.Round(time.Second))
		if p := firstErr.Load(); p != nil {
			res.failed += fmt.Sprintf(" (%v)", *p)
		}
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
