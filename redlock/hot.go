package redlock

import (
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"
)

// A hot name is one whose acquire was refused lately: someone held it, or
// contenders split the members. Its waiters are woken together by each
// release, and if each asked every member at once they would split the
// members between them again and again. So an acquire of a hot name asks
// one member first, the name's leader, and the others only if the leader
// grants: the leader picks the winner, in one round trip to one member for
// each loser. Every client picks the same leader for a name (a hash of the
// name over the members, in the order New was given them), passing over
// members that failed lately, so that a member that is down costs a hot
// name no member timeout per acquire.
type hot struct {
	mu    sync.Mutex
	names map[string]heat // hot name -> its last refusal
	// failed is, per member, when it last failed to answer (UnixNano; 0:
	// never).
	failed []atomic.Int64
	ttl    time.Duration // hotFor, or a test's
}

// heat is a hot name's last refusal.
type heat struct {
	at    time.Time // when
	alone bool      // by its leader alone, the others not asked
}

// hotFor is how long a refused name stays hot, and a failed member is
// passed over as leader.
const hotFor = time.Second

// hotMax bounds the names kept: past it, names no longer hot are dropped.
const hotMax = 4096

func newHot(members int) *hot {
	return &hot{names: make(map[string]heat), failed: make([]atomic.Int64, members), ttl: hotFor}
}

// refused records that an acquire of name was refused; alone, by the
// member asked first, the others not asked.
func (h *hot) refused(name string, alone bool) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.names) >= hotMax {
		for n, x := range h.names {
			if now.Sub(x.at) >= h.ttl {
				delete(h.names, n)
			}
		}
		if len(h.names) >= hotMax {
			return // many names hot at once: the others are asked all at once
		}
	}
	h.names[name] = heat{at: now, alone: alone}
}

// fail records that member i failed to answer.
func (h *hot) fail(i int) { h.failed[i].Store(time.Now().UnixNano()) }

// leader returns the member to ask first for name, or -1 when every member
// is to be asked at once: name is not hot, or its last refusal was its
// leader's alone, half a hotFor ago or more (no release woke the caller
// since: the others may be free, see Acquire).
func (h *hot) leader(name string) int {
	now := time.Now()
	h.mu.Lock()
	x, ok := h.names[name]
	if ok && now.Sub(x.at) >= h.ttl {
		delete(h.names, name)
		ok = false
	}
	h.mu.Unlock()
	if !ok || (x.alone && now.Sub(x.at) >= h.ttl/2) {
		return -1
	}
	return h.pick(name, now)
}

// pick returns name's leader: the first member, from the one name hashes
// to, that has not failed within hotFor; or -1 when all have.
func (h *hot) pick(name string, now time.Time) int {
	f := fnv.New32a()
	f.Write([]byte(name))
	n := len(h.failed)
	start := int(f.Sum32() % uint32(n))
	for k := range n {
		i := (start + k) % n
		if now.Sub(time.Unix(0, h.failed[i].Load())) >= h.ttl {
			return i
		}
	}
	return -1
}
