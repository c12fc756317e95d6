package scenario_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/reliability/history"
	"github.com/redis/go-redis/v9"
)

// workerConfig says what one lock client does. A worker runs in the test
// process (a goroutine) or, when it must be paused or killed for real, in a
// child process (the test binary run again), which gets this struct as JSON.
type workerConfig struct {
	Proc     string
	Backend  string // the lock server's kind: a backend's name
	Addr     string // the lock server, usually through a fault proxy
	Resource string // the fenced resource's server, never faulted
	Locks    []string
	Lease    time.Duration
	Margin   time.Duration // SafetyMargin; zero means leash's default
	Grace    time.Duration // Redis only: redisstore RestartGrace
	// NoInfo (Redis only) connects as the user noInfoUser, who may not run INFO or
	// CONFIG: the store cannot check the server, so Grace = NoRestartGrace
	// goes unchecked (a negative control), and AllowEviction is set.
	NoInfo   bool
	HoldMin  time.Duration
	HoldMax  time.Duration
	Writes   int           // fenced writes per hold
	Reenter  int           // up to this many nested re-entries per hold
	LockWait time.Duration // bound on each Lock
	// For is how long the worker keeps starting holds, counted from when it
	// is ready (its client built and both servers answering), never from
	// when it was configured: a race-instrumented child process on a busy
	// machine takes a while to start.
	For time.Duration
	// Holds, when positive, ends the worker after that many holds (For
	// then only bounds a worker that cannot get the lock at all).
	Holds int
	Seed  uint64
	// Careless writes without checking the hold first (it ignores its
	// validity), as a client with a bug or a pause between check and write.
	Careless bool
	// Unfenced makes the resource accept any token (a negative control).
	Unfenced bool
	// Skew > 1 sends the server Lease/Skew while the client believes Lease:
	// a server clock running Skew times fast (a negative control).
	Skew float64
	// FastServer > 1 sends the server Lease/FastServer while the history
	// records Lease: a server clock running FastServer times fast that the
	// checker does not know of, so it sees grants inside running leases (a
	// negative control of grant safety).
	FastServer float64
	// Announce prints "ready" when the worker's window starts, "held
	// <fence>" when a hold starts and "done" at the end (child processes).
	Announce bool
	Out      string // child processes: the history file
}

// fenceScript is the fenced resource (testkit.FenceLua), counted: each
// worker writes KEYS "row:<lock>" and "seq:<lock>", and ARGV its token and
// "1" to fence ("0" for an unfenced resource).
var fenceScript = redis.NewScript(testkit.FenceLua)

// skewStore shortens every lease it passes on: the server's clock seems to
// run fast, so the lock frees itself before the client's deadline.
type skewStore struct {
	driver.Store
	f float64
}

// skewed returns st with every lease shortened f times, with st's Watch,
// KeepAlive (a session store's), Validate and CheckName, so that the core
// waits, renews and checks as it would on st.
func skewed(st driver.Store, f float64) driver.Store {
	s := skewStore{st, f}
	w, watcher := st.(driver.Watcher)
	ss, session := st.(driver.SessionStore)
	switch {
	case watcher && session:
		return watchingSessionSkewStore{s, w, ss}
	case watcher:
		return watchingSkewStore{s, w}
	case session:
		return sessionSkewStore{s, ss}
	}
	return s
}

// watchingSkewStore is a skewStore on a driver.Watcher.
type watchingSkewStore struct {
	skewStore
	driver.Watcher
}

// WatchClient passes through to the store's, as Watch does.
func (s watchingSkewStore) WatchClient(ctx context.Context, kind driver.Kind, name, client string, wake func(driver.Wake)) (func(), error) {
	return driver.WatchClient(ctx, s.Watcher, kind, name, client, wake)
}

// sessionSkewStore is a skewStore on a driver.SessionStore.
type sessionSkewStore struct {
	skewStore
	driver.SessionStore
}

// watchingSessionSkewStore is a skewStore on a store that is both.
type watchingSessionSkewStore struct {
	skewStore
	driver.Watcher
	driver.SessionStore
}

// WatchClient passes through to the store's, as Watch does.
func (s watchingSessionSkewStore) WatchClient(ctx context.Context, kind driver.Kind, name, client string, wake func(driver.Wake)) (func(), error) {
	return driver.WatchClient(ctx, s.Watcher, kind, name, client, wake)
}

func (s skewStore) scale(r driver.Request) driver.Request {
	r.Lease = time.Duration(float64(r.Lease) / s.f)
	return r
}

func (s skewStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	return s.Store.Acquire(ctx, s.scale(r))
}

func (s skewStore) Renew(ctx context.Context, rs []driver.Request) []driver.RenewResult {
	out := make([]driver.Request, len(rs))
	for i, r := range rs {
		out[i] = s.scale(r)
	}
	return s.Store.Renew(ctx, out)
}

func (s skewStore) Release(ctx context.Context, r driver.Request) error {
	return s.Store.Release(ctx, s.scale(r))
}

// Validate passes the skewed store's construction error through.
func (s skewStore) Validate() error {
	if v, ok := s.Store.(driver.Validator); ok {
		return v.Validate()
	}
	return nil
}

// CheckName passes the skewed store's name check through.
func (s skewStore) CheckName(name string) error {
	if nc, ok := s.Store.(driver.NameChecker); ok {
		return nc.CheckName(name)
	}
	return nil
}

// newRDB returns a go-redis client whose round trips give up after d, so
// that faults surface as errors within a lease.
func newRDB(addr string, d time.Duration) *redis.Client { return redis.NewClient(rdbOptions(addr, d)) }

// rdbOptions are newRDB's client options.
func rdbOptions(addr string, d time.Duration) *redis.Options {
	return &redis.Options{
		Addr: addr, DialTimeout: d, ReadTimeout: d, WriteTimeout: d,
		ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 4,
	}
}

// The user a NoInfo worker connects as: every command but INFO and CONFIG.
// noInfoArgs creates it with the server, so that it survives restarts.
const noInfoUser, noInfoPassword = "noinfo", "pw"

var noInfoArgs = []string{"--user", noInfoUser, "on", ">" + noInfoPassword, "~*", "&*", "+@all", "-info", "-config"}

// worker runs one workerConfig.
type worker struct {
	cfg   workerConfig
	rec   *history.Recorder
	rng   *rand.Rand
	c     *leash.Client
	res   *redis.Client
	say   func(string)
	fence string
}

// runWorker runs cfg until its deadline, recording into rec. say, if not
// nil, receives announcements.
func runWorker(cfg workerConfig, rec *history.Recorder, say func(string)) error {
	b, err := backendNamed(cfg.Backend)
	if err != nil {
		return err
	}
	lc, err := b.open(cfg, workerTimeout(cfg))
	if err != nil {
		return err
	}
	return runOn(cfg, lc, rec, say)
}

// A worker's stall monitor (history.Recorder.WatchStalls) ticks every
// stallTick and records a tick more than stallGap after the one before.
const (
	stallTick = 5 * time.Millisecond
	stallGap  = 50 * time.Millisecond
)

// workerTimeout is how long a worker's round trips may take: a quarter
// lease, at least 100ms.
func workerTimeout(cfg workerConfig) time.Duration { return max(cfg.Lease/4, 100*time.Millisecond) }

// runOn is runWorker on the lock client lc, which it closes.
func runOn(cfg workerConfig, lc lockClient, rec *history.Recorder, say func(string)) error {
	defer lc.close()
	stop := make(chan struct{})
	defer close(stop)
	// Owner: runOn, which stops it (stop) when the worker ends.
	go rec.WatchStalls(stop, stallTick, stallGap)
	st := lc.store
	if cfg.FastServer > 1 {
		st = skewed(st, cfg.FastServer) // below the recorder: the history keeps the full lease
	}
	st = history.Wrap(st, rec) // records what the server is asked
	if cfg.Skew > 1 {
		st = skewed(st, cfg.Skew)
	}
	c, err := leash.New(st, &leash.Options{Lease: cfg.Lease, SafetyMargin: cfg.Margin, ReleaseTimeout: cfg.Lease})
	if err != nil {
		return err
	}
	defer c.Close()
	res := newRDB(cfg.Resource, 5*time.Second)
	defer res.Close()
	w := &worker{cfg: cfg, rec: rec, rng: rand.New(rand.NewPCG(cfg.Seed, 1)), c: c, res: res, say: say, fence: "1"}
	if cfg.Unfenced {
		w.fence = "0"
	}
	if err := ready(cfg.Lease, probe{cfg.Addr, lc.ping}, probe{cfg.Resource, func(ctx context.Context) error { return res.Ping(ctx).Err() }}); err != nil {
		return err
	}
	if say != nil {
		say("ready")
	}
	until := history.Now() + int64(cfg.For)
	for held := 0; history.Now() < until && (cfg.Holds <= 0 || held < cfg.Holds); {
		if w.once() {
			held++
		}
	}
	if say != nil {
		say("done")
	}
	return nil
}

// probe is one server a worker needs: its address, and a round trip that
// succeeds once it answers.
type probe struct {
	addr string
	ping func(ctx context.Context) error
}

// readyWithin bounds how long a worker takes to start its window: opening
// its store (a minute at most, see openURL) and ready's two probes.
const readyWithin = 4 * time.Minute

// ready waits until each probe's server answers, trying each for a minute.
func ready(lease time.Duration, probes ...probe) error {
	for _, p := range probes {
		var err error
		for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(lease / 20) {
			ctx, cancel := context.WithTimeout(context.Background(), max(lease, 5*time.Second))
			err = p.ping(ctx)
			cancel()
			if err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("server %s: %w", p.addr, err)
		}
	}
	return nil
}

// once takes one lock, works under it, and releases it. It reports whether
// it held the lock.
func (w *worker) once() bool {
	name := w.cfg.Locks[w.rng.IntN(len(w.cfg.Locks))]
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.LockWait)
	h := w.lock(ctx, w.c.Mutex(name), 1)
	cancel()
	if h == nil {
		time.Sleep(time.Duration(w.rng.Int64N(int64(20 * time.Millisecond))))
		return false
	}
	if w.say != nil {
		w.say(fmt.Sprintf("held %d", h.Fence()))
	}
	w.work(h, 1)
	return true
}

// lock records one Lock call and returns its hold, or nil.
func (w *worker) lock(ctx context.Context, m *leash.Mutex, depth int) *leash.Hold {
	id := w.rec.Begin(history.Op{Kind: history.Lock, Lock: m.Name(), Depth: depth})
	h, err := m.Lock(ctx)
	w.rec.End(id, func(o *history.Op) {
		if err != nil {
			o.Err = err.Error()
			o.Ambiguous = !errors.Is(err, leash.ErrNotAcquired)
			return
		}
		o.OK, o.Owner, o.Fence, o.ValidUntil = true, h.Owner(), h.Fence(), history.At(h.ValidUntil())
	})
	return h
}

// work holds h for a while: fenced writes, maybe a nested re-entry, then
// Unlock. A watcher records the moment the hold learns of a loss.
func (w *worker) work(h *leash.Hold, depth int) {
	var once sync.Once
	told := func(err error) {
		var le *leash.LostError
		if errors.As(err, &le) {
			once.Do(func() {
				w.rec.Instant(history.Op{Kind: history.Told, Lock: h.Name(), Owner: h.Owner(), Fence: h.Fence(), Reason: le.Reason.String()})
			})
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if depth == 1 {
		// Owner: this hold. Stops at the loss or after Unlock.
		wg.Go(func() {
			select {
			case <-h.Lost():
				told(h.Err())
			case <-stop:
			}
		})
	}
	hold := w.cfg.HoldMin + time.Duration(w.rng.Int64N(int64(w.cfg.HoldMax-w.cfg.HoldMin)+1))
	writes := max(w.cfg.Writes, 1)
	for i := range writes {
		if !w.cfg.Careless {
			if err := h.Err(); err != nil {
				told(err)
				break
			}
		}
		w.write(h)
		if depth <= w.cfg.Reenter && i == 0 && w.rng.IntN(2) == 0 {
			ctx, cancel := context.WithTimeout(h.Context(), w.cfg.LockWait)
			if inner := w.lock(ctx, w.c.Mutex(h.Name()), depth+1); inner != nil {
				w.work(inner, depth+1)
			}
			cancel()
		}
		time.Sleep(hold / time.Duration(writes))
	}
	id := w.rec.Begin(history.Op{Kind: history.Unlock, Lock: h.Name(), Owner: h.Owner(), Fence: h.Fence(), Depth: depth})
	err := h.Unlock(context.Background())
	w.rec.End(id, func(o *history.Op) {
		o.OK = err == nil
		if err != nil {
			o.Err = err.Error()
		}
	})
	told(err)
	close(stop)
	wg.Wait()
}

// write makes one fenced write with h's token.
func (w *worker) write(h *leash.Hold) {
	id := w.rec.Begin(history.Op{Kind: history.Write, Lock: h.Name(), Owner: h.Owner(), Fence: h.Fence()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f, err := testkit.ParseFence(fenceScript.Run(ctx, w.res, []string{"row:" + h.Name(), "seq:" + h.Name()}, h.Fence(), w.fence).Result())
	w.rec.End(id, func(o *history.Op) {
		if err != nil {
			o.Ambiguous, o.Err = true, err.Error()
			return
		}
		o.OK, o.Seq = f.Accepted, f.Seq
	})
}

// childMain is the body of a worker child process.
func childMain(cfgJSON string) int {
	var cfg workerConfig
	if err := jsonUnmarshal(cfgJSON, &cfg); err != nil {
		fmt.Println("error", err)
		return 2
	}
	f, err := os.OpenFile(cfg.Out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	defer f.Close()
	rec := history.NewRecorder(cfg.Proc, f)
	var mu sync.Mutex
	say := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Println(strings.TrimSpace(s))
	}
	if err := runWorker(cfg, rec, say); err != nil {
		fmt.Println("error", err)
		return 2
	}
	if err := rec.Err(); err != nil {
		fmt.Println("error", err)
		return 2
	}
	return 0
}
