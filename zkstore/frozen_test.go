package zkstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/zkstore"
)

// holderEnv makes the test binary play a lock holder (runHolder): it takes
// the lock LEASH_TEST_NAME on LEASH_TEST_ADDR with a lease of
// LEASH_TEST_LEASE, says "acquired <fence>", and, once the hold is lost,
// "lost <error>".
const holderEnv = "LEASH_ZK_TEST_HOLDER"

func runHolder() {
	lease, err := time.ParseDuration(os.Getenv("LEASH_TEST_LEASE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s, err := zkstore.Dial([]string{os.Getenv("LEASH_TEST_ADDR")}, &zkstore.Options{SessionTimeout: 2 * lease, TickTime: testserver.ZooKeeperTick})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, err := leash.New(s, &leash.Options{Lease: lease})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	h, err := c.Mutex(os.Getenv("LEASH_TEST_NAME")).Lock(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("acquired %d\n", h.Fence())
	<-h.Lost()
	fmt.Printf("lost %v\n", h.Err())
	select {} // until killed
}

// TestFrozenHolder freezes a process holding a lock (SIGSTOP): no one else
// is granted the lock until the server has expired the holder's session
// (the lock's node is gone); once thawed, the holder reports the lock lost,
// its watchdog having judged it by its own monotonic clock, without a
// successful keep-alive since the freeze.
func TestFrozenHolder(t *testing.T) {
	z := shared.ZooKeeper(t)
	const lease = time.Second
	name := lockName(t)
	child := testkit.StartSelf(t, "holder", holderEnv+"=1", "LEASH_TEST_ADDR="+z.Addr,
		"LEASH_TEST_NAME="+name, "LEASH_TEST_LEASE="+lease.String())
	fence, err := child.Acquired(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	watcher := dial(t, nil, z.Addr)
	dir := zkstore.DefaultRoot + "/locks/" + url.PathEscape(name)
	nodes, _, err := watcher.Conn().Children(dir)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("children of %s = %v, %v; want the holder's node", dir, nodes, err)
	}
	held := dir + "/" + nodes[0]
	if err := child.Pause(); err != nil {
		t.Fatal(err)
	}
	thawed := false
	defer func() {
		if !thawed {
			_ = child.Signal(syscall.SIGCONT)
		}
	}()
	other := newClient(t, nil, &leash.Options{Lease: lease}, z.Addr)
	var g *leash.Hold
	for g == nil {
		g, err = other.Mutex(name).TryLock(bg(t))
		switch {
		case errors.Is(err, leash.ErrNotAcquired):
			g = nil
			time.Sleep(50 * time.Millisecond) // the server expires the frozen holder's session
			continue
		case err != nil:
			t.Fatal(err)
		}
		// The grant needed the frozen holder's node gone: its session
		// expired on the server, which no wall clock decided.
		if ok, _, err := watcher.Conn().Exists(held); err != nil || ok {
			t.Fatalf("%q granted (fence %d) while the frozen holder's node %s exists (%v)", name, g.Fence(), held, err)
		}
	}
	defer g.Unlock(bg(t))
	if g.Fence() <= fence {
		t.Errorf("fence of the next holder = %d, want > %d", g.Fence(), fence)
	}
	if err := child.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	thawed = true
	line, err := child.Next(30 * time.Second) // bounds a broken watchdog, not a speed
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(line, "lost ") {
		t.Fatalf("thawed holder said %q, want lost", line)
	}
	t.Logf("thawed holder: %s", line)
}
