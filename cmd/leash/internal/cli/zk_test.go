package cli

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	_ "github.com/leash-go/leash/zkstore" // registers zk:// URLs, as the leash binary does (store_zk.go)
)

// TestZooKeeperRunShowLsUnlock runs run, show, ls and unlock on a zk:// URL:
// a lock a Client holds keeps run out, show and ls name its holder, unlock
// --force frees it for the next run.
func TestZooKeeperRunShowLsUnlock(t *testing.T) {
	url := "zk://" + testserver.NewZooKeeper(t).Addr + "/cli-test"
	t.Setenv(storeEnv, url)
	name := lockName(t)
	if status, _, stderr := run(t, "run", "--no-wait", name, "--", "true"); status != 0 {
		t.Fatalf("run on a free lock = %d, %q", status, stderr)
	}
	c := openClient(t, url, &leash.Options{Lease: 3 * time.Second})
	h, err := c.Mutex(name).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if status, _, stderr := run(t, "run", "--no-wait", name, "--", "true"); status != exitNotAcquired || !strings.Contains(stderr, "held by another owner") {
		t.Errorf("run on a held lock = %d, %q; want %d", status, stderr, exitNotAcquired)
	}
	status, out, stderr := run(t, "show", name)
	if status != 0 || !strings.Contains(out, h.Owner()) || !regexp.MustCompile(`(?m)^state +held`).MatchString(out) {
		t.Errorf("show = %d, %q:\n%s", status, stderr, out)
	}
	// The Client publishes its holder record by its first renewal at the
	// latest; show then names the holder's host.
	host, _ := os.Hostname()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		status, out, stderr = run(t, "show", "--json", name)
		var j lockJSON
		err := json.Unmarshal([]byte(out), &j)
		if status != 0 || err != nil || !j.Held || len(j.Owners) != 1 || j.Fence != h.Fence() {
			t.Fatalf("show --json = %d, %q, %q (%v); want the holder and its token %d", status, out, stderr, err, h.Fence())
		}
		if j.Owners[0].Host == host {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("show --json = %s: no holder record naming host %q after the first renewal", out, host)
		}
	}
	status, out, stderr = run(t, "ls", lockName(t)+"*")
	if status != 0 || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+` +mutex `).MatchString(out) {
		t.Errorf("ls = %d, %q:\n%s", status, stderr, out)
	}
	status, out, stderr = run(t, "unlock", "--force", name)
	if status != 0 || !strings.Contains(out, "unlocked") || !strings.Contains(out, h.Owner()) {
		t.Errorf("unlock --force = %d, %q, %q", status, out, stderr)
	}
	if status, _, stderr := run(t, "run", "--no-wait", name, "--", "true"); status != 0 {
		t.Errorf("run after unlock --force = %d, %q; want 0", status, stderr)
	}
	if status, out, _ := run(t, "show", name); status != 0 || !regexp.MustCompile(`(?m)^state +free$`).MatchString(out) {
		t.Errorf("show after the last run = %d:\n%s", status, out)
	}
}

// TestZooKeeperRunLeaseLongerThanSession: run with a --lease longer than the
// ZooKeeper session can cover is a usage error (64), never "store
// unavailable" (69). A URL that asks for a shorter session timeout is
// refused before any network call (nothing listens at its address); one
// whose server grants a shorter timeout than asked (clamped to its
// maxSessionTimeout) is refused by the store at the acquire, and the
// command does not run.
func TestZooKeeperRunLeaseLongerThanSession(t *testing.T) {
	dir := t.TempDir()
	marker := dir + "/ran"
	if status, _, stderr := runLeash(t, "zk://127.0.0.1:1/cli-test?session_timeout=1s", "run", "--lease", "5s", lockName(t), "--", "touch", marker); status != exitUsage ||
		!strings.Contains(stderr, "longer than the ZooKeeper session timeout") {
		t.Errorf("run --lease 5s on a 1s session = %d, %q; want %d and the reason", status, stderr, exitUsage)
	}
	if status, _, stderr := runLeash(t, "zk://127.0.0.1:1/cli-test", "run", "--lease", "41s", lockName(t), "--", "touch", marker); status != exitUsage ||
		!strings.Contains(stderr, "session timeout") {
		t.Errorf("run --lease 41s on the default session = %d, %q; want %d", status, stderr, exitUsage)
	}
	zk := testserver.NewZooKeeper(t)
	asked := testserver.ZooKeeperMaxSession + 30*time.Second
	url := "zk://" + zk.Addr + "/cli-test?session_timeout=" + asked.String()
	lease := (testserver.ZooKeeperMaxSession + 10*time.Second).String()
	if status, _, stderr := runLeash(t, url, "run", "--lease", lease, lockName(t), "--", "touch", marker); status != exitUsage ||
		!strings.Contains(stderr, "longer than the ZooKeeper session timeout") {
		t.Errorf("run --lease %s on a session the server clamped to %v = %d, %q; want %d", lease, testserver.ZooKeeperMaxSession, status, stderr, exitUsage)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran")
	}
	if status, _, stderr := runLeash(t, url, "run", "--lease", "2s", "--no-wait", lockName(t), "--", "true"); status != 0 {
		t.Errorf("run --lease 2s on the same store = %d, %q; want 0", status, stderr)
	}
}
