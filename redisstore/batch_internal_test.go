package redisstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// holdPipe takes every round trip slot of p, so that calls queue until the
// returned function ends the hold: the queue then leaves at once, as one
// batch, as it does when a round trip ends under load. It first waits for
// the pipelines p started to end: a batch's callers return before its
// pipeline sends what queued meanwhile, which would take calls meant for
// the held queue.
func holdPipe(p *pipeliner) func() {
	p.wg.Wait()
	p.mu.Lock()
	p.busy += p.max
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.busy -= p.max - 1 // one slot stays taken, as by a round trip that ends now
		p.mu.Unlock()
		p.next()
	}
}

// awaitQueued waits until n calls are queued in p.
func awaitQueued(t testing.TB, p *pipeliner, n int) {
	t.Helper()
	for {
		p.mu.Lock()
		q := len(p.queue)
		p.mu.Unlock()
		if q == n {
			return
		}
		time.Sleep(time.Millisecond) // polls a condition; the test's timeout bounds it
	}
}

// batchStore returns a Store on a new server, marked fresh (no restart
// grace), and its go-redis client.
func batchStore(t testing.TB) (*Store, *redis.Client) {
	t.Helper()
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	t.Cleanup(func() { rdb.Close() })
	s := New(rdb, nil)
	t.Cleanup(func() { s.Close() })
	if err := s.MarkFresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The server's facts, read once more whenever the client dials, name
	// the server's start in the grace argument, which the requests of one
	// batched call share: read them until a read dials no more, so that the
	// calls a test queues together share one batch.
	for f := s.watch.facts(context.Background(), nil, rdb); ; {
		g := s.watch.facts(context.Background(), nil, rdb)
		if g == f {
			break
		}
		f = g
	}
	return s, rdb
}

func owner(i int) string { return fmt.Sprintf("01234567-89ab-cdef-0123-456789abcdef:%d", i+1) }

// together runs f(i) for i in 0..n-1 concurrently with every round trip
// slot of s taken, so that all n calls queue and leave as one batch, and
// returns once every f has returned.
func together(tb testing.TB, s *Store, n int, f func(i int)) {
	tb.Helper()
	release := holdPipe(&s.pipe)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	awaitQueued(tb, &s.pipe, n)
	release()
	wg.Wait()
}

// batched runs f as together does, and checks that one batched script call
// carried want of the n calls.
func batched(t *testing.T, s *Store, n, want int, f func(i int)) {
	t.Helper()
	scripts0, requests0 := s.pipe.batchedScripts.Load(), s.pipe.batchedRequests.Load()
	together(t, s, n, f)
	if got := s.pipe.batchedRequests.Load() - requests0; got != int64(want) {
		t.Errorf("%d requests went in batched scripts, want %d", got, want)
	}
	if want > 0 {
		if got := s.pipe.batchedScripts.Load() - scripts0; got != 1 {
			t.Errorf("%d batched script calls, want 1", got)
		}
	}
}

// TestCoalesceGroups checks how a queue is cut into commands: acquires and
// releases apart, other scripts alone, at most maxCoalesce requests a
// script, calls whose shared arguments differ (another lease) apart, and on
// Cluster one slot a script.
func TestCoalesceGroups(t *testing.T) {
	var batch []*call
	add := func(script *redis.Script, name string, lease int64) {
		c := &call{script: script, keys: []string{name, tokenKey(name), "q", "p", epochKey}, args: []any{lease, name, "g"}}
		switch script {
		case acquireFairScript:
			c.args = append(c.args, "g")
		case releaseScript[0]:
			c.keys = append(c.keys, "l", "c", epochKey)
			c.args = []any{name, lease, "g", "g", "g", "g"}
		}
		batch = append(batch, c)
	}
	for i := range maxCoalesce + 2 {
		add(acquireScript, fmt.Sprintf("{a}/%d", i), 30000)
	}
	add(acquireScript, "{a}/other-lease", 5000)
	add(acquireFairScript, "{a}/f1", 30000)
	add(acquireFairScript, "{a}/f2", 30000)
	add(releaseScript[0], "{a}/r", 30000)
	add(releaseScript[0], "{b}/r", 30000)
	add(withdrawScript[0], "{a}/w", 30000)
	add(withdrawScript[0], "{a}/w2", 30000)
	sizes := func(units []unit) []int {
		var out []int
		for _, u := range units {
			out = append(out, len(u.calls))
			if len(u.calls) == 1 {
				continue
			}
			spec := batchedScripts[u.calls[0].script]
			own := spec.nk - len(spec.keys)
			if u.script != spec.script || len(u.keys) != len(spec.keys)+own*len(u.calls) || u.args[0] != len(u.calls) {
				t.Errorf("unit of %d calls: script %v, %d keys, args %v", len(u.calls), u.script.Hash(), len(u.keys), u.args)
			}
		}
		return out
	}
	if got, want := sizes(coalesce(batch, batchedScripts, false, false)), []int{maxCoalesce, 2, 1, 2, 2, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("one server: unit sizes %v, want %v", got, want)
	}
	// On Cluster the releases of {a} and {b} are in two slots.
	if got, want := sizes(coalesce(batch, batchedScripts, true, false)), []int{maxCoalesce, 2, 1, 2, 1, 1, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("Cluster: unit sizes %v, want %v", got, want)
	}
	if got := sizes(coalesce(batch, batchedScripts, false, true)); len(got) != len(batch) {
		t.Errorf("separate: %d units for %d calls", len(got), len(batch))
	}
}

// TestBatchArgs checks the layout of a batched call's keys and arguments:
// what the layout says every request shares goes once, before the
// requests' own; only equal strings and integers count as the same.
func TestBatchArgs(t *testing.T) {
	l := batchLayout{nk: 3, na: 5, keys: []int{1}, args: []int{0, 2, 4}}
	o1, o2 := "owner", "owner" // equal, but pointers: never shared
	calls := []*call{
		{keys: []string{"a", "m", "x"}, args: []any{int64(30000), &o1, "g", "all", 7}},
		{keys: []string{"b", "m", "y"}, args: []any{int64(30000), &o2, "g", "one", 7}},
		{keys: []string{"c", "m", "z"}, args: []any{int64(30000), &o1, "g", "all", 7}},
	}
	for _, c := range calls[1:] {
		if !l.shares(calls[0], c) {
			t.Errorf("%v does not share with %v", c, calls[0])
		}
	}
	keys, args := l.batchArgs(calls)
	if want := []string{"m", "a", "x", "b", "y", "c", "z"}; !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	want := []any{3, int64(30000), "g", 7, &o1, "all", &o2, "one", &o1, "all"}
	if !slices.Equal(args, want) {
		t.Errorf("args %v, want %v", args, want)
	}
	for _, other := range []*call{
		{keys: []string{"d", "m2", "w"}, args: []any{int64(30000), &o1, "g", "all", 7}},
		{keys: []string{"d", "m", "w"}, args: []any{int64(5000), &o1, "g", "all", 7}},
		{keys: []string{"d", "m", "w"}, args: []any{int64(30000), &o1, "g", "all", int64(7)}},
		{keys: []string{"d", "m", "w"}, args: []any{int64(30000), &o1, &o2, "all", 7}},
	} {
		if l.shares(calls[0], other) {
			t.Errorf("%v shares with %v, want not", other, calls[0])
		}
	}
}

// TestBatchManyNames acquires and releases many names in one batched script
// call each: every request is granted with a token of its own name, and
// every release frees its name and publishes its wake-up.
func TestBatchManyNames(t *testing.T) {
	s, rdb := batchStore(t)
	ctx := context.Background()
	const n = 40
	req := func(i int) driver.Request {
		return driver.Request{Kind: driver.KindMutex, Name: fmt.Sprintf("batch/%d", i), Owner: owner(i), Lease: time.Minute}
	}
	// A name already held by its owner: the batch re-enters it.
	if _, err := s.Acquire(ctx, req(0)); err != nil {
		t.Fatal(err)
	}
	grants := make([]driver.Grant, n)
	errs := make([]error, n)
	batched(t, s, n, n, func(i int) { grants[i], errs[i] = s.Acquire(ctx, req(i)) })
	for i := range n {
		if errs[i] != nil || !grants[i].Acquired || grants[i].Fence == 0 {
			t.Fatalf("acquire %d in a batch: %+v, %v", i, grants[i], errs[i])
		}
		if holds, err := rdb.HGet(ctx, req(i).Name, req(i).Owner).Int(); err != nil || holds != 1+boolInt(i == 0) {
			t.Errorf("%s holds %d (%v) after the batch", req(i).Name, holds, err)
		}
	}

	sub := rdb.Subscribe(ctx, channelName("batch/1"), channelName("batch/2"))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	batched(t, s, n, n, func(i int) { errs[i] = s.Release(ctx, req(i)) })
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("release %d in a batch: %v", i, errs[i])
		}
		if k, _ := rdb.Exists(ctx, req(i).Name).Result(); k != 0 {
			t.Errorf("%s still exists after its release", req(i).Name)
		}
	}
	woken := map[string]bool{}
	for len(woken) < 2 {
		m, err := sub.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		woken[m.Channel] = true
	}
	// Releasing again is ErrNotHeld, batched as well.
	batched(t, s, 3, 3, func(i int) { errs[i] = s.Release(ctx, req(i)) })
	for i := range 3 {
		if !errors.Is(errs[i], leash.ErrNotHeld) {
			t.Errorf("second release %d: %v, want ErrNotHeld", i, errs[i])
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestBatchOneName sends many owners' acquires of one free name in one
// batched script call: exactly one is granted, the others told the holder's
// lease, as in a pipeline of separate scripts.
func TestBatchOneName(t *testing.T) {
	s, _ := batchStore(t)
	ctx := context.Background()
	const n = 30
	grants := make([]driver.Grant, n)
	errs := make([]error, n)
	req := func(i int) driver.Request {
		return driver.Request{Kind: driver.KindMutex, Name: "batch/one", Owner: owner(i), Lease: time.Minute}
	}
	batched(t, s, n, n, func(i int) { grants[i], errs[i] = s.Acquire(ctx, req(i)) })
	winner := oneWinner(t, grants, errs)
	// Every owner releases at once: the winner frees the lock, the others
	// hold nothing.
	batched(t, s, n, n, func(i int) { errs[i] = s.Release(ctx, req(i)) })
	for i := range n {
		if i == winner && errs[i] != nil {
			t.Errorf("the holder's release: %v", errs[i])
		}
		if i != winner && !errors.Is(errs[i], leash.ErrNotHeld) {
			t.Errorf("release %d, which held nothing: %v, want ErrNotHeld", i, errs[i])
		}
	}
}

// TestBatchFair sends FairMutex acquires in one batched script call: on
// many free names every one is granted, with the token its name's counter
// now holds; on one free name exactly one owner is granted and every other
// takes a place in the queue, with a deadline, as separate calls would. A
// starving Mutex waiter's attempt (the same script) shares the batch.
func TestBatchFair(t *testing.T) {
	s, rdb := batchStore(t)
	ctx := context.Background()
	const n = 12
	fair := func(name string, i int) driver.Request {
		return driver.Request{Kind: driver.KindFair, Name: name, Owner: owner(i), Lease: time.Minute, Wait: 5 * time.Second}
	}
	grants := make([]driver.Grant, n)
	errs := make([]error, n)
	batched(t, s, n, n, func(i int) { grants[i], errs[i] = s.Acquire(ctx, fair(fmt.Sprintf("batch/fair/%d", i), i)) })
	for i := range n {
		name := fmt.Sprintf("batch/fair/%d", i)
		if errs[i] != nil || !grants[i].Acquired || grants[i].Fence == 0 {
			t.Fatalf("fair acquire %d of a free name in a batch: %+v, %v", i, grants[i], errs[i])
		}
		if last, err := rdb.Get(ctx, tokenKey(name)).Int64(); err != nil || last != grants[i].Fence {
			t.Errorf("%s granted token %d, its counter holds %d (%v)", name, grants[i].Fence, last, err)
		}
		if q, _ := rdb.Exists(ctx, fairQueueKey(name)).Result(); q != 0 {
			t.Errorf("%s: a place was taken for a granted owner", name)
		}
	}

	const name = "batch/fair/one"
	batched(t, s, n, n, func(i int) {
		req := fair(name, i)
		if i == n-1 {
			req.Kind = driver.KindMutex // a starving Mutex waiter: its mark is a place too
		}
		grants[i], errs[i] = s.Acquire(ctx, req)
	})
	winner := oneWinner(t, grants, errs)
	queued, err := rdb.ZRange(ctx, fairQueueKey(name), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	places, err := rdb.ZRangeWithScores(ctx, fairPlacesKey(name), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(queued) != n-1 || len(places) != n-1 {
		t.Fatalf("queue %v, %d places; want the %d owners not granted", queued, len(places), n-1)
	}
	now := time.Now().UnixMilli()
	for _, p := range places {
		if p.Member == owner(winner) {
			t.Errorf("the holder %s has a place", owner(winner))
		}
		if left := int64(p.Score) - now; left <= 0 || left > 5000+1000 {
			t.Errorf("place of %s ends in %d ms, want within the 5 s asked", p.Member, left)
		}
	}
}

// oneWinner checks the replies to acquires of one free name sent in one
// batch: exactly one granted, every other refused with the holder's lease
// (a minute). It returns the one granted.
func oneWinner(t *testing.T, grants []driver.Grant, errs []error) int {
	t.Helper()
	winner := -1
	for i := range grants {
		switch {
		case errs[i] != nil:
			t.Fatalf("acquire %d: %v", i, errs[i])
		case grants[i].Acquired && winner >= 0:
			t.Fatalf("owners %d and %d both granted in one batch", winner, i)
		case grants[i].Acquired:
			winner = i
		case grants[i].Remaining <= 0 || grants[i].Remaining > time.Minute:
			t.Errorf("acquire %d refused with remaining %v, want the holder's lease", i, grants[i].Remaining)
		}
	}
	if winner < 0 {
		t.Fatal("no owner granted")
	}
	return winner
}

// TestBatchRequestFailsAlone puts a request that fails with a Lua error
// half-way through its script (after its first write) between two good
// ones in a batched script call: the good ones are granted, their writes
// and replies as alone; the bad one gets its own error, and leaves what the
// same request leaves when sent alone (Redis undoes no write of a script
// that fails).
func TestBatchRequestFailsAlone(t *testing.T) {
	s, rdb := batchStore(t)
	ctx := context.Background()
	// Requests of a batched acquire share their lease; here each has its
	// own, so that one can be bad.
	s.pipe.specs = map[*redis.Script]*batchSpec{acquireScript: withLibBatched(acquireLua, batchLayout{nk: 5, na: 3, keys: []int{4}})}
	marker := s.markerKey("x")
	call := func(name, lease string, i int) (any, error) {
		keys := append(mutexKeys(name), marker)
		return s.pipe.run(ctx, acquireScript, keys, lease, owner(i), "0")
	}
	names := []string{"batch/fail/0", "batch/fail/1", "batch/fail/2"}
	replies := make([]any, 3)
	errs := make([]error, 3)
	batched(t, s, 3, 3, func(i int) {
		lease := "60000"
		if i == 1 {
			lease = "not a number" // PEXPIRE fails after HINCRBY wrote
		}
		replies[i], errs[i] = call(names[i], lease, i)
	})
	for _, i := range []int{0, 2} {
		if errs[i] != nil || !isGrant(replies[i]) {
			t.Errorf("good request %d beside a failing one: %v, %v", i, replies[i], errs[i])
		}
		if ttl, _ := rdb.PTTL(ctx, names[i]).Result(); ttl <= 0 {
			t.Errorf("%s granted without its lease (pttl %v)", names[i], ttl)
		}
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "not an integer") || !isReply(errs[1]) {
		t.Errorf("failing request: %v, %v; want Redis's error reply for the bad lease", replies[1], errs[1])
	}
	// The same request alone fails the same way and leaves the same state.
	_, alone := call("batch/fail/alone", "not a number", 1)
	if alone == nil || !strings.Contains(alone.Error(), "not an integer") {
		t.Errorf("the failing request alone: %v", alone)
	}
	for _, name := range []string{names[1], "batch/fail/alone"} {
		holds, _ := rdb.HGet(ctx, name, owner(1)).Result()
		ttl, _ := rdb.PTTL(ctx, name).Result()
		if holds != "1" || ttl != -1 {
			t.Errorf("%s after the failed request: hold %q, pttl %v; want the hold written before the error, no expiry", name, holds, ttl)
		}
	}
}

// TestBatchReleaseLatch sends a release and a transport retry of it (the
// same request id) in one batched script call: both report the lock freed,
// as a retry sent after the first attempt does.
func TestBatchReleaseLatch(t *testing.T) {
	s, _ := batchStore(t)
	ctx := context.Background()
	req := driver.Request{Kind: driver.KindMutex, Name: "batch/latch", Owner: owner(0), Lease: time.Minute}
	if _, err := s.Acquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	keys := append(releaseKeys(req.Name, s.nextLatch(req.Name)), s.markerKey(req.Name))
	replies := make([]any, 2)
	errs := make([]error, 2)
	batched(t, s, 2, 2, func(i int) {
		replies[i], errs[i] = s.pipe.run(ctx, releaseScript[0], keys, req.Owner, "60000", "all", "30000", "0", "0")
	})
	for i := range 2 {
		if errs[i] != nil || replies[i] != int64(1) {
			t.Errorf("release attempt %d: %v, %v; want 1 (freed) for both", i, replies[i], errs[i])
		}
	}
}

// TestBatchCancelledCaller cancels one of three queued acquires: it returns
// its context's error and is never sent; the two others leave together.
func TestBatchCancelledCaller(t *testing.T) {
	s, rdb := batchStore(t)
	ctx := context.Background()
	cctx, cancel := context.WithCancel(ctx)
	req := func(i int) driver.Request {
		return driver.Request{Kind: driver.KindMutex, Name: fmt.Sprintf("batch/cancel/%d", i), Owner: owner(i), Lease: time.Minute}
	}
	scripts0 := s.pipe.batchedScripts.Load()
	release := holdPipe(&s.pipe)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		c := ctx
		if i == 1 {
			c = cctx
		}
		wg.Go(func() { _, errs[i] = s.Acquire(c, req(i)) })
	}
	awaitQueued(t, &s.pipe, 3)
	cancel()
	awaitQueued(t, &s.pipe, 2)
	release()
	wg.Wait()
	if !errors.Is(errs[1], context.Canceled) {
		t.Errorf("cancelled acquire: %v, want context.Canceled", errs[1])
	}
	if n, _ := rdb.Exists(ctx, req(1).Name).Result(); n != 0 {
		t.Errorf("the cancelled acquire was sent: %s exists", req(1).Name)
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil {
			t.Errorf("acquire %d: %v", i, errs[i])
		}
	}
	if got := s.pipe.batchedScripts.Load() - scripts0; got != 1 {
		t.Errorf("%d batched script calls, want 1 for the two calls left", got)
	}
}

// TestBatchNoScript sends a batch to a server whose script cache was
// flushed: the batched script is loaded (EVAL) and every request answered.
func TestBatchNoScript(t *testing.T) {
	s, rdb := batchStore(t)
	ctx := context.Background()
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 5)
	batched(t, s, 5, 5, func(i int) {
		_, errs[i] = s.Acquire(ctx, driver.Request{Kind: driver.KindMutex, Name: fmt.Sprintf("batch/noscript/%d", i), Owner: owner(i), Lease: time.Minute})
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("acquire %d after SCRIPT FLUSH: %v", i, err)
		}
	}
}

// TestBatchClusterPerSlot queues acquires of names in four hash slots, two
// or three names each, on a three-node Cluster: each slot's requests go as
// one batched script call (a script touching two slots would fail with
// CROSSSLOT), and every request is granted.
func TestBatchClusterPerSlot(t *testing.T) {
	nodes := testserver.NewCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, node := range nodes {
		addrs[i] = node.Addr
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { cc.Close() })
	s := New(cc, nil)
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.MarkFresh(ctx); err != nil {
		t.Fatal(err)
	}
	var names []string
	slots := map[int]bool{}
	for _, tag := range []string{"a", "b", "c", "d"} {
		for j := range 2 + boolInt(tag == "a") {
			names = append(names, fmt.Sprintf("{%s}/batch/%d", tag, j))
		}
		slots[slot(tag)] = true
	}
	if len(slots) != 4 {
		t.Fatalf("tags in %d slots, want 4", len(slots))
	}
	// Warm the slot map and each slot's facts, so that the queued calls
	// make no other round trip.
	for i, name := range names {
		r := driver.Request{Kind: driver.KindMutex, Name: name, Owner: owner(i), Lease: time.Minute}
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	scripts0 := s.pipe.batchedScripts.Load()
	errs := make([]error, len(names))
	grants := make([]driver.Grant, len(names))
	together(t, s, len(names), func(i int) {
		grants[i], errs[i] = s.Acquire(ctx, driver.Request{Kind: driver.KindMutex, Name: names[i], Owner: owner(i), Lease: time.Minute})
	})
	for i := range names {
		if errs[i] != nil || !grants[i].Acquired || grants[i].Fence == 0 {
			t.Errorf("acquire %s: %+v, %v", names[i], grants[i], errs[i])
		}
	}
	if got := s.pipe.batchedScripts.Load() - scripts0; got != int64(len(slots)) {
		t.Errorf("%d batched script calls, want one per slot (%d)", got, len(slots))
	}
	// The releases, batched per slot too, keep a latch each on Cluster
	// (onCluster, see withLibBatched): the warm-up's releases left one per
	// name, these one more each.
	scripts0 = s.pipe.batchedScripts.Load()
	together(t, s, len(names), func(i int) {
		errs[i] = s.Release(ctx, driver.Request{Kind: driver.KindMutex, Name: names[i], Owner: owner(i), Lease: time.Minute})
	})
	for i := range names {
		if errs[i] != nil {
			t.Errorf("release %s: %v", names[i], errs[i])
		}
	}
	if got := s.pipe.batchedScripts.Load() - scripts0; got != int64(len(slots)) {
		t.Errorf("%d batched release calls, want one per slot (%d)", got, len(slots))
	}
	var latches atomic.Int64
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.Keys(ctx, latchPrefix+"*").Result()
		latches.Add(int64(len(n)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := latches.Load(); got != int64(2*len(names)) {
		t.Errorf("%d release latches, want %d (one per release on Cluster)", got, 2*len(names))
	}
}

// BenchmarkCoalesce measures one batch of 16 acquires of free names, then
// one of their 16 releases, per operation, sent as one batched script call
// each (coalesced) or as a pipeline of 16 script calls each (separate), and
// reports redis-server's CPU per Lock+Unlock. The batches are formed with
// every round trip slot held, so their size does not depend on timing: run
// under callgrind (redis-server on PATH a wrapper that starts it under
// valgrind --tool=callgrind) it gives instruction counts per lock.
func BenchmarkCoalesce(b *testing.B) {
	const k = 16
	for _, mode := range []string{"separate", "coalesced"} {
		b.Run(mode, func(b *testing.B) {
			s, rdb := batchStore(b)
			s.pipe.separate = mode == "separate"
			ctx := context.Background()
			reqs := make([]driver.Request, k)
			for i := range reqs {
				reqs[i] = driver.Request{Kind: driver.KindMutex, Name: fmt.Sprintf("bench/coalesce/%d", i), Owner: owner(i), Lease: time.Minute}
			}
			errs := make([]error, k)
			batch := func(f func(i int)) {
				together(b, s, k, f)
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			cpu := func() float64 {
				info, err := rdb.Info(ctx, "cpu").Result()
				if err != nil {
					b.Fatal(err)
				}
				var sys, user float64
				for _, l := range strings.Split(info, "\r\n") {
					if v, ok := strings.CutPrefix(l, "used_cpu_sys:"); ok {
						fmt.Sscan(v, &sys)
					}
					if v, ok := strings.CutPrefix(l, "used_cpu_user:"); ok {
						fmt.Sscan(v, &user)
					}
				}
				return sys + user
			}
			c0 := cpu()
			b.ResetTimer()
			for range b.N {
				batch(func(i int) { _, errs[i] = s.Acquire(ctx, reqs[i]) })
				batch(func(i int) { errs[i] = s.Release(ctx, reqs[i]) })
			}
			b.StopTimer()
			b.ReportMetric((cpu()-c0)*1e6/float64(b.N*k), "redis-cpu-µs/lock")
		})
	}
}

// BenchmarkCoalesceCluster runs an uncontended Lock+Unlock loop with 64
// goroutines on a three-node Cluster, each goroutine on a name of its own,
// with queued calls coalesced per hash slot or sent separately, and reports
// the masters' CPU per Lock+Unlock and the share of calls that went in
// batched scripts: names in distinct slots (rarely coalesced: two queued
// calls seldom share a slot) or all under one hash tag (one slot).
func BenchmarkCoalesceCluster(b *testing.B) {
	nodes := testserver.NewCluster(b, 3)
	addrs := make([]string, len(nodes))
	for i, node := range nodes {
		addrs[i] = node.Addr
	}
	cpu := func() float64 {
		var t float64
		for _, n := range nodes {
			d, err := n.CPU()
			if err != nil {
				b.Fatal(err)
			}
			t += d.Seconds()
		}
		return t
	}
	for _, names := range []string{"distinct", "onetag"} {
		for _, mode := range []string{"separate", "coalesced"} {
			b.Run(names+"/"+mode, func(b *testing.B) {
				cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 128})
				defer cc.Close()
				s := New(cc, nil)
				s.pipe.separate = mode == "separate"
				// The run before left its latches: each run starts empty.
				if err := cc.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
					return m.FlushAll(ctx).Err()
				}); err != nil {
					b.Fatal(err)
				}
				if err := s.MarkFresh(context.Background()); err != nil {
					b.Fatal(err)
				}
				c, err := leash.New(s, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				var id atomic.Int64
				b.SetParallelism(32) // 64 goroutines on 2 cores
				c0 := cpu()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					n := fmt.Sprintf("bench/%s/%d", mode, id.Add(1))
					if names == "onetag" {
						n = "{tag}/" + n
					}
					m := c.Mutex(n)
					for pb.Next() {
						h, err := m.Lock(context.Background())
						if err != nil {
							b.Error(err)
							return
						}
						if err := h.Unlock(context.Background()); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric((cpu()-c0)*1e6/float64(b.N), "redis-cpu-µs/op")
				b.ReportMetric(float64(s.pipe.batchedRequests.Load())/float64(2*b.N), "batched-frac")
			})
		}
	}
}

// TestBatchGraceEachRequest runs, in one batched script call, acquires of
// four names on a server whose restart marker is ten seconds old: three
// whose grace (their lease's) is over, and between them one whose grace is
// a minute. A request after the first is answered from the first one's
// verdict only when its grace and the marker are the same (see grace_at):
// the minute's grace is refused, and the ones after it granted; with the
// grace argument left out of the memo's key (the negative control), the
// minute's is granted.
func TestBatchGraceEachRequest(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	s := New(rdb, nil)
	defer s.Close()
	f := s.watch.facts(ctx, nil, rdb)
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	start := now.Add(-10 * time.Second).UnixMicro()
	if err := rdb.Set(ctx, epochKey, fmt.Sprintf("%d:%s", start, f.id), 0).Err(); err != nil {
		t.Fatal(err)
	}
	leases := []time.Duration{5 * time.Second, 5 * time.Second, time.Minute, 5 * time.Second}
	var calls []*call
	for i, lease := range leases {
		calls = append(calls, &call{keys: append(mutexKeys(fmt.Sprint("batch/grace/", i)), epochKey),
			args: []any{ms(lease), owner(i), s.graceArg(lease, f)}})
	}
	// coalesce puts requests with other grace arguments in calls of their
	// own; a layout where each request has its own checks that the memo
	// holds even then.
	own := withLibBatched(acquireLua, batchLayout{nk: 5, na: 3, keys: []int{4}})
	keys, args := own.batchArgs(calls)
	v, err := own.script.Run(ctx, rdb, keys, args...).Slice()
	if err != nil || len(v) != len(leases) {
		t.Fatalf("batched acquire = %v, %v", v, err)
	}
	for i, r := range v {
		left, refused := parseGrace(r)
		switch {
		case leases[i] == time.Minute && (!refused || left < 45*time.Second):
			t.Errorf("request %d, grace a minute from a marker 10 s old: %v; want refused with about 50 s left", i, r)
		case leases[i] != time.Minute && !isGrant(r):
			t.Errorf("request %d, grace 5 s from a marker 10 s old: %v; want granted", i, r)
		}
	}
	// Negative control: a memo that forgot the grace argument would grant
	// the minute's request on the verdict of the 5 s one before it.
	const key = "and grace == graced "
	src := own.source
	if !strings.Contains(src, key) {
		t.Fatalf("the control's edit no longer applies: %q is not in the batched acquire", key)
	}
	for _, c := range calls {
		c.keys[0] += "/control" // fresh names
	}
	keys, args = own.batchArgs(calls)
	v, err = redis.NewScript(strings.Replace(src, key, "", 1)).Run(ctx, rdb, keys, args...).Slice()
	if err != nil || len(v) != len(leases) {
		t.Fatalf("control: batched acquire = %v, %v", v, err)
	}
	if !isGrant(v[2]) {
		t.Errorf("control: a memo keyed without the grace argument answered the minute's request %v; want it granted, wrongly, so that the check above can fail", v[2])
	}
}

// TestBatchLatchLifetime checks that a batched release call's latch lives
// as long as the longest lifetime any of its requests asks, in every
// attempt of the call: a transport retry may come until the latest of the
// callers' deadlines. Here the request with the long lifetime answers in
// the first attempt and only reads its answer in the second, where the
// request with the short one answers anew; the latch the second attempt
// writes must keep the long lifetime, or a third attempt after the short
// one would find no latch and drop the reentered lock's second hold.
func TestBatchLatchLifetime(t *testing.T) {
	_, rdb := batchStore(t)
	ctx := context.Background()
	long, short := "batch/lifetime/long", "batch/lifetime/short"
	if err := rdb.HSet(ctx, long, owner(0), 2).Err(); err != nil { // reentered: two holds
		t.Fatal(err)
	}
	latch := latchKey(long, "lifetime-0")
	calls := []*call{
		{keys: append(releaseKeys(long, latch), epochKey), args: []any{owner(0), "60000", "one", "30000", "0", "0"}},
		{keys: append(releaseKeys(short, latchKey(short, "lifetime-1")), epochKey), args: []any{owner(1), "60000", "one", "1000", "0", "0"}},
	}
	keys, args := releaseLayout.batchArgs(calls)
	send := func(attempt int, want []any) {
		t.Helper()
		v, err := batchedScripts[releaseScript[0]].script.Run(ctx, rdb, keys, args...).Slice()
		if err != nil || !reflect.DeepEqual(v, want) {
			t.Fatalf("attempt %d: batched release = %v, %v; want %v", attempt, v, err, want)
		}
		// PTTL only falls: a latch written for 1000 ms can never read more.
		if pttl := rdb.PTTL(ctx, latch).Val(); pttl <= time.Second {
			t.Fatalf("attempt %d: the latch expires in %v; its requests asked for up to 30s", attempt, pttl)
		}
	}
	send(1, []any{int64(0), nil}) // one of two holds dropped; the short one held nothing
	if err := rdb.HSet(ctx, short, owner(1), 1).Err(); err != nil {
		t.Fatal(err)
	}
	send(2, []any{int64(0), int64(1)}) // the first answer read back; the short one freed
	if holds := rdb.HGet(ctx, long, owner(0)).Val(); holds != "1" {
		t.Fatalf("holds left = %q, want 1", holds)
	}
}

// TestBatchLatchRetry sends a batched release call, then the same call
// again twice, as go-redis does after a connection lost before the reply
// (a transport retry resends the same command). The first call writes one
// latch, its first request's, with every request's answer; each retry gets
// the first answers instead of ErrNotHeld or a second decrement. A request
// that held nothing the first time and holds its lock when a retry comes
// has its answer added to the latch, and the next retry keeps every
// answer. The negative control is a batched release that never reads its
// latch.
func TestBatchLatchRetry(t *testing.T) {
	_, rdb := batchStore(t)
	ctx := context.Background()
	// run returns what went wrong, so that the control can expect it.
	run := func(script *redis.Script, prefix, mode string) (wrong []string) {
		fail := func(format string, args ...any) { wrong = append(wrong, fmt.Sprintf(format, args...)) }
		names := []string{prefix + "/freed", prefix + "/reentered", prefix + "/freed2", prefix + "/later"}
		hold := func(name, owner string, holds int) {
			if err := rdb.HSet(ctx, name, owner, holds).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for i, name := range names[:3] {
			hold(name, owner(i), 1+i%2) // the reentered lock has two holds
		}
		var (
			calls   []*call
			latches []string
		)
		for i, name := range names {
			latch := latchKey(name, fmt.Sprint("retry-", i))
			latches = append(latches, latch)
			calls = append(calls, &call{keys: append(releaseKeys(name, latch), epochKey),
				args: []any{owner(i), "60000", mode, "30000", "0", "0"}})
		}
		keys, args := releaseLayout.batchArgs(calls)
		send := func() []any {
			v, err := script.Run(ctx, rdb, keys, args...).Slice()
			if err != nil || len(v) != len(names) {
				t.Fatalf("batched release = %v, %v", v, err)
			}
			return v
		}
		// "one" drops one of the reentered lock's two holds, "all" frees it.
		want, latch := []any{int64(1), int64(0), int64(1), nil}, "101-"
		if mode == "all" {
			want[1], latch = int64(1), "111-"
		}
		holds := 1 // what the reentered lock keeps
		if mode == "all" {
			holds = 0
		}
		if got := send(); !reflect.DeepEqual(got, want) {
			fail("first attempt: %v, want %v (freed, %s, freed, not held)", got, want, map[string]string{"one": "one hold dropped", "all": "freed"}[mode])
		}
		if n, _ := rdb.Exists(ctx, latches[1:]...).Result(); n != 0 {
			fail("%d latches besides the first request's, want none", n)
		}
		if v, _ := rdb.Get(ctx, latches[0]).Result(); v != latch {
			fail("the batch's latch holds %q, want %q", v, latch)
		}
		if ttl, _ := rdb.PTTL(ctx, latches[0]).Result(); ttl <= 0 || ttl > 30*time.Second {
			fail("the batch's latch expires in %v, want (0, 30s]", ttl)
		}
		if got := send(); !reflect.DeepEqual(got, want) {
			fail("retry: %v, want the first answers %v", got, want)
		}
		if n, _ := rdb.HGet(ctx, names[1], owner(1)).Int(); n != holds {
			fail("reentered lock after a retry: %d holds, want %d", n, holds)
		}
		hold(names[3], owner(3), 1) // held when the next retry comes
		want[3] = int64(1)
		if got := send(); !reflect.DeepEqual(got, want) {
			fail("retry after the last request's lock was taken: %v, want %v", got, want)
		}
		if got := send(); !reflect.DeepEqual(got, want) {
			fail("third retry: %v, want every answer an attempt gave %v", got, want)
		}
		return wrong
	}
	for _, mode := range []string{"one", "all"} {
		for _, w := range run(batchedScripts[releaseScript[0]].script, "latch/retry/"+mode, mode) {
			t.Errorf("mode %s: %s", mode, w)
		}
	}
	// Two requests with one latch key in a call (a release and a resend of
	// it): the second gets the first's answer, and so does each in a retry
	// of the call.
	hold := "latch/same"
	if err := rdb.HSet(ctx, hold, owner(0), 1).Err(); err != nil {
		t.Fatal(err)
	}
	same := &call{keys: append(releaseKeys(hold, latchKey(hold, "same")), epochKey), args: []any{owner(0), "60000", "all", "30000", "0", "0"}}
	keys, args := releaseLayout.batchArgs([]*call{same, same})
	for attempt := range 2 {
		v, err := batchedScripts[releaseScript[0]].script.Run(ctx, rdb, keys, args...).Slice()
		if err != nil || !reflect.DeepEqual(v, []any{int64(1), int64(1)}) {
			t.Errorf("attempt %d of a call with one request twice: %v, %v; want freed for both", attempt, v, err)
		}
	}
	// Negative control: a batched release that does not read its latch
	// answers a retry ErrNotHeld and drops a reentered lock's second hold.
	const read = "v = latch_stored and string.sub(latch_stored, latch_i, latch_i)"
	src := batchedScripts[releaseScript[0]].source
	if !strings.Contains(src, read) {
		t.Fatalf("the control's edit no longer applies: %q is not in the batched release", read)
	}
	blind := strings.Replace(src, read, "v = false", 1)
	if wrong := run(redis.NewScript(blind), "latch/control", "one"); len(wrong) == 0 {
		t.Error("control: a batched release that never reads its latch passed; the test cannot tell it from one that does")
	} else {
		t.Logf("control, as expected: %s", strings.Join(wrong, "; "))
	}
}

// TestBatchReleaseOnUserData releases, in one batched call, a held lock and
// a name that holds an application's string: the string is refused with
// what it is (ErrNotALock), as a release alone refuses it, and left as it
// was; the lock beside it is freed.
func TestBatchReleaseOnUserData(t *testing.T) {
	s, rdb := batchStore(t)
	ctx := context.Background()
	held := driver.Request{Kind: driver.KindMutex, Name: "batch/userdata/lock", Owner: owner(0), Lease: time.Minute}
	if _, err := s.Acquire(ctx, held); err != nil {
		t.Fatal(err)
	}
	data := driver.Request{Kind: driver.KindMutex, Name: "batch/userdata/string", Owner: owner(1), Lease: time.Minute}
	if err := rdb.Set(ctx, data.Name, "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	reqs := []driver.Request{held, data}
	for _, mode := range []string{"all", "one"} {
		errs := make([]error, 2)
		batched(t, s, 2, 2, func(i int) {
			if mode == "all" {
				errs[i] = s.Release(ctx, reqs[i])
			} else {
				_, errs[i] = s.ReleaseOne(ctx, reqs[i])
			}
		})
		if mode == "all" && errs[0] != nil {
			t.Errorf("release of the held lock beside user data: %v", errs[0])
		}
		if !errors.Is(errs[1], leash.ErrNotHeld) || !errors.Is(errs[1], leash.ErrNotALock) {
			t.Errorf("batched release (%s) of a string: %v, want ErrNotHeld and ErrNotALock", mode, errs[1])
		}
		if v, err := rdb.Get(ctx, data.Name).Result(); err != nil || v != "hello" {
			t.Errorf("the string after a batched release (%s): %q, %v", mode, v, err)
		}
		if _, err := s.Acquire(ctx, held); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCloseWhileCallsInFlight: Close waits for the pipelines in flight
// while calls go on being made, during it and after it; every call still
// gets its answer (the race detector checks that Close's wait and the
// pipeliner's new pipelines do not race), and the pipeliner's round-trip
// count ends at zero.
func TestCloseWhileCallsInFlight(t *testing.T) {
	for round := range 10 {
		s, _ := batchStore(t)
		ctx := t.Context()
		var (
			wg     sync.WaitGroup
			closed atomic.Bool
			failed atomic.Int64
			done   atomic.Int64
		)
		for g := range 16 {
			wg.Go(func() {
				for i := 0; i < 20 || !closed.Load(); i++ {
					r := driver.Request{Kind: driver.KindMutex, Name: fmt.Sprintf("close/%d/%d/%d", round, g, i),
						Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
					if g, err := s.Acquire(ctx, r); err != nil || !g.Acquired {
						failed.Add(1)
						continue
					}
					if err := s.Release(ctx, r); err != nil {
						failed.Add(1)
					}
					done.Add(1)
				}
			})
		}
		for done.Load() < 32 { // Close amid the calls
			runtime.Gosched()
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		closed.Store(true)
		wg.Wait()
		if n := failed.Load(); n > 0 {
			t.Fatalf("round %d: %d calls failed around Close", round, n)
		}
		s.pipe.mu.Lock()
		busy, queued := s.pipe.busy, len(s.pipe.queue)
		s.pipe.mu.Unlock()
		if busy != 0 || queued != 0 {
			t.Fatalf("round %d: after every call returned, %d round trips in flight and %d calls queued", round, busy, queued)
		}
	}
}

// TestClosedPipelinerQueuesNothing checks that after close a call runs its
// script at once, even with every round trip slot taken, instead of
// queuing: a caller whose round trip ends after close sends what queued
// before it on its own goroutine (see pipeliner.next), and were later calls
// to queue too, it would go on sending their batches, past its own
// deadline, for as long as they kept coming.
func TestClosedPipelinerQueuesNothing(t *testing.T) {
	s, _ := batchStore(t)
	p := &s.pipe
	release := holdPipe(p) // every slot taken: before close, the call below would queue
	p.close()
	done := make(chan error, 1)
	go func() {
		r := driver.Request{Kind: driver.KindMutex, Name: "closed/1", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
		g, err := s.Acquire(t.Context(), r)
		if err == nil && !g.Acquired {
			err = fmt.Errorf("not acquired: %+v", g)
		}
		done <- err
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Acquire after close: %v", err)
			}
			release()
			p.mu.Lock()
			busy := p.busy
			p.mu.Unlock()
			if busy != 0 {
				t.Errorf("%d round trips in flight after every call returned", busy)
			}
			return
		default:
		}
		p.mu.Lock()
		queued := len(p.queue)
		p.mu.Unlock()
		if queued > 0 {
			release() // lets the queued call go, so that the test ends
			t.Fatalf("a call queued after close")
		}
		time.Sleep(time.Millisecond) // polls a condition; the test's timeout bounds it
	}
}
