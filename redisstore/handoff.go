package redisstore

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leash-go/leash/driver"
)

// Handoff implements [driver.HandoffStore]: release.lua grants a lock it
// frees to the first place of the fair queue (a FairMutex waiter's or a
// starving Mutex waiter's mark) and publishes the grant on the fair channel
// (see handoffWake). A Store with the replication guard on does not hand
// off: a grant must be acknowledged by replicas (WAIT) before anyone uses
// it, and the woken waiter would use it at once.
func (s *Store) Handoff() bool { return !s.guard.on() }

// handoffArgs returns release.lua's ARGV[5] and ARGV[6] (see its header):
// the hand-off lease and its grant's restart grace for a release that hands
// the lock over (req.Wait > 0), or 0 and "0" when it must not: the
// replication guard is on, or the server process cannot be told (no INFO),
// so that the restart grace could not be kept. Every release sends them, so
// that release.lua's calls all have one shape. The grace argument is the one
// an acquire on the same server would send; release.lua keeps it only on the
// process it names (same_process).
func (s *Store) handoffArgs(ctx context.Context, req driver.Request) (wait, grace any) {
	const none = "0"
	if req.Wait <= 0 || s.guard.on() {
		return int64(0), none
	}
	marker := s.markerKey(req.Name)
	key, c, err := s.node(ctx, marker)
	if err != nil {
		return int64(0), none
	}
	f, err := s.usable(ctx, key, c, s.watch.facts(ctx, key, c))
	if err != nil {
		return int64(0), none
	}
	grace = s.graceArgs.get(graceKey{req.Lease, f}, func(k graceKey) any { return s.graceArg(k.lease, k.f) })
	if g, _ := grace.(string); g != none && !s.markerOnly && f.runID == "" {
		return int64(0), none
	}
	return s.waitArg.get(req.Wait, waitMSArg), grace
}

// A hand-off message on the fair channel, "=<token>:<lease ms>:<owner>",
// carries the grant a release made to the queue's head (see release.lua).
// No owner starts with '=' (see owner_shaped in lua/lib.lua), so a payload
// that does is never a plain head's.
const handoffMark = "="

// isHandoff reports whether a fair channel payload carries a grant.
func isHandoff(payload string) bool { return strings.HasPrefix(payload, handoffMark) }

// handoffWake decodes a hand-off message into a wake-up for its owner that
// carries the grant. A malformed one wakes every waiter, which then tries
// again: the grant, if any, is found by its owner's next attempt.
func handoffWake(payload string) driver.Wake {
	token, rest, _ := strings.Cut(payload[len(handoffMark):], ":")
	ms, owner, _ := strings.Cut(rest, ":")
	fence, ok1 := positive(token)
	lease, ok2 := positive(ms)
	if !ok1 || !ok2 || owner == "" || lease > math.MaxInt64/int64(time.Millisecond) {
		return driver.Wake{To: driver.WakeAll}
	}
	return driver.Wake{To: driver.WakeHead, Head: owner, Fence: fence, Lease: time.Duration(lease) * time.Millisecond}
}

// positive parses a positive decimal integer as release.lua writes it: digits
// only, no sign, no leading zero.
func positive(s string) (int64, bool) {
	if s == "" || s[0] == '0' || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// givenBack records the grants that confirm gave back (an acquire that ran
// while a connection was dialed, on a server process the Store could not
// vouch for). Such a grant may have been a hand-off: a release granted the
// lock to a waiter's place and published the grant, the waiter's next
// attempt picked it up before the wake-up arrived, and confirm gave it
// back, which frees the lock for the next waiter. Were the wake-up, late on
// a lagging subscriber connection, taken for a grant after that, the waiter
// would hold a lock granted to someone else since: the core's rule drops
// only a grant announced before a refused attempt's answer (handed in the
// root package). So a hand-off wake-up whose owner had a grant of the same
// or a later token given back wakes its waiter as a plain head's does, and
// the waiter tries again. A record is kept for givenBackFor, far longer
// than a hand-off's grant lasts (a queue place's lease, seconds).
type givenBack struct {
	mu sync.Mutex
	m  map[string]givenBackGrant // by owner
}

type givenBackGrant struct {
	fence int64
	at    time.Time
}

// givenBackFor is how long a given-back grant is remembered.
const givenBackFor = time.Minute

// add records that owner's grant of fence was given back, and forgets the
// records older than givenBackFor.
func (g *givenBack) add(owner string, fence int64) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for o, r := range g.m {
		if now.Sub(r.at) > givenBackFor {
			delete(g.m, o)
		}
	}
	if g.m == nil {
		g.m = map[string]givenBackGrant{}
	}
	if r, ok := g.m[owner]; !ok || fence > r.fence {
		g.m[owner] = givenBackGrant{fence: fence, at: now}
	}
}

// filter returns w, or, for a hand-off wake-up whose grant (or a later one
// of its owner's) was given back, the plain wake-up of its owner's waiter.
func (g *givenBack) filter(w driver.Wake) driver.Wake {
	if w.Fence == 0 {
		return w
	}
	g.mu.Lock()
	r, ok := g.m[w.Head]
	g.mu.Unlock()
	if ok && w.Fence <= r.fence {
		return driver.Wake{To: driver.WakeHead, Head: w.Head}
	}
	return w
}
