package redisstore_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// The tests in this file run on a Cluster of three masters without
// replicas, whose slot 0 range is master 0's ("A") and slot 1 range master
// 1's ("B"). A client learns the slot map and A's view (INFO, CLUSTER MYID),
// then a slot of A's moves to B under its feet: its next acquire of a name
// in that slot goes to A, is redirected (MOVED) to B, and runs there with
// A's view. The restart grace must still be B's (issue #16).

// staleCluster starts the Cluster, declares it fresh, and returns it with
// a client whose Store has the grace given and a lease of a second.
func staleCluster(t *testing.T, grace time.Duration) (*testserver.Cluster, *redis.ClusterClient, *leash.Client) {
	t.Helper()
	cl := testserver.NewClusterWith(t, testserver.ClusterOptions{Masters: 3})
	markFresh(t, cl)
	cc := clusterClient(t, cl)
	return cl, cc, clusterLeash(t, cc, time.Second, &redisstore.Options{RestartGrace: grace})
}

// upFor waits until a view of node's process says a grace of d has ended
// (see redisstore.GraceOver).
func upFor(t *testing.T, node *testserver.Redis, d time.Duration) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr})
	defer rdb.Close()
	redisstore.GraceOver(t, rdb, d)
}

// warmNode opens cc's connection to the node that serves name, so that the
// acquire under test dials nothing (a dial makes the Store re-read INFO, and
// check a grant afterwards, which would hide a stale view behind a retry).
func warmNode(t *testing.T, cc *redis.ClusterClient, name string) {
	t.Helper()
	n, err := cc.MasterForKey(bg(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Ping(bg(t)).Err(); err != nil {
		t.Fatal(err)
	}
}

// slotOf returns name's hash slot.
func slotOf(t *testing.T, cc *redis.ClusterClient, name string) int {
	t.Helper()
	sl, err := cc.ClusterKeySlot(bg(t), name).Result()
	if err != nil {
		t.Fatal(err)
	}
	return int(sl)
}

// staleTry tries name with c, whose view is of a node that no longer serves
// it, and checks what a user sees: no grant from B while B is inside the
// grace that began at bStarted (at the latest) — a refusal in the grace, or
// ErrStaleView, and then no lock left on the server. It returns the grant,
// if one was made after the grace (a very slow machine), else nil.
func staleTry(t *testing.T, c *leash.Client, cc *redis.ClusterClient, name string, bStarted time.Time, grace time.Duration) *leash.Hold {
	t.Helper()
	sent := time.Now()
	h, err := c.Mutex(name).TryLock(bg(t))
	switch {
	case err == nil && sent.Before(bStarted.Add(grace)):
		t.Errorf("granted %s (token %d) by a node %v into its %v restart grace", name, h.Fence(), sent.Sub(bStarted), grace)
		return h
	case err == nil:
		t.Logf("granted after B's grace had ended (a slow machine): the stale view is not tested")
		return h
	case errors.Is(err, leash.ErrRestartGrace):
	case errors.Is(err, redisstore.ErrStaleView):
		t.Logf("stale view not resolved within the retries: %v", err)
	default:
		t.Fatalf("TryLock(%s) with a stale view: %v; want the restart grace or ErrStaleView", name, err)
	}
	if n, err := cc.Exists(bg(t), name).Result(); err != nil || n != 0 {
		t.Errorf("%s exists (%d, %v) after a refused acquire", name, n, err)
	}
	return nil
}

// lockAfterGrace takes name with c (Lock waits the grace out) and checks its
// token is larger than before.
func lockAfterGrace(t *testing.T, c *leash.Client, name string, before int64) {
	t.Helper()
	h, err := c.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatalf("Lock(%s) after the grace: %v", name, err)
	}
	if h.Fence() <= before {
		t.Errorf("token %d after the migration, want > %d", h.Fence(), before)
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Error(err)
	}
}

// TestClusterGraceAfterSlotMigration: a slot moves from A (up longer than
// the grace) to B, and B restarts empty: the slot's grants and its marker
// on B are gone, and B is inside its grace. A client that still maps the
// slot to A sends A's view; the script runs on B (MOVED), finds no marker,
// and must not write A's view there (which would skip B's grace): it
// refuses, the Store reads B's view, and B's grace refuses the grant.
func TestClusterGraceAfterSlotMigration(t *testing.T) {
	const grace = 6 * time.Second
	cl, cc, c := staleCluster(t, grace)
	a, b := cl.Masters[0], cl.Masters[1]
	name := namesOn(t, cc, lockName(t), 3, 0, 1)[0]
	onB := namesOn(t, cc, lockName(t)+"/b", 3, 1, 1)[0]
	upFor(t, a, grace) // A's view says its grace has ended
	h, err := c.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	first := h.Fence()
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := cl.MigrateSlot(slotOf(t, cc, name), a, b, nil); err != nil {
		t.Fatal(err)
	}
	bStarted := time.Now()
	if err := b.Restart(); err != nil { // without persistence: empty
		t.Fatal(err)
	}
	if err := cl.WaitHealthy(); err != nil {
		t.Fatal(err)
	}
	warmNode(t, cc, onB)
	if g := staleTry(t, c, cc, name, bStarted, grace); g != nil {
		_ = g.Unlock(bg(t))
	}
	lockAfterGrace(t, c, name, first)
}

// TestClusterMigratedMarkerOnRestartedMaster: B restarts empty (inside its
// grace), then a slot moves from A to B, and MIGRATE carries the slot's
// marker, which names A's process: a client that still maps the slot to A
// sends A's view, which matches that marker. The script must not trust it
// on B (CLUSTER MYID is not A's): the Store reads B's view, and B's grace
// refuses the grant.
func TestClusterMigratedMarkerOnRestartedMaster(t *testing.T) {
	const grace = 6 * time.Second
	cl, cc, c := staleCluster(t, grace)
	a, b := cl.Masters[0], cl.Masters[1]
	name := namesOn(t, cc, lockName(t), 3, 0, 1)[0]
	onB := namesOn(t, cc, lockName(t)+"/b", 3, 1, 1)[0]
	h, err := c.Mutex(name).Lock(bg(t)) // MarkFresh's marker: no grace on A
	if err != nil {
		t.Fatal(err)
	}
	first := h.Fence()
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	bStarted := time.Now()
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitHealthy(); err != nil {
		t.Fatal(err)
	}
	sl := slotOf(t, cc, name)
	if err := cl.MigrateSlot(sl, a, b, nil); err != nil {
		t.Fatal(err)
	}
	onBAdmin := redis.NewClient(&redis.Options{Addr: b.Addr})
	defer onBAdmin.Close()
	marker := "leash:epoch:{" + redisstore.SlotTag(sl) + "}"
	if v, err := onBAdmin.Get(bg(t), marker).Result(); err != nil || !strings.HasPrefix(v, "0:") {
		t.Fatalf("the migrated marker on B = %q, %v; want A's fresh marker", v, err)
	}
	warmNode(t, cc, onB)
	if g := staleTry(t, c, cc, name, bStarted, grace); g != nil {
		_ = g.Unlock(bg(t))
	}
	lockAfterGrace(t, c, name, first)
}

// TestClusterMyIDDenied: a user the ACL denies CLUSTER MYID locks and
// unlocks on every master as before; the Store only leaves the node out of
// its view, and says so once, at Warn.
func TestClusterMyIDDenied(t *testing.T) {
	cl := testserver.NewClusterWith(t, testserver.ClusterOptions{Masters: 3})
	markFresh(t, cl)
	for _, n := range cl.Masters {
		admin := redis.NewClient(&redis.Options{Addr: n.Addr})
		err := admin.Do(bg(t), "ACL", "SETUSER", "nomyid", "on", ">pw", "~*", "&*", "+@all", "-cluster|myid").Err()
		admin.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Username: "nomyid", Password: "pw"})
	t.Cleanup(func() { cc.Close() })
	var logged lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := clusterLeash(t, cc, 5*time.Second, &redisstore.Options{Logger: logger})
	for i := range cl.Masters {
		for _, name := range namesOn(t, cc, lockName(t), 3, i, 2) {
			h, err := c.Mutex(name).Lock(bg(t))
			if err != nil {
				t.Fatalf("Lock(%s) on master %d without CLUSTER MYID: %v", name, i, err)
			}
			if err := h.Unlock(bg(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := strings.Count(logged.String(), "level=WARN"); n != 1 || !strings.Contains(logged.String(), "+cluster|myid") {
		t.Errorf("%d warnings, want 1 naming +cluster|myid:\n%s", n, logged.String())
	}
}
