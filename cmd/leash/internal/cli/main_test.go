package cli

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/leakcheck"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// roleEnv, when set, makes the test binary play a part instead of running
// tests: "child" is the command that leash run runs in the tests.
const roleEnv = "LEASH_TEST_ROLE"

func TestMain(m *testing.M) {
	// The demo re-executes its own binary as "leash demo-holder"; in tests
	// that binary is this test binary.
	if len(os.Args) > 1 && os.Args[1] == "demo-holder" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	switch os.Getenv(roleEnv) {
	case "child":
		os.Exit(childMain(os.Args[1:]))
	case "grandchild":
		os.Exit(grandchildMain(os.Args[1:]))
	}
	if signal.Ignored(syscall.SIGHUP) {
		// Started under nohup: the leash processes the tests start would
		// inherit SIGHUP ignored, and the tests that send them SIGHUP
		// would see it ignored, as it should be then (that case is
		// TestRunKeepsIgnoredSignalsIgnored's). Caught here, it is reset
		// to its default in every process this one starts.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	}
	code := m.Run()
	sharedMariaDB.Close()
	shared.Close()
	sharedPG.Close()
	if bin.dir != "" {
		os.RemoveAll(bin.dir)
	}
	os.Exit(leakcheck.Check(code))
}

// childMain is the command of the tests' leash run. It appends one line per
// event to the -log file, each in one write so that concurrent children do
// not interleave:
//
//	start <unix ns> <id> name=<LEASH_NAME> fence=<LEASH_FENCE> owner=<LEASH_OWNER> pid=<pid>
//	grandchild <pid>      (with -grandchild)
//	ready <id>            signal handlers are installed
//	read "<line>" <err>   with -read, the line read from stdin
//	signal <id> <SIGNAME> for each forwarded signal
//	end <unix ns> <id>    just before a normal exit with -exit
func childMain(args []string) int {
	fs := flag.NewFlagSet("child", flag.ExitOnError)
	logPath := fs.String("log", "", "event log")
	id := fs.String("id", "child", "id in the log")
	sleep := fs.Duration("sleep", 0, "how long to run")
	code := fs.Int("exit", 0, "exit status")
	ignoreTerm := fs.Bool("ignore-term", false, "log SIGTERM and keep running")
	grandchild := fs.Bool("grandchild", false, "start a grandchild that ignores SIGTERM")
	readLine := fs.Bool("read", false, "read a line from stdin and log it")
	_ = fs.Parse(args)
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	f, err := os.OpenFile(*logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 99
	}
	say := func(format string, a ...any) { _, _ = f.WriteString(fmt.Sprintf(format, a...) + "\n") }
	say("start %d %s name=%s fence=%s owner=%s pid=%d", time.Now().UnixNano(), *id,
		os.Getenv("LEASH_NAME"), os.Getenv("LEASH_FENCE"), os.Getenv("LEASH_OWNER"), os.Getpid())
	if *grandchild {
		gc := exec.Command(os.Args[0], "-log", *logPath)
		gc.Env = append(os.Environ(), roleEnv+"=grandchild")
		if err := gc.Start(); err != nil {
			say("error %v", err)
			return 99
		}
		say("grandchild %d", gc.Process.Pid)
	}
	say("ready %s", *id)
	if *readLine {
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		say("read %q %v", strings.TrimSpace(line), err)
	}
	done := time.After(*sleep)
	for {
		select {
		case s := <-sigs:
			say("signal %s %s", *id, signalName(s))
			if s == syscall.SIGTERM && !*ignoreTerm {
				return exitSignal + int(syscall.SIGTERM)
			}
		case <-done:
			say("end %d %s", time.Now().UnixNano(), *id)
			return *code
		}
	}
}

// grandchildMain ignores SIGTERM and runs for a minute, so that only a
// SIGKILL to its process group stops it in time.
func grandchildMain(args []string) int {
	signal.Ignore(syscall.SIGTERM)
	time.Sleep(time.Minute)
	return 0
}

// shared is the package's redis-server for the tests that inject no faults
// into the server itself.
var shared testserver.Shared

func sharedRedis(t *testing.T) *testserver.Redis { return shared.Redis(t) }

// bin is the leash binary the tests run, built once, with the race detector
// when the tests have it.
var bin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func leashBinary(t *testing.T) string {
	t.Helper()
	bin.once.Do(func() {
		if bin.dir, bin.err = os.MkdirTemp("", "leash-bin-"); bin.err != nil {
			return
		}
		bin.path = filepath.Join(bin.dir, "leash")
		args := []string{"build", "-o", bin.path}
		if raceBuild {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/leash-go/leash/cmd/leash")...).CombinedOutput()
		if err != nil {
			bin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if bin.err != nil {
		t.Fatal(bin.err)
	}
	return bin.path
}

// proc is a leash process started by a test.
type proc struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan struct{}
	status int
}

// startLeash starts the leash binary with args against the store URL.
func startLeash(t *testing.T, store string, args ...string) *proc {
	t.Helper()
	return startCommand(t, store, append([]string{leashBinary(t)}, args...))
}

// startCommand starts argv, a command line that runs leash, against the
// store URL.
func startCommand(t *testing.T, store string, argv []string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	// GORACE: a race-enabled binary otherwise sleeps 1s at exit.
	p.cmd.Env = append(os.Environ(), storeEnv+"="+store, roleEnv+"=child", "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Owner: p. Stops when the leash process exits.
	go func() {
		_ = p.cmd.Wait()
		p.status = exitStatus(p.cmd.ProcessState)
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for the process to exit and returns its status.
func (p *proc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.status
	case <-time.After(within):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("leash %q still running after %v\nstderr:\n%s", p.cmd.Args[1:], within, p.stderr.String())
	}
	return 0
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// runLeash runs the leash binary to the end.
func runLeash(t *testing.T, store string, args ...string) (int, string, string) {
	t.Helper()
	p := startLeash(t, store, args...)
	status := p.wait(t, 60*time.Second)
	return status, p.stdout.String(), p.stderr.String()
}

// child returns the command line of a test child that logs to log.
func child(log string, flags ...string) []string {
	return append([]string{os.Args[0], "-log", log}, flags...)
}

// runArgs builds "run FLAGS... NAME -- COMMAND...".
func runArgs(name string, flags []string, command []string) []string {
	a := append([]string{"run"}, flags...)
	a = append(a, name, "--")
	return append(a, command...)
}

// logFile returns a fresh event log path.
func logFile(t *testing.T) string { return filepath.Join(t.TempDir(), "events.log") }

// readLog returns the lines of an event log.
func readLog(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// waitLog waits until the log has a line starting with prefix, and returns it.
func waitLog(t *testing.T, path, prefix string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, l := range readLog(path) {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q line in the log within %v; log:\n%s", prefix, within, strings.Join(readLog(path), "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hasLine reports whether the log has a line starting with prefix.
func hasLine(path, prefix string) bool {
	for _, l := range readLog(path) {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// field returns the value of key=value in a log line.
func field(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// lockName returns a lock name unique to the test.
func lockName(t *testing.T) string { return "test/" + t.Name() }

// newRDB returns a go-redis client for addr, closed at cleanup.
func newRDB(t *testing.T, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// newClient returns a leash Client on addr, closed at cleanup.
func newClient(t *testing.T, addr string, opts *leash.Options) *leash.Client {
	t.Helper()
	c, err := leash.New(redisstore.New(newRDB(t, addr), nil), opts)
	return testkit.Closing(t, c, err)
}

// ctxFor returns a context for calls from the test's goroutine.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// assertFree checks that the lock is not held in the store.
func assertFree(t *testing.T, rdb *redis.Client, name string) {
	t.Helper()
	if n, err := rdb.Exists(context.Background(), name).Result(); err != nil || n != 0 {
		t.Errorf("lock %q still in the store after leash exited (exists=%d, %v)", name, n, err)
	}
}

// waitForWaiter waits until a client waits for the lock name.
func waitForWaiter(t *testing.T, c *leash.Client, name string) {
	t.Helper()
	eventually(t, 30*time.Second, "a client waiting for "+name, func() bool {
		info, err := c.Inspect(ctxFor(t), name)
		return err == nil && info.Waiters >= 1
	})
}

// eventually waits until cond holds.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processGone reports whether pid has exited (or is a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

// run runs Main in process.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return code, out.String(), errb.String()
}
