package etcdstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/leash-go/leash/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// Watch implements driver.Watcher with an etcd watch on name's lock key
// that the server filters to deletions: a release, a force release, and the
// expiry or revocation of the holder's lease each delete the key, and each
// deletion wakes one waiter per client (WakeOne). Acquires, retries and
// refusals write nothing a watcher sees. Watch returns once the server has
// created the watch, so a deletion after it returns is never missed, or
// with ctx's error if ctx ends first (see startWatch). The other kinds
// watch more keys and wake as the package doc says ("Waiting").
//
// A watch the server cancels (its member lost the leader, or compaction
// passed its revision) or whose stream breaks wakes every waiter (WakeAll)
// and is set up again from the revision after the last one it saw, until
// stop is called: first after 100 ms, and while that fails, after twice as
// long each time, up to 5 s.
func (s *Store) Watch(ctx context.Context, kind driver.Kind, name string, wake func(driver.Wake)) (func(), error) {
	wakeOne := func(context.Context, int64) { wake(driver.Wake{To: driver.WakeOne}) }
	wakeAll := func(context.Context, int64) { wake(driver.Wake{To: driver.WakeAll}) }
	var ranges []watchRange
	switch kind {
	case driver.KindMutex:
		ranges = []watchRange{{key: s.lockKey(name), on: wakeOne}, s.dirRange(s.readDir(name), wakeOne)}
	case driver.KindFair:
		// A fair waiter also waits for the places ahead of it to go.
		fair := func(ctx context.Context, rev int64) { s.wakeFair(ctx, name, rev, wake) }
		ranges = []watchRange{{key: s.lockKey(name), on: fair}, s.dirRange(s.readDir(name), fair), s.dirRange(s.queueDir(name), fair)}
	case driver.KindRead, driver.KindWrite:
		rw := func(ctx context.Context, rev int64) { s.wakeRW(ctx, name, rev, wake) }
		ranges = []watchRange{{key: s.lockKey(name), on: rw}, s.dirRange(s.readDir(name), rw), s.dirRange(s.markDir(name), rw),
			{key: s.wakeKey(name), puts: true, on: wakeAll}}
	case driver.KindPermit:
		// A permit released wakes one waiter; a new permit count, all.
		ranges = []watchRange{s.dirRange(s.permitDir(name), wakeOne),
			{key: s.semKey(name), puts: true, on: wakeAll}}
	default:
		return nil, fmt.Errorf("etcdstore: watch %q: %w", name, driver.Unsupported(s, kind.String()+" locks"))
	}
	wctx, cancel := context.WithCancel(context.Background())
	ws := make([]watch, len(ranges))
	for i, r := range ranges {
		var err error
		if ws[i], err = s.startWatch(ctx, wctx, r, 0); err != nil {
			cancel()
			return nil, fmt.Errorf("etcdstore: watch %q: %w", name, err)
		}
	}
	done := make(chan struct{}, len(ranges))
	for i, r := range ranges {
		// Owner: the watch. Stops when stop cancels wctx.
		go func() {
			defer func() { done <- struct{}{} }()
			s.follow(wctx, r, ws[i], wake)
		}()
	}
	return func() {
		cancel()
		for range ranges {
			<-done
		}
	}, nil
}

// dirRange is the watchRange of every key under dir.
func (s *Store) dirRange(dir string, on func(context.Context, int64)) watchRange {
	return watchRange{key: dir, end: clientv3.GetPrefixRangeEnd(dir), on: on}
}

// A watchRange is a key, or the keys from key up to end, that a Watch
// follows: on is called for each response with deletions (and, with puts,
// with puts too), with the revision of its last event.
type watchRange struct {
	key, end string
	puts     bool
	on       func(ctx context.Context, rev int64)
}

// A watch is one etcd watch that startWatch created.
type watch struct {
	ch     clientv3.WatchChan
	rev    int64              // the revision it was created at
	cancel context.CancelFunc // ends it, and its context
}

// startWatch starts a watch of r's deletions from revision from (0: from
// now), bound to wctx, and waits, within ctx, until the server has created
// it. The caller ends the watch with its cancel. A creation that the
// server has not answered within createPatience is abandoned and asked
// again, on a new gRPC stream when s.streams allows (see watchStreams).
func (s *Store) startWatch(ctx, wctx context.Context, r watchRange, from int64) (watch, error) {
	opts := []clientv3.OpOption{clientv3.WithCreatedNotify(), clientv3.WithProgressNotify()}
	if !r.puts {
		opts = append(opts, clientv3.WithFilterPut())
	}
	if r.end != "" {
		opts = append(opts, clientv3.WithRange(r.end))
	}
	if from > 0 {
		opts = append(opts, clientv3.WithRev(from))
	}
	for {
		if err := ctx.Err(); err != nil {
			return watch{}, err
		}
		if w, again, err := s.createWatch(ctx, wctx, r.key, opts); !again {
			return w, err
		}
	}
}

// createPatience is how long one creation of a watch may go unanswered
// before startWatch abandons it and asks again.
const createPatience = 10 * time.Second

// createWatch asks once for a watch of key on the stream s.streams names,
// and waits for the server's creation within ctx, for up to
// createPatience. It reports again when that passed unanswered while ctx
// still runs.
func (s *Store) createWatch(ctx, wctx context.Context, key string, opts []clientv3.OpOption) (w watch, again bool, err error) {
	stream := s.streams.current()
	// WithRequireLeader: a member cut off from its cluster's leader cancels
	// the watch rather than go quiet while other members let others in.
	wctx = metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(wctx), watchStreamKey, strconv.FormatUint(stream, 10))
	wctx, cancel := context.WithCancel(wctx)
	// The client's Watch itself waits, on wctx alone, for the server's
	// answer, and a stream that cannot reach the server (a partition) keeps
	// it waiting: the end of ctx, or of the patience, cancels wctx until the
	// watch is created, so that the caller's deadline holds.
	patience, stop := context.WithTimeout(ctx, createPatience)
	defer stop()
	unbind := context.AfterFunc(patience, cancel)
	asked := time.Now()
	ch := s.cli.Watch(wctx, key, opts...)
	var resp clientv3.WatchResponse
	var ok bool
	select {
	case resp, ok = <-ch:
	case <-patience.Done():
		select { // answered as the patience ran out?
		case resp, ok = <-ch:
		default:
		}
	}
	unbind()
	if patience.Err() != nil {
		cancel() // AfterFunc may not have yet: the watch is given up either way
		if ok {
			s.streams.answered(stream)
		} else {
			s.streams.unanswered(stream, time.Since(asked))
		}
		if err := ctx.Err(); err != nil {
			return watch{}, false, err
		}
		return watch{}, true, nil
	}
	switch {
	case !ok:
		err := wctx.Err()
		cancel()
		if err == nil {
			err = fmt.Errorf("watch closed before it was created")
		}
		return watch{}, false, err
	case resp.Err() != nil:
		cancel()
		s.streams.answered(stream)
		return watch{}, false, resp.Err()
	case !resp.Created:
		cancel()
		return watch{}, false, fmt.Errorf("the first watch response is not its creation")
	}
	s.streams.answered(stream)
	return watch{ch: ch, rev: resp.Header.Revision, cancel: cancel}, false, nil
}

// watchStreamKey is the gRPC metadata key that carries the stream number
// of a watch (see watchStreams); the server ignores it.
const watchStreamKey = "leash-watch-stream"

// watchStreams numbers the gRPC stream that new watches join: clientv3
// runs the watches of one context's metadata on one stream, and the number
// is in that metadata. clientv3 creates a stream's watches one at a time,
// each once the server has answered the one before, so a creation whose
// request or answer was lost without the connection breaking would hold
// every later one on that stream for good (the fault proxy's black hole
// does that; a real partition loses no bytes, but a proxy between client
// and server might). A creation left unanswered for stuckAfter or longer
// moves new watches to a new stream; the watches already created stay
// where they are. An abandoned stream keeps its goroutines until the
// client is closed, and during a partition every stream's creations go
// unanswered, so a move comes at most once per gap, which doubles from
// moveGapMin up to moveGapMax while no creation on the new stream is
// answered.
type watchStreams struct {
	mu   sync.Mutex
	n    uint64        // the stream new watches join
	gap  time.Duration // the last gap set; 0 once a creation was answered
	next time.Time     // no move before it
}

// The bounds of watchStreams' moves.
const (
	stuckAfter = 2 * time.Second
	moveGapMin = 10 * time.Second
	moveGapMax = 2 * time.Minute
)

// current returns the number of the stream new watches join.
func (w *watchStreams) current() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// answered records that the server answered a creation on stream n.
func (w *watchStreams) answered(n uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n == w.n {
		w.gap, w.next = 0, time.Time{}
	}
}

// unanswered records that a creation on stream n was given up after
// pending, and moves new watches to a new stream if the rules above allow.
func (w *watchStreams) unanswered(n uint64, pending time.Duration) {
	if pending < stuckAfter {
		return // the caller gave up within a slow round trip: no sign of a lost request
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if n != w.n || now.Before(w.next) {
		return
	}
	w.n++
	w.gap = min(max(2*w.gap, moveGapMin), moveGapMax)
	w.next = now.Add(w.gap)
}

// A broken watch waits watchRetry before it is set up again, doubled after
// each failed try up to watchRetryMax: a member cut off from its leader is
// not asked ten times a second.
const (
	watchRetry    = 100 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// follow calls r.on for each response of w with events, until wctx ends; a broken
// watch wakes everyone and is set up again, from the revision after the last
// one it saw, or, when compaction has removed that revision, from now, after
// which everyone is woken once more. Each watch's context is cancelled when
// follow leaves it.
func (s *Store) follow(wctx context.Context, r watchRange, w watch, wake func(driver.Wake)) {
	rev := w.rev
	defer func() { w.cancel() }()
	for {
		for resp := range w.ch {
			if resp.CompactRevision != 0 {
				rev = 0 // deletions since rev are gone from the history
				break
			}
			if resp.Err() != nil || resp.Canceled {
				break
			}
			if n := len(resp.Events); n > 0 {
				r.on(wctx, resp.Events[n-1].Kv.ModRevision) // deletions, or, with r.puts, any change
			}
			rev = max(rev, resp.Header.Revision)
		}
		w.cancel()
		if wctx.Err() != nil {
			return
		}
		// A notification may have been lost: everyone tries again.
		wake(driver.Wake{To: driver.WakeAll})
		lost := rev == 0
		for wait := watchRetry; ; wait = min(2*wait, watchRetryMax) {
			select {
			case <-wctx.Done():
				return
			case <-time.After(wait):
			}
			from := int64(0)
			if !lost {
				from = rev + 1
			}
			sctx, cancel := context.WithTimeout(wctx, 10*time.Second)
			nw, err := s.startWatch(sctx, wctx, r, from)
			cancel()
			if err == nil {
				w = nw
				if lost {
					rev = w.rev
				}
				break
			}
		}
		if lost {
			// The watch sees deletions from its creation on: waiters woken
			// before it may have missed one.
			wake(driver.Wake{To: driver.WakeAll})
		}
	}
}
