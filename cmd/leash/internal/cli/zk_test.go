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
