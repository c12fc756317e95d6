package cli

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
)

// TestRunRestartGrace is issue 18's reproduction: A holds a lock, the server
// crashes and restarts from an RDB snapshot taken before A's grant (the
// snapshot keeps the restart marker, not A's lock), and B runs with
// --no-wait. B must be refused with the grace's explanation — not "held by
// another owner", and even with --quiet — and run once the grace has passed.
func TestRunRestartGrace(t *testing.T) {
	// The grace is the lease; every step below up to the waiting run must
	// fall inside it, and each starts a race-built leash on a machine that
	// may be busy: a short lease would end the grace before the steps do.
	const lease = 15 * time.Second
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	store := "redis://" + srv.Addr
	if status, _, stderr := runLeash(t, store, runArgs(lockName(t)+"/warm", []string{"--lease", "2s"}, []string{"true"})...); status != 0 {
		t.Fatalf("warm-up run exited %d: %s", status, stderr)
	}
	if err := newRDB(t, srv.Addr).Save(ctxFor(t)).Err(); err != nil {
		t.Fatal(err)
	}
	a, err := leash.New(redisstore.New(newRDB(t, srv.Addr), nil), &leash.Options{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	name := lockName(t)
	if _, err := a.Mutex(name).Lock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	if err := srv.Restart(); err != nil { // SIGKILL, then start from the snapshot
		t.Fatal(err)
	}

	for _, flags := range [][]string{{"--no-wait"}, {"--no-wait", "--quiet"}} {
		log := logFile(t)
		status, _, stderr := runLeash(t, store, runArgs(name, append([]string{"--lease", lease.String()}, flags...), child(log))...)
		if status != exitNotAcquired || !strings.Contains(stderr, "restart grace") || strings.Contains(stderr, "held by another owner") {
			t.Errorf("leash run %v right after the restart = %d, %q; want %d and the restart grace's explanation", flags, status, stderr, exitNotAcquired)
		}
		if lines := readLog(log); len(lines) != 0 {
			t.Errorf("the command ran in the grace: %q", lines)
		}
	}
	status, out, _ := runLeash(t, store, "show", name)
	if status != 0 || !strings.Contains(out, "restart grace") {
		t.Errorf("leash show in the grace = %d, %q; want a line about the restart grace", status, out)
	}

	log := logFile(t)
	status, _, stderr := runLeash(t, store, runArgs(name, []string{"--lease", lease.String(), "--quiet"}, child(log))...)
	if status != 0 || !strings.Contains(stderr, "waiting for lock") || !strings.Contains(stderr, "restart grace") {
		t.Errorf("leash run (waiting) = %d, %q; want 0 and a line saying it waits for the restart grace", status, stderr)
	}
	ns, _ := strconv.ParseInt(strings.Fields(waitLog(t, log, "start ", 0))[1], 10, 64)
	if at := time.Unix(0, ns); at.Before(granted.Add(lease)) {
		t.Errorf("the command started %v after A's grant, within A's lease %v", at.Sub(granted), lease)
	}
}

// TestMarkFresh: a restarted server waits out the grace until an operator
// declares it new; mark-fresh needs --force.
func TestMarkFresh(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	store := "redis://" + srv.Addr
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	name := lockName(t)
	if status, _, stderr := runLeash(t, store, runArgs(name, []string{"--no-wait"}, []string{"true"})...); status != exitNotAcquired || !strings.Contains(stderr, "mark-fresh") {
		t.Fatalf("leash run on a restarted server = %d, %q; want %d, pointing to mark-fresh", status, stderr, exitNotAcquired)
	}
	if status, _, _ := runLeash(t, store, "mark-fresh"); status != exitUsage {
		t.Errorf("leash mark-fresh without --force exited %d, want %d", status, exitUsage)
	}
	if status, out, stderr := runLeash(t, store, "mark-fresh", "--force"); status != 0 || !strings.Contains(out, "fresh") {
		t.Fatalf("leash mark-fresh --force = %d, %q, %q", status, out, stderr)
	}
	if status, _, stderr := runLeash(t, store, runArgs(name, []string{"--no-wait"}, []string{"true"})...); status != 0 {
		t.Errorf("leash run after mark-fresh = %d, %q; want 0", status, stderr)
	}
}

// TestRunRefusesAnEvictingServer: the CLI says what the library says.
func TestRunRefusesAnEvictingServer(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{Args: []string{"--maxmemory", "50mb", "--maxmemory-policy", "allkeys-lru"}})
	status, _, stderr := runLeash(t, "redis://"+srv.Addr, runArgs(lockName(t), []string{"--no-wait"}, []string{"true"})...)
	if status != exitStore || !strings.Contains(stderr, "maxmemory-policy noeviction") {
		t.Errorf("leash run on an allkeys-lru server = %d, %q; want %d naming the fix", status, stderr, exitStore)
	}
}
