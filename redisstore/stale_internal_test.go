package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// TestGraceAtView runs grace_at (lua/lib.lua) on a real server with views
// of this process and of others: a view is written only on the process it
// names, without its node part; a marker that matches is trusted; a stale
// view writes nothing and gets {0, 0, "stale"}; the marker-only rule and a
// promoted process's empty start keep their meaning.
func TestGraceAtView(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	info, err := rdb.Info(ctx, "server", "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	var f serverFacts
	parseFacts(&f, info)
	run, other := f.runID, strings.Repeat("e", 40)
	var replID string // this process's replication id, which a promoted replica's view names
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "master_replid:"); ok {
			replID = v
		}
	}
	script := withLib(`local now, now_s = now_us()
local r = grace_at(KEYS[1], ARGV[1], now, now_s, redis.call('get', KEYS[1]), ARGV[2] == 'look')
return r or {1}`)
	const key = "test/grace_at"
	for _, tc := range []struct {
		name, marker, grace, look string
		want                      string // "ok", "stale" or "grace"
		after                     string // the marker after; "now:<id>" for a start of now
	}{
		{"absent, this process", "", "1000000@0:" + run, "", "ok", "0:" + run},
		{"absent, node part not written", "", "1000000@0:" + run + "#" + other, "", "ok", "0:" + run},
		{"absent, another process", "", "1000000@0:" + other, "", "stale", ""},
		{"absent, another replication id", "", "1000000@0:" + run + "/" + other, "", "stale", ""},
		{"absent, this replication id", "", "1000000@0:" + run + "/" + replID, "", "ok", "0:" + run + "/" + replID},
		{"absent, another process, this replication id", "", "1000000@0:" + other + "/" + replID, "", "stale", ""},
		{"absent, a replication id's prefix", "", "1000000@0:" + run + "/" + replID[:20], "", "stale", ""},
		{"absent, a run id's prefix", "", "1000000@0:" + run[:20], "", "stale", ""},
		{"absent, another process, look", "", "1000000@0:" + other, "look", "stale", ""},
		{"another process's marker", "0:" + other, "1000000@0:" + run, "", "ok", "0:" + run},
		{"another process's marker, stale view", "0:" + other, "1000000@0:" + other + "x", "", "stale", "0:" + other},
		{"matching marker trusted", "0:" + run, "1000000@99:" + run, "", "ok", "0:" + run},
		{"promoted: the grace starts now", "", "1000000@:" + run, "", "grace", "now:" + run},
		{"marker-only, absent", "", "1000000", "", "grace", "now"},
		{"marker-only, present", "0:" + other, "1000000", "", "ok", "0:" + other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb.Del(ctx, key)
			if tc.marker != "" {
				rdb.Set(ctx, key, tc.marker, 0)
			}
			v, err := script.Run(ctx, rdb, []string{key}, tc.grace, tc.look).Result()
			if err != nil {
				t.Fatal(err)
			}
			got := "ok"
			if _, inGrace := parseGrace(v); inGrace {
				got = "grace"
			} else if isStale(v) {
				got = "stale"
			} else if fmt.Sprint(v) != "[1]" {
				got = fmt.Sprint(v)
			}
			if got != tc.want {
				t.Errorf("grace_at = %v (%s), want %s", v, got, tc.want)
			}
			after, _ := rdb.Get(ctx, key).Result()
			switch {
			case strings.HasPrefix(tc.after, "now"):
				start, rest, _ := strings.Cut(after, ":")
				if len(start) != 16 || rest != strings.TrimPrefix(strings.TrimPrefix(tc.after, "now"), ":") {
					t.Errorf("marker after = %q, want %q with the server's time", after, tc.after)
				}
			case after != tc.after:
				t.Errorf("marker after = %q, want %q", after, tc.after)
			}
		})
	}
}

// clusterNameOn returns a name with prefix whose slot master i of a
// three-master testserver cluster serves.
func clusterNameOn(prefix string, i int) string {
	for j := 0; ; j++ {
		name := fmt.Sprintf("%s/%d", prefix, j)
		if slot(name)*3/16384 == i {
			return name
		}
	}
}

// graceCluster starts a Cluster of three masters for t, and a Store on it
// with the restart grace given.
func graceCluster(t *testing.T, grace time.Duration) (*testserver.Cluster, *redis.ClusterClient, *Store) {
	t.Helper()
	cl := testserver.NewClusterWith(t, testserver.ClusterOptions{Masters: 3})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { cc.Close() })
	s := New(cc, &Options{RestartGrace: grace})
	t.Cleanup(func() { s.Close() })
	return cl, cc, s
}

// TestClusterStaleViewOnRestartedMaster: a master restarts empty, and the
// Store still holds the view it read of the process before: the race that
// the dial counter narrows (INFO read, the server restarts, the script runs
// on a connection dialed after) but cannot close, made to happen here by
// putting the old view back after the Store's reconnection. The script on
// the new process finds no marker and must not write the old process's view
// (whose grace ended long ago): it refuses, writing nothing, the Store reads
// the new process's view, and the grace refuses the grant. After the grace
// the lock is granted with a larger token.
func TestClusterStaleViewOnRestartedMaster(t *testing.T) {
	const grace = 6 * time.Second
	cl, cc, s := graceCluster(t, grace)
	ctx := context.Background()
	if err := s.MarkFresh(ctx); err != nil {
		t.Fatal(err)
	}
	name := clusterNameOn("test/stale-restart", 1)
	req := driver.Request{Kind: driver.KindMutex, Name: name, Owner: owner(0), Lease: time.Second}
	g, err := s.Acquire(ctx, req)
	if err != nil || !g.Acquired {
		t.Fatalf("first acquire: %+v, %v", g, err)
	}
	first := g.Fence
	if err := s.Release(ctx, req); err != nil {
		t.Fatal(err)
	}
	marker := s.markerKey(name)
	key, c, err := s.node(ctx, marker)
	if err != nil {
		t.Fatal(err)
	}
	GraceOver(t, key, grace) // the old process's view says its grace has ended
	old := s.watch.refresh(ctx, key, c)
	if old.node == "" || !strings.HasSuffix(old.view, "#"+old.node) {
		t.Fatalf("the view %q carries no node id", old.view)
	}
	restarted := time.Now()
	if err := cl.Masters[1].Restart(); err != nil { // without persistence: empty
		t.Fatal(err)
	}
	if err := cl.WaitHealthy(); err != nil {
		t.Fatal(err)
	}
	for i := 0; key.Ping(ctx).Err() != nil; i++ { // the pool's old connections fail once each
		if i == 100 {
			t.Fatal("the restarted master does not answer")
		}
	}
	s.watch.nodes.Store(key, &serverFacts{gen: s.watch.dials.Load(), runID: old.runID, id: old.id,
		read: time.Now(), startUS: old.startUS, node: old.node, view: old.view})

	req.Owner = owner(1)
	sent := time.Now()
	g, err = s.Acquire(ctx, req)
	switch {
	case err != nil && !errors.Is(err, ErrStaleView):
		t.Fatalf("acquire with the old process's view: %v", err)
	case g.Acquired && sent.Before(restarted.Add(grace)):
		t.Fatalf("granted (token %d) by a process %v into its %v grace, on the old process's view", g.Fence, sent.Sub(restarted), grace)
	case g.Acquired:
		t.Skip("the acquire was sent after the new process's grace (a slow machine): nothing tested")
	case err == nil && !g.Grace:
		t.Fatalf("acquire with the old process's view: %+v; want the restart grace", g)
	}
	if n, _ := cc.Exists(ctx, name, tokenKey(name)).Result(); n != 0 {
		t.Errorf("%d of the lock's keys written by a refused acquire", n)
	}
	if f := s.watch.facts(ctx, key, c); f.runID == old.runID {
		t.Errorf("the Store still names the old process")
	}
	for {
		g, err = s.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if g.Acquired {
			break
		}
		time.Sleep(g.Remaining) // the grace's end, as the server reports it
	}
	if g.Fence <= first {
		t.Errorf("token %d after the restart, want > %d", g.Fence, first)
	}
}

// TestBatchStaleViewAfterSlotMigration: a slot moves from master 0 to
// master 1 (whose markers are then declared fresh) while a Store maps it to
// master 0. Its acquires of names in the slot, coalesced into one batched
// script that master 1 runs after the redirect, each carry master 0's view:
// each is refused as stale, retried with master 1's view, and granted, with
// a token larger than before the migration. Then one batched script carries
// requests with master 0's view and with master 1's, alternately: the stale
// ones get {0, 0, "stale"} and write nothing, the others are granted beside
// them, and the marker stays master 1's.
func TestBatchStaleViewAfterSlotMigration(t *testing.T) {
	cl := testserver.NewClusterWith(t, testserver.ClusterOptions{Masters: 3})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), PoolSize: 64})
	t.Cleanup(func() { cc.Close() })
	s := New(cc, nil)
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.MarkFresh(ctx); err != nil {
		t.Fatal(err)
	}
	tag := clusterNameOn("tag", 0)
	sl := slot(tag)
	var names []string
	for i := range 6 {
		names = append(names, fmt.Sprintf("{%s}/batch-stale/%d", tag, i))
	}
	req := func(i int) driver.Request {
		return driver.Request{Kind: driver.KindMutex, Name: names[i], Owner: owner(i), Lease: time.Minute}
	}
	before := make([]int64, len(names))
	for i := range names {
		g, err := s.Acquire(ctx, req(i))
		if err != nil || !g.Acquired {
			t.Fatalf("acquire %s: %+v, %v", names[i], g, err)
		}
		before[i] = g.Fence
		if err := s.Release(ctx, req(i)); err != nil {
			t.Fatal(err)
		}
	}
	marker := s.markerKey(names[0])
	aKey, aC, err := s.node(ctx, marker)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.MigrateSlot(sl, cl.Masters[0], cl.Masters[1], nil); err != nil {
		t.Fatal(err)
	}
	fresh := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer fresh.Close()
	if err := New(fresh, nil).MarkFresh(ctx); err != nil { // its slot map is current
		t.Fatal(err)
	}
	bKey, err := cc.MasterForKey(ctx, clusterNameOn("test/b", 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := bKey.Ping(ctx).Err(); err != nil { // the redirect dials nothing
		t.Fatal(err)
	}
	aView := s.watch.refresh(ctx, aKey, aC) // what the acquires will send
	if k, _, _ := s.node(ctx, marker); k != aKey {
		t.Fatal("the Store's slot map is no longer stale: nothing to test")
	}

	grants := make([]driver.Grant, len(names))
	errs := make([]error, len(names))
	requests0 := s.pipe.batchedRequests.Load()
	together(t, s, len(names), func(i int) { grants[i], errs[i] = s.Acquire(ctx, req(i)) })
	if got := s.pipe.batchedRequests.Load() - requests0; got < int64(len(names)) {
		t.Errorf("%d requests went in batched scripts, want at least %d", got, len(names))
	}
	for i := range names {
		if errs[i] != nil || !grants[i].Acquired || grants[i].Fence <= before[i] {
			t.Errorf("acquire %s after the migration: %+v, %v; want granted with a token > %d", names[i], grants[i], errs[i], before[i])
		}
		if err := s.Release(ctx, req(i)); err != nil {
			t.Error(err)
		}
	}

	key, c, err := s.node(ctx, marker)
	if err != nil || key == aKey {
		t.Fatalf("the slot map after the stale retries still names master 0 (%v)", err)
	}
	bView := s.watch.facts(ctx, key, c)
	replies := make([]any, 4)
	errs = make([]error, 4)
	// coalesce puts requests with other grace arguments in calls of their
	// own; a layout where each request has its own puts the two views in
	// one call, which must judge each request by its own.
	s.pipe.specs = map[*redis.Script]*batchSpec{acquireScript: withLibBatched(acquireLua, batchLayout{nk: 5, na: 3, keys: []int{4}})}
	batched(t, s, 4, 4, func(i int) {
		view := bView
		if i%2 == 0 {
			view = aView
		}
		keys := append(mutexKeys(names[i]), marker)
		replies[i], errs[i] = s.pipe.run(ctx, acquireScript, keys, "60000", owner(10+i), s.graceArg(time.Minute, view))
	})
	for i := range 4 {
		n, _ := cc.Exists(ctx, names[i]).Result()
		switch {
		case errs[i] != nil:
			t.Errorf("request %d: %v", i, errs[i])
		case i%2 == 0 && (!isStale(replies[i]) || n != 0):
			t.Errorf("request %d with master 0's view: %v, lock exists %d; want stale, nothing written", i, replies[i], n)
		case i%2 == 1 && !isGrant(replies[i]):
			t.Errorf("request %d with master 1's view beside stale ones: %v; want granted", i, replies[i])
		}
	}
	if m, err := cc.Get(ctx, marker).Result(); err != nil || !strings.HasSuffix(m, ":"+bView.id) {
		t.Errorf("marker after the batch = %q, %v; want master 1's (%s)", m, err, bView.id)
	}
}

// TestClusterViewMarkerOnAnotherNode: a marker that is one master's own view
// (as MIGRATE carries a slot's marker to another node) matches a grace
// argument made from that view, whose grace is over; on another master the
// script must not trust it (CLUSTER MYID is not the view's node), neither by
// quick_over's few comparisons nor by the whole rule: "stale", nothing
// written.
func TestClusterViewMarkerOnAnotherNode(t *testing.T) {
	const grace = time.Second
	_, _, s := graceCluster(t, grace)
	ctx := context.Background()
	aKey, aC, err := s.node(ctx, s.markerKey(clusterNameOn("test/view-a", 0)))
	if err != nil {
		t.Fatal(err)
	}
	GraceOver(t, aKey, grace) // a view of master 0 says the grace has ended
	a := s.watch.refresh(ctx, aKey, aC)
	if a.node == "" || a.startUS == 0 {
		t.Fatalf("master 0's view %q has no node or no start", a.view)
	}
	onB := s.markerKey(clusterNameOn("test/view-b", 1))
	bKey, _, err := s.node(ctx, onB)
	if err != nil || bKey == aKey {
		t.Fatalf("no master but master 0 for %s (%v)", onB, err)
	}
	moved, _, _ := strings.Cut(a.view, "#")
	if err := bKey.Set(ctx, onB, moved, 0).Err(); err != nil {
		t.Fatal(err)
	}
	arg := s.graceArg(grace, a)
	if !strings.Contains(arg, "=") {
		t.Fatalf("grace argument %q carries no end", arg)
	}
	if left, err := graceScript.Run(ctx, bKey, []string{onB}, arg).Int64(); err != nil || left != -1 {
		t.Errorf("grace on master 1 with master 0's view and marker = %d, %v; want -1 (stale)", left, err)
	}
	keys := append(mutexKeys(clusterNameOn("test/view-b", 1)), onB)
	v, err := acquireScript.Run(ctx, bKey, keys, "60000", owner(0), arg).Result()
	if err != nil || !isStale(v) {
		t.Errorf("acquire on master 1 with master 0's view and marker = %v, %v; want stale", v, err)
	}
	if n, _ := bKey.Exists(ctx, keys[0], keys[1]).Result(); n != 0 {
		t.Errorf("%d of the lock's keys written by a stale acquire", n)
	}
}
