package redisstore

import (
	"cmp"
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// pipeliner sends the scripts of concurrent calls (acquires, releases, job claims and ends,
// withdrawals) together. While fewer than max round trips are in flight, a
// call runs its script at once, on its own goroutine, exactly as without
// pipelining. Beyond that, calls queue; when a round trip ends, everything
// queued meanwhile leaves in one pipeline, in which the calls of one script
// that has a batched variant (a Mutex's or FairMutex's acquire, a release)
// go as one script call carrying all their requests (see coalesce). So a
// lone caller pays nothing, and many callers share round trips and script
// calls: Redis reads and answers a whole batch per system call, and runs one
// script per batch instead of one per lock, which is what bounds throughput
// when many goroutines lock at once.
//
// Each call still gets its own reply and error. A caller whose ctx ends
// while its script is queued leaves the queue, and the script is never sent;
// once the script is on its way, the caller returns ctx's error and the
// outcome is unknown, as with any script whose reply is not awaited.
// maxInFlight is how many acquire and release round trips a Store has in flight
// at once before further calls wait to share one. Two rather than four since
// queued calls are coalesced: bigger batches, fewer script calls (see
// bench/NOTES.md).
const maxInFlight = 2

type pipeliner struct {
	rdb redis.UniversalClient
	max int
	// noTryAgain turns off run's retries of TRYAGAIN (earlier versions'
	// behaviour): tests' negative control.
	noTryAgain bool

	mu     sync.Mutex
	busy   int // round trips in flight
	queue  []*call
	closed bool           // Close has begun: no more pipeline goroutines
	wg     sync.WaitGroup // pipelines started by the pipeliner, added to under mu

	// For tests: separate sends every call as a script call of its own
	// (the pipeliner before coalescing, for comparison); batchedScripts
	// and batchedRequests count the batched script calls sent (see
	// coalesce) and the requests they carried.
	separate                        bool
	batchedScripts, batchedRequests atomic.Int64
	// For tests: batched variants to use instead of batchedScripts.
	specs map[*redis.Script]*batchSpec
}

// A call is one queued script.
type call struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd    // set before done is closed
	done   chan struct{} // closed once cmd holds the reply
}

// Retries of a script refused with TRYAGAIN: the first after
// tryAgainFirst, each later one after twice the wait before, none once the
// wait would pass tryAgainLast (about 1.3 s in all).
const (
	tryAgainFirst = 10 * time.Millisecond
	tryAgainLast  = 640 * time.Millisecond
)

// run runs script and returns its reply. A script refused with TRYAGAIN (a
// Cluster slot half-way through a migration, its keys split between the two
// nodes) is sent again, with a growing wait, for about 1.3 s or until ctx
// ends: Redis refuses it before running it, so sending it again is safe
// whatever it does. (A release that go-redis had sent before, and that ran
// but whose reply was lost, finds its answer in its own latch: on Cluster
// batched releases keep one each, see withLibBatched.) go-redis itself
// retries it only MaxRedirects times (three by default) with waits of
// milliseconds, often less than the rest of a migration of a slot with a
// few keys takes.
func (p *pipeliner) run(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	for wait := tryAgainFirst; ; wait *= 2 {
		v, err := p.runOnce(ctx, script, keys, args...)
		if !redis.IsTryAgainError(err) || wait > tryAgainLast || p.noTryAgain {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
	}
}

// runOnce runs script once and returns its reply.
func (p *pipeliner) runOnce(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	p.mu.Lock()
	// After close nothing queues: each call runs at once, so that a caller
	// whose round trip ends drains only what queued before (see next), not
	// later callers' batches for as long as they keep coming.
	if p.busy < p.max || p.closed {
		p.busy++
		p.mu.Unlock()
		cmd := evalSha(ctx, p.rdb, script, keys, args)
		_ = p.rdb.Process(ctx, cmd)
		if noScript(cmd) {
			cmd = script.Eval(ctx, p.rdb, keys, args...)
		}
		p.next()
		return cmd.Result()
	}
	c := &call{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{})}
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	select {
	case <-c.done:
		return c.cmd.Result()
	case <-ctx.Done():
		p.mu.Lock()
		if i := slices.Index(p.queue, c); i >= 0 {
			p.queue = slices.Delete(p.queue, i, i+1) // never sent
		}
		p.mu.Unlock()
		return nil, ctx.Err()
	}
}

// next is called when a caller's own round trip ends: it sends what queued
// meanwhile as one pipeline, on a goroutine that goes on sending batch after
// batch while calls keep queuing, or frees the round trip's slot. One
// goroutine serves the slot for as long as it stays busy, rather than one per
// batch: a new goroutine grows its stack again through go-redis's pipeline
// code for every batch (8 % of the client's CPU samples at 16 goroutines,
// bench/NOTES.md).
func (p *pipeliner) next() {
	p.mu.Lock()
	switch {
	case len(p.queue) == 0:
		p.busy--
		p.mu.Unlock()
	case p.closed:
		// After close, which waits for no more goroutines: the caller
		// whose round trip ended sends the calls queued before close
		// itself (no call queues after, see runOnce).
		p.mu.Unlock()
		p.drain()
	default:
		p.wg.Add(1) // under mu: before close's Wait, or not at all
		p.mu.Unlock()
		// Owner: the pipeliner. Stops when nothing has queued by the time a
		// batch is answered (go-redis's read timeout bounds a dead server).
		go p.drainCounted()
	}
}

// drainCounted is drain on the pipeliner's own goroutine, counted in wg.
func (p *pipeliner) drainCounted() {
	defer p.wg.Done()
	p.drain()
}

// drain sends what queued as one pipeline, then what queued meanwhile, until
// nothing did; then it frees the round trip's slot.
func (p *pipeliner) drain() {
	for {
		p.mu.Lock()
		batch := p.queue
		p.queue = nil
		if len(batch) == 0 {
			p.busy--
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		p.exec(batch)
	}
}

// close waits for the pipelines in flight; calls made later run their
// scripts at once, each on its caller's goroutine.
func (p *pipeliner) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
}

// exec sends a batch as one pipeline and hands each call its reply. The
// calls of one script that has a batched variant go as one script call (see
// coalesce). Scripts the server does not have cached are sent again in full,
// in a second pipeline.
func (p *pipeliner) exec(batch []*call) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	_, cluster := p.rdb.(*redis.ClusterClient)
	specs := p.specs
	if specs == nil {
		specs = batchedScripts
	}
	units := coalesce(batch, specs, cluster, p.separate)
	cmds, _ := evalPipelined(ctx, p.rdb, replicaGuard{}, len(units), func(i int) (*redis.Script, []string, []any) {
		return units[i].script, units[i].keys, units[i].args
	})
	for i := range units {
		if n := len(units[i].calls); n > 1 {
			p.batchedScripts.Add(1)
			p.batchedRequests.Add(int64(n))
		}
		units[i].answer(cmds[i])
	}
	for _, c := range batch {
		close(c.done)
	}
	// The callers just answered often call again at once (an Unlock after
	// a Lock, the next Lock after an Unlock). When fewer calls queued during
	// the round trip than it answered, let those callers run first, so that
	// their next calls join the batch about to leave instead of waiting a
	// round trip for the next one: at 16 goroutines on one Store, about a
	// tenth more locks per second (bench/NOTES.md).
	p.mu.Lock()
	short := len(p.queue) < len(batch)
	p.mu.Unlock()
	if short {
		runtime.Gosched()
	}
}

// evalPipelined runs n scripts, the i-th being the script, keys and args
// that at(i) returns, with EVALSHA in one pipeline per Redis node, and
// returns their commands in order; errors are read per command. Scripts the
// server has not cached (NOSCRIPT) are sent again in full (EVAL), in a second
// pipeline. When guard is on, each pipeline ends with its WAIT, and the
// second result is the guard's verdict on the scripts' writes (see
// replicaGuard.verdict).
//
// On Cluster the nodes' pipelines run concurrently and apart: go-redis's
// own cross-node pipeline retries a slow node's commands until ctx ends and
// then marks every command in it failed, so one paused node would fail the
// renewals of locks on healthy nodes too.
func evalPipelined(ctx context.Context, rdb redis.UniversalClient, guard replicaGuard, n int,
	at func(i int) (*redis.Script, []string, []any)) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, n)
	cc, cluster := rdb.(*redis.ClusterClient)
	if !cluster || n <= 1 {
		return cmds, evalGroup(ctx, rdb, guard, nil, at, cmds)
	}
	// The guard is refused on Cluster (see initGuard): no verdict here.
	var wg sync.WaitGroup
	for _, g := range nodeGroups(ctx, cc, n, at) {
		// Owner: this call, which waits for it; ctx bounds it.
		wg.Go(func() { _ = evalGroup(ctx, rdb, replicaGuard{}, g, at, cmds) })
	}
	wg.Wait()
	return cmds, nil
}

// nodeGroups splits the indices 0..n-1 of evalPipelined's scripts by the
// Cluster node that serves each one's first key. A key whose node is unknown
// goes in a group of its own kind, which go-redis routes (and redirects) as
// usual.
func nodeGroups(ctx context.Context, cc *redis.ClusterClient, n int,
	at func(i int) (*redis.Script, []string, []any)) [][]int {
	byNode := map[*redis.Client][]int{}
	var order []*redis.Client
	for i := range n {
		_, keys, _ := at(i)
		node, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			node = nil
		}
		if _, seen := byNode[node]; !seen {
			order = append(order, node)
		}
		byNode[node] = append(byNode[node], i)
	}
	groups := make([][]int, len(order))
	for j, node := range order {
		groups[j] = byNode[node]
	}
	return groups
}

// evalGroup runs the scripts of idx (see evalPipelined; nil means all of
// cmds) in one pipeline through rdb, and a second one for those the server
// had not cached; it sets cmds[i] for each i in idx and returns the guard's
// verdict.
func evalGroup(ctx context.Context, rdb redis.UniversalClient, guard replicaGuard, idx []int,
	at func(i int) (*redis.Script, []string, []any), cmds []*redis.Cmd) error {
	n := len(idx)
	if idx == nil {
		n = len(cmds)
	}
	index := func(k int) int {
		if idx == nil {
			return k
		}
		return idx[k]
	}
	pipe := rdb.Pipeline()
	for k := range n {
		i := index(k)
		script, keys, args := at(i)
		cmds[i] = evalSha(ctx, rdb, script, keys, args)
		_ = pipe.Process(ctx, cmds[i])
	}
	wait := guard.add(ctx, pipe)
	_, _ = pipe.Exec(ctx) // errors are read per command
	verdict := guard.verdict(wait)
	var reload []int
	for k := range n {
		if i := index(k); noScript(cmds[i]) {
			reload = append(reload, i)
		}
	}
	switch len(reload) {
	case 0:
		return verdict
	case n:
		verdict = nil // the first pipeline wrote nothing to acknowledge
	}
	pipe = rdb.Pipeline()
	for _, i := range reload {
		script, keys, args := at(i)
		cmds[i] = script.Eval(ctx, pipe, keys, args...)
	}
	wait = guard.add(ctx, pipe)
	_, _ = pipe.Exec(ctx)
	return cmp.Or(verdict, guard.verdict(wait))
}

// evalSha is script's EVALSHA with keys and args, as script.EvalSha makes
// it but in two allocations whatever the number of keys (the command and
// its arguments): go-redis boxes every key, and the hash, into an interface
// value, one allocation each. Here the hash is boxed once per script (see
// hashArg), and the keys are passed as pointers into keys, which go-redis
// writes as the strings they point to; except, on a client that routes
// commands by key (Cluster), the first key, which go-redis reads as a string
// to route the command. keys must not change until the command has been
// sent.
func evalSha(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, keys []string, args []any) *redis.Cmd {
	a := make([]any, 3, 3+len(keys)+len(args))
	a[0], a[1], a[2] = "evalsha", hashArg(script), len(keys)
	_, direct := rdb.(*redis.Client) // one server: no routing by key
	for i := range keys {
		if i == 0 && !direct {
			a = append(a, keys[0])
		} else {
			a = append(a, &keys[i])
		}
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// scriptHashes holds each script's hash as an interface value (see hashArg).
var scriptHashes sync.Map // *redis.Script -> any

// hashArg returns script's hash, boxed once.
func hashArg(script *redis.Script) any {
	if h, ok := scriptHashes.Load(script); ok {
		return h
	}
	h, _ := scriptHashes.LoadOrStore(script, any(script.Hash()))
	return h
}

// noScript reports whether cmd failed because the server has not cached
// its script. It reads the error only when there is one: go-redis's
// HasErrorPrefix allocates on every call.
func noScript(cmd *redis.Cmd) bool {
	err := cmd.Err()
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// batchContext is the context a batch is sent with: the first call's values,
// no cancellation (a caller that gives up must not fail the others), and the
// latest of the callers' deadlines, if every caller has one.
func batchContext(batch []*call) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range batch {
		dl, ok := c.ctx.Deadline()
		if !ok {
			return context.WithoutCancel(batch[0].ctx), func() {}
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	return context.WithDeadline(context.WithoutCancel(batch[0].ctx), latest)
}
