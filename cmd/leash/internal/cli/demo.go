package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

func cmdDemo() *command {
	return &command{
		name:  "demo",
		usage: "demo",
		short: "show leash at work: contention, the watchdog, a crash, a fencing rejection and a skipped tick",
		long: `
Demo runs five short scenes and prints what happens on one timeline:

  1. Three instances contend for one lock; each release hands it to the
     next waiter at once (woken by the server, not by polling).
  2. A holder with a 1s lease works for 4s: the watchdog renews the lease
     while it works.
  3. A holder process is killed with SIGKILL: its lock frees itself within
     one lease, and the next holder gets a larger fencing token.
  4. A holder process is paused (SIGSTOP) past its lease: another instance
     takes the lock; when the paused one resumes it is told it lost the lock
     before its next write, and its stale write is rejected by the fenced
     resource.
  5. Two hosts run a job every second (package schedule, as leash cron
     does); one host's clock is 300ms behind, so it fires each tick late
     and finds it already claimed: every tick runs once.

The demo starts a throwaway redis-server on a free loopback port (and stops
it at the end), unless LEASH_STORE names a store to use instead, such as
redis://127.0.0.1:6379/0 (a Redis store: the demo's holder processes and
fenced resource need one; another store exits 64); it then uses lock names
under leash-demo/<run>/.
It exits non-zero if any scene does not show what it should.

Example:

  go run ./cmd/leash demo
  LEASH_STORE=redis://127.0.0.1:6379/0 leash demo`,
		run: runDemo,
	}
}

// demo is the state shared by the scenes.
type demo struct {
	e      *env
	tl     *timeline
	url    string
	rdb    redis.UniversalClient
	prefix string // lock name prefix
	// granted and released, when set (by tests), run in scene 1 as an
	// instance's Lock returns and as its Unlock returns.
	granted, released func(who string)
}

func runDemo(e *env, args []string) int {
	c := cmdDemo()
	fs := flags(e, c)
	a, err := parseArgs(e, c, fs, args)
	if err != nil {
		return exitParse(err)
	}
	if len(a.operands) != 0 || a.dash {
		fs.Usage()
		return exitUsage
	}
	ctx := context.Background()
	d := &demo{e: e, tl: &timeline{w: e.stdout, start: time.Now()}}
	url, fresh := storeURLFromEnv(), false
	if url == "" {
		srv, err := testserver.StartRedis(testserver.RedisOptions{})
		if err != nil {
			if errors.Is(err, testserver.ErrNotInstalled) {
				e.errorf("demo: redis-server is not installed: install it (apt-get install redis-server) or set %s=redis://host:port", storeEnv)
			} else {
				e.errorf("demo: %v", err)
			}
			return exitStore
		}
		defer srv.Close()
		url, fresh = "redis://"+srv.Addr, true
		fmt.Fprintf(e.stdout, "leash demo: a throwaway redis-server on %s (pid %d), stopped at the end\n", srv.Addr, srv.PID())
	} else {
		var b [3]byte
		_, _ = rand.Read(b[:])
		d.prefix = "leash-demo/" + hex.EncodeToString(b[:]) + "/"
	}
	var rs redisStore
	conn, err := openStore(ctx, storeFlags{url: url}, func(c *conn) (err error) {
		rs, err = c.redisOnly("demo")
		return err
	})
	if err != nil {
		return e.fail("demo", err)
	}
	defer conn.Close()
	if d.prefix != "" {
		fmt.Fprintf(e.stdout, "leash demo: on %s (%s), lock names under %s\n", conn.desc, storeEnv, d.prefix)
	}
	if fresh {
		// The demo started this server: no lease predates it, so the
		// restart grace, which waits out leases a restarted server may have
		// forgotten, has nothing to wait for.
		if err := rs.MarkFresh(ctx); err != nil {
			return e.fail("demo", conn.fail(err))
		}
	}
	d.url, d.rdb = url, rs.Redis()
	fmt.Fprintln(e.stdout, "A fencing token is a number that grows with every grant of a lock: a resource that remembers the highest it has seen refuses a write from an older holder.")
	if _, note := conn.graceNote(ctx, d.prefix); note != "" { // never wait silently
		fmt.Fprintf(e.stdout, "leash demo: %s; the scenes begin when it ends\n", note)
	}
	d.tl.start = time.Now()

	for _, scene := range []func(context.Context) error{d.contention, d.watchdog, d.crash, d.fencing, d.lateHost} {
		if err := scene(ctx); err != nil {
			d.tl.say("demo", "FAILED: %v", err)
			return exitFailure
		}
	}
	fmt.Fprintln(e.stdout, "\nAll five scenes behaved as leash promises.")
	return exitOK
}

// timeline prints events with their time since the start of the demo.
type timeline struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func (tl *timeline) scene(n int, title string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	fmt.Fprintf(tl.w, "\nScene %d: %s\n", n, title)
}

func (tl *timeline) say(who, format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	fmt.Fprintf(tl.w, "  %7.3fs  %-13s %s\n", time.Since(tl.start).Seconds(), who, fmt.Sprintf(format, args...))
}

// client returns a new leash Client, as a separate instance of a service
// would have.
func (d *demo) client(opts *leash.Options) (*leash.Client, error) {
	return leash.New(redisstore.New(d.rdb, nil), opts)
}

func (d *demo) contention(ctx context.Context) error {
	d.tl.scene(1, "three instances contend for \"orders:42\"; each release wakes the next waiter")
	name := d.prefix + "orders:42"
	var (
		wg       sync.WaitGroup
		holders  atomic.Int32
		overlap  atomic.Bool
		released atomic.Int64 // unix ns when the last Unlock began
		errs     = make(chan error, 3)
		// handoff keeps the lines in the order of the hand-offs. The server
		// wakes the next waiter in the same step that answers the holder's
		// Unlock, so the next holder may learn of its grant before the last
		// one learns of its release: each holder takes handoff as its Lock
		// returns and gives it back once its release is printed, so a grant
		// is never printed before the release that made it possible.
		handoff sync.Mutex
	)
	for i := 1; i <= 3; i++ {
		who := fmt.Sprintf("instance-%d", i)
		c, err := d.client(nil)
		if err != nil {
			return err
		}
		defer c.Close()
		// Owner: this scene. Stops after two rounds of work.
		wg.Go(func() {
			for range 2 {
				asked := time.Now()
				h, err := c.Mutex(name).Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				granted := time.Now()
				if holders.Add(1) > 1 {
					overlap.Store(true)
				}
				if d.granted != nil {
					d.granted(who)
				}
				handoff.Lock()
				if last := time.Unix(0, released.Load()); last.After(asked) {
					d.tl.say(who, "acquired %s  fence %d  (woken %v after the holder began to unlock)", name, h.Fence(),
						granted.Sub(last).Round(100*time.Microsecond))
				} else {
					d.tl.say(who, "acquired %s  fence %d  (waited %v)", name, h.Fence(), granted.Sub(asked).Round(time.Millisecond))
				}
				time.Sleep(150 * time.Millisecond) // the protected work
				holders.Add(-1)
				released.Store(time.Now().UnixNano())
				err = h.Unlock(ctx)
				if d.released != nil {
					d.released(who)
				}
				if err == nil {
					d.tl.say(who, "released %s", name)
				}
				handoff.Unlock()
				if err != nil {
					errs <- err
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if overlap.Load() {
		return errors.New("two instances held orders:42 at once")
	}
	d.tl.say("demo", "6 grants in fencing-token order, never two holders at once")
	return nil
}

func (d *demo) watchdog(ctx context.Context) error {
	d.tl.scene(2, "a 1s lease held through 4s of work: the watchdog renews it every 333ms")
	name := d.prefix + "report:nightly"
	c, err := d.client(&leash.Options{Lease: time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	h, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		return err
	}
	d.tl.say("worker", "acquired %s with a 1s lease; starting 4s of work", name)
	for i := 1; i <= 4; i++ {
		time.Sleep(time.Second)
		info, err := c.Inspect(ctx, name)
		if err != nil {
			return err
		}
		if err := h.Err(); err != nil || !info.Held {
			return fmt.Errorf("lost the lock during work: %v", err)
		}
		d.tl.say("worker", "%ds into the work: still held, %v of lease left on the server", i, info.Remaining.Round(time.Millisecond))
	}
	if err := h.Unlock(ctx); err != nil {
		return err
	}
	d.tl.say("worker", "done after 4 leases' worth of work; released")
	return nil
}

func (d *demo) crash(ctx context.Context) error {
	d.tl.scene(3, "a holder process crashes (SIGKILL); its lock frees within one lease")
	name := d.prefix + "billing:run"
	child, err := d.startHolder(ctx, "crasher", name, "crash")
	if err != nil {
		return err
	}
	defer child.Kill()
	c, err := d.client(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	got := make(chan error, 1)
	var (
		h      *leash.Hold
		killed time.Time
	)
	go func() {
		var err error
		h, err = c.Mutex(name).Lock(ctx)
		got <- err
	}()
	d.tl.say("instance-2", "waiting for %s", name)
	time.Sleep(300 * time.Millisecond)
	d.tl.say("demo", "SIGKILL the crasher (pid %d): no unlock, no goodbye", child.Pid())
	killed = time.Now()
	if err := child.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	if err := <-got; err != nil {
		return err
	}
	defer h.Unlock(ctx)
	d.tl.say("instance-2", "acquired %s %v after the crash (lease 1s)  fence %d > %d",
		name, time.Since(killed).Round(time.Millisecond), h.Fence(), child.fence)
	if h.Fence() <= child.fence {
		return fmt.Errorf("fence %d not above the crashed holder's %d", h.Fence(), child.fence)
	}
	return nil
}

func (d *demo) fencing(ctx context.Context) error {
	d.tl.scene(4, "a holder paused past its lease is fenced out")
	name := d.prefix + "ledger"
	child, err := d.startHolder(ctx, "sleeper", name, "pause")
	if err != nil {
		return err
	}
	defer child.Kill()
	if line, err := child.Next(5 * time.Second); err != nil || !strings.HasPrefix(line, "wrote ") {
		return fmt.Errorf("sleeper: want its first write, got %q (%v)", line, err)
	}
	if err := child.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	d.tl.say("demo", "SIGSTOP the sleeper for 2s, like a long GC pause, right after a write")
	paused := time.Now()
	c, err := d.client(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	h, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		return err
	}
	defer h.Unlock(ctx)
	d.tl.say("instance-3", "acquired %s after the sleeper's lease ran out  fence %d", name, h.Fence())
	ok, seen, err := fencedWrite(ctx, d.rdb, name, h.Fence())
	if err != nil || !ok {
		return fmt.Errorf("instance-3's write: accepted %v, last fence %d, %v", ok, seen, err)
	}
	d.tl.say("instance-3", "wrote the ledger with fence %d: accepted", h.Fence())
	time.Sleep(time.Until(paused.Add(2 * time.Second)))
	d.tl.say("demo", "SIGCONT the sleeper")
	if err := child.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	var told, rejected bool
	for !rejected {
		line, err := child.Next(5 * time.Second)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(line, "lost "):
			told = true
		case strings.HasPrefix(line, "inflight ") && strings.Contains(line, "rejected"):
			if !told {
				return errors.New("sleeper wrote before being told it lost the lock")
			}
			rejected = true
		case strings.HasPrefix(line, "wrote "):
			return fmt.Errorf("sleeper wrote after its pause without noticing the loss: %q", line)
		}
	}
	return nil
}

// fencedWrite is the demo's fenced resource, a ledger (testkit.FenceLua):
// it accepts a write only if its fencing token is not below the highest it
// has accepted, which it returns.
func fencedWrite(ctx context.Context, rdb redis.UniversalClient, name string, token int64) (bool, int64, error) {
	f, err := testkit.ParseFence(rdb.Eval(ctx, testkit.FenceLua, []string{name + ":last-fence"}, token).Result())
	if err != nil {
		return false, 0, fmt.Errorf("ledger write: %w", err)
	}
	return f.Accepted, f.Seen, nil
}

// demoHolder is a holder child process.
type demoHolder struct {
	*testkit.Child
	d     *demo
	who   string
	fence int64
}

// startHolder runs "leash demo-holder" as a child process and waits until it
// holds the lock. Its events are printed on the timeline as they arrive.
func (d *demo) startHolder(ctx context.Context, who, name, mode string) (*demoHolder, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "demo-holder", "-store", d.url, "-name", name, "-mode", mode)
	cmd.Stderr = d.e.stderr
	h := &demoHolder{d: d, who: who}
	// print runs from the Child's reader, which starts after cmd.Process is set.
	if h.Child, err = testkit.Start(who, cmd, func(line string) { h.print(cmd.Process.Pid, line) }); err != nil {
		return nil, err
	}
	if h.fence, err = h.Acquired(30 * time.Second); err != nil {
		h.Kill()
		return nil, err
	}
	return h, nil
}

// print turns a child's event line into a timeline entry.
func (h *demoHolder) print(pid int, line string) {
	who := fmt.Sprintf("%s(%d)", h.who, pid)
	f := strings.Fields(line)
	switch {
	case len(f) == 2 && f[0] == "acquired":
		h.d.tl.say(who, "acquired the lock with a 1s lease  fence %s", f[1])
	case len(f) == 3 && f[0] == "wrote":
		h.d.tl.say(who, "wrote the ledger with fence %s: %s", f[1], f[2])
	case len(f) >= 2 && f[0] == "lost":
		h.d.tl.say(who, "resumed; first look at the hold: LOST (%s); it stops before writing", strings.Join(f[1:], " "))
	case len(f) == 4 && f[0] == "inflight":
		h.d.tl.say(who, "a write already in flight with fence %s: %s by the ledger (it has seen %s)", f[1], strings.ToUpper(f[2]), f[3])
	default:
		h.d.tl.say(who, "%s", line)
	}
}

// cmdDemoHolder is the hidden child side of scenes 3 and 4.
func cmdDemoHolder() *command {
	c := &command{
		name:   "demo-holder",
		usage:  "demo-holder -store URL -name NAME -mode crash|pause",
		short:  "a lock holder process for the demo",
		long:   "Demo-holder is run by 'leash demo' as a child process.",
		hidden: true,
	}
	c.run = func(e *env, args []string) int {
		fs := flags(e, c)
		url := fs.String("store", "", "store URL")
		name := fs.String("name", "", "lock name")
		mode := fs.String("mode", "crash", "crash: hold until killed; pause: write every 200ms until the lock is lost")
		if err := fs.Parse(args); err != nil {
			return exitUsage
		}
		return demoHolderMain(e, *url, *name, *mode)
	}
	return c
}

func demoHolderMain(e *env, url, name, mode string) int {
	ctx := context.Background()
	var rs redisStore
	conn, err := openStore(ctx, storeFlags{url: url}, func(c *conn) (err error) {
		rs, err = c.redisOnly("demo-holder")
		return err
	})
	if err != nil {
		return e.fail("demo-holder", err)
	}
	defer conn.Close()
	c, err := leash.New(conn.store, &leash.Options{Lease: time.Second})
	if err != nil {
		e.errorf("demo-holder: %v", err)
		return exitFailure
	}
	defer c.Close()
	h, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		e.errorf("demo-holder: %v", err)
		return exitFailure
	}
	fmt.Fprintln(e.stdout, "acquired", h.Fence())
	if mode == "crash" {
		select {} // hold, renewed by the watchdog, until killed
	}
	for {
		// Check right before every write; the pause lands in the sleep.
		if err := h.Err(); err != nil {
			var lost *leash.LostError
			errors.As(err, &lost)
			fmt.Fprintln(e.stdout, "lost", lost.Reason)
			// Show what fencing does for a write that was already on its way.
			ok, seen, werr := fencedWrite(ctx, rs.Redis(), name, h.Fence())
			if werr != nil {
				e.errorf("demo-holder: %v", werr)
				return exitFailure
			}
			fmt.Fprintln(e.stdout, "inflight", h.Fence(), verdict(ok), seen)
			return exitOK
		}
		ok, _, err := fencedWrite(ctx, rs.Redis(), name, h.Fence())
		if err != nil {
			e.errorf("demo-holder: %v", err)
			return exitFailure
		}
		fmt.Fprintln(e.stdout, "wrote", h.Fence(), verdict(ok))
		time.Sleep(200 * time.Millisecond)
	}
}

func verdict(ok bool) string {
	if ok {
		return "accepted"
	}
	return "rejected"
}
