package redlock

import "sync"

// A renewal must never take a lock again for an owner whose release has
// begun (driver.Store: "Renew never creates a lock"). Renew's rejoin takes
// a lock again on a member that answered RenewGone, but a member answers
// RenewGone also when the owner's own release freed it there: a renewal
// round still in flight when the holder unlocks (the core does not wait for
// it) reaches some members before the release and some after. So Release
// marks the owner's lock from when it begins until no renewal round that
// began before it ended is still running; a rejoin is not tried for a
// marked lock, and is given back when the mark appeared while its acquire
// was on its way (see Store.rejoin).
//
// A round that begins after a release ended (the core's watchdog may send
// a round it had picked before the unlock) cannot rejoin once every member
// answered the release: no member then holds the lock for the owner but a
// minority that earlier rounds' rejoins took and give back, so the round
// reaches no majority. After a release whose outcome is unknown, the lock
// may still be held on a majority; such a round then renews it, and takes
// it again on the others, as a renewal on a single store renews a lock
// whose release was lost, until the core's background release frees it.

// releasing holds the marks. Its zero value is ready to use. It owns the
// marks, the running renewal rounds and the sequence that orders the two.
type releasing struct {
	mu sync.Mutex
	// seq counts ended releases: a round that began when seq was s began
	// before every release ended at a later seq, and after the others.
	seq     uint64
	marks   map[owned]*mark // owners whose release has begun
	rounds  map[uint64]int  // running renewal rounds, by the seq they began at
	pending []endedMark     // ended releases whose marks wait for older rounds, by end seq
}

// owned names one owner's lock.
type owned struct{ name, owner string }

// A mark records that releases of one owner's lock began.
type mark struct {
	running int    // releases under way
	end     uint64 // seq when the last one ended
}

// An endedMark is a mark to drop when no round older than end runs.
type endedMark struct {
	key owned
	end uint64
}

// begin marks owner's lock on name: a release of it begins now.
func (r *releasing) begin(name, owner string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.marks == nil {
		r.marks = make(map[owned]*mark)
	}
	k := owned{name, owner}
	m := r.marks[k]
	if m == nil {
		m = &mark{}
		r.marks[k] = m
	}
	m.running++
}

// end records that a release begun with begin has ended: the mark is
// dropped when no renewal round that began before now still runs.
func (r *releasing) end(name, owner string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := owned{name, owner}
	m := r.marks[k]
	r.seq++
	m.end = r.seq
	if m.running--; m.running > 0 {
		return
	}
	if r.oldest() >= m.end {
		delete(r.marks, k)
		return
	}
	r.pending = append(r.pending, endedMark{k, m.end})
}

// marked reports whether a release of owner's lock on name has begun (and
// may still race a renewal round).
func (r *releasing) marked(name, owner string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.marks[owned{name, owner}] != nil
}

// roundBegins records that a renewal round begins and returns its token
// for roundEnds.
func (r *releasing) roundBegins() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rounds == nil {
		r.rounds = make(map[uint64]int)
	}
	r.rounds[r.seq]++
	return r.seq
}

// roundEnds records that the round begun at seq, its rejoins included, has
// ended, and drops the marks no running round needs.
func (r *releasing) roundEnds(seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rounds[seq]--; r.rounds[seq] == 0 {
		delete(r.rounds, seq)
	}
	oldest := r.oldest()
	n := 0
	for _, p := range r.pending {
		if p.end > oldest {
			break
		}
		// A later release of the same owner may have begun, or ended
		// later (it then has an entry of its own further on).
		if m := r.marks[p.key]; m != nil && m.running == 0 && m.end == p.end {
			delete(r.marks, p.key)
		}
		n++
	}
	r.pending = r.pending[n:]
	if len(r.pending) == 0 {
		r.pending = nil // let the array go
	}
}

// oldest returns the seq at which the oldest running round began, or the
// largest seq when none runs. r.mu is held.
func (r *releasing) oldest() uint64 {
	o := ^uint64(0)
	for s := range r.rounds {
		o = min(o, s)
	}
	return o
}
