// Package memstore is an in-process [driver.Store]: locks live in the memory
// of one process. Use it in unit tests of code that takes leash locks, and to
// coordinate goroutines of a single process with the full leash contract
// (leases, re-entry, fencing, lost-lease signals, every lock kind). It
// excludes nothing across processes.
//
// A Store passes the same conformance suite (package storetest) as the
// server-backed stores. Its lease clock is the process's monotonic clock, so
// it works inside testing/synctest bubbles.
//
// [NewSessions] returns a store that keeps locks alive by session instead (a
// [driver.SessionStore]: one keep-alive per client renews all its locks, and
// Renew only checks), for testing code against a session store such as
// etcd's or ZooKeeper's. A store from New renews each lock and is not a
// SessionStore.
package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// Store is an in-memory lock store. The zero value is not usable; call New.
// A Store is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	names    map[string]*name
	watchers map[watchKey][]*watch
	revokes  map[string][]*revokeWatch // client id -> its revocation listeners (revoke.go)
	clients  map[string]client         // holder records: client id -> record
	jobs     map[string]*job           // scheduled jobs' claims and records (jobs.go)
	// sessions is nil in a Store from New, which renews each lock in
	// Renew; in one from NewSessions, it is every client's session, which
	// KeepAlive renews, and Renew only checks (see session.go).
	sessions map[string]*session
}

// client is a holder record and when it expires.
type client struct {
	rec     driver.ClientRecord
	expires time.Time
}

// name is everything held on one lock name.
type name struct {
	fence   int64
	excl    *excl                // a Mutex, FairMutex or RWMutex writer
	readers map[string]time.Time // RWMutex readers: owner -> lease end
	writers map[string]time.Time // waiting writers: owner -> mark end
	queue   []place              // fair queue, in arrival order
	sem     *sem                 // set when the name is a semaphore
}

type excl struct {
	owner   string
	expires time.Time
	write   bool
	// revoked: the lock was revoked (see Revoke) and is now the owner's
	// tombstone: it blocks every grant until it expires or the owner
	// acknowledges, and the owner holds nothing.
	revoked bool
	// pending: a release handed the lock to this owner, the first of the
	// fair queue, which has not picked it up yet (see Handoff).
	pending bool
}

type place struct {
	owner    string
	deadline time.Time
}

type sem struct {
	size    int
	permits map[string]time.Time // owner -> lease end
}

type watchKey struct {
	kind driver.Kind
	name string
}

type watch struct{ wake func(driver.Wake) }

// New returns an empty Store.
func New() *Store {
	return &Store{names: make(map[string]*name), watchers: make(map[watchKey][]*watch), revokes: make(map[string][]*revokeWatch), clients: make(map[string]client), jobs: make(map[string]*job)}
}

var (
	_ driver.Store           = (*Store)(nil)
	_ driver.Watcher         = (*Store)(nil)
	_ driver.KindStore       = (*Store)(nil)
	_ driver.Withdrawer      = (*Store)(nil)
	_ driver.MultiStore      = (*Store)(nil)
	_ driver.PermitSetter    = (*Store)(nil)
	_ driver.Admin           = (*Store)(nil)
	_ driver.ClientRecorder  = (*Store)(nil)
	_ driver.StarvationStore = (*Store)(nil)
	_ driver.Revoker         = (*Store)(nil)
	_ driver.HandoffStore    = (*Store)(nil)
)

// Handoff implements [driver.HandoffStore]: a Release with Wait > 0 that
// frees a Mutex or FairMutex grants it to the first place of the fair
// queue. A Sessions does not hand off: its Renew extends nothing, so a
// handed-off lock could not be picked up by a renewal.
func (s *Store) Handoff() bool { return s.sessions == nil }

// Starvation implements [driver.StarvationStore]: a starving Mutex
// waiter's mark is a place in the name's fair queue.
func (s *Store) Starvation() bool { return true }

// Kinds implements [driver.KindStore]: a Store grants every kind.
func (s *Store) Kinds() []driver.Kind {
	return []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindRead, driver.KindWrite, driver.KindPermit}
}

// String names the store in messages.
func (s *Store) String() string { return "memstore" }

// get returns the state of name with every expired lease, place and mark
// dropped. The caller holds s.mu.
func (s *Store) get(n string, now time.Time) *name {
	st := s.names[n]
	if st == nil {
		st = &name{readers: map[string]time.Time{}, writers: map[string]time.Time{}}
		s.names[n] = st
	}
	if st.excl != nil && !now.Before(st.excl.expires) {
		st.excl = nil
	}
	maps.DeleteFunc(st.readers, func(_ string, end time.Time) bool { return !now.Before(end) })
	maps.DeleteFunc(st.writers, func(_ string, end time.Time) bool { return !now.Before(end) })
	st.queue = slices.DeleteFunc(st.queue, func(p place) bool { return !now.Before(p.deadline) })
	if st.sem != nil {
		maps.DeleteFunc(st.sem.permits, func(_ string, end time.Time) bool { return !now.Before(end) })
	}
	return st
}

// latest returns the latest time in m, or the zero time.
func latest(m map[string]time.Time) time.Time {
	var t time.Time
	for _, v := range m {
		if v.After(t) {
			t = v
		}
	}
	return t
}

func earliest(m map[string]time.Time) time.Time {
	var t time.Time
	for _, v := range m {
		if t.IsZero() || v.Before(t) {
			t = v
		}
	}
	return t
}

func (st *name) grant(now time.Time, owner string, lease time.Duration, write bool) driver.Grant {
	st.fence++
	st.excl = &excl{owner: owner, expires: now.Add(lease), write: write}
	return driver.Grant{Acquired: true, Fence: st.fence}
}

// blocked returns when the exclusive holder's or the readers' leases end, or
// the zero time when neither holds.
func (st *name) blocked() time.Time {
	if st.excl != nil {
		return st.excl.expires
	}
	return latest(st.readers)
}

// look returns n's record as get does, but keeps none for a name the Store
// has never seen: the operations that change nothing on such a name
// (Inspect, Renew, Release, Withdraw, ForceRelease, Revoke, AckRevoke) use
// it, so that asking about a name costs no memory. (A name once locked
// keeps its record, and its fencing counter, for the Store's life, as a
// Redis server keeps its counter key.)
func (s *Store) look(n string, now time.Time) *name {
	if s.names[n] == nil {
		return &name{readers: map[string]time.Time{}, writers: map[string]time.Time{}}
	}
	return s.get(n, now)
}

// What a refusal says a name holds: a semaphore, to a lock's request; a
// lock, to a semaphore's.
const (
	foundSemaphore = "a semaphore, not a mutex or readers-writer lock"
	foundLock      = "a mutex or readers-writer lock, not a semaphore"
)

// wrongType is the refusal of a lock request on a semaphore's name.
func wrongType(n string) error {
	return fmt.Errorf("memstore: %w", &leash.NotALockError{Name: n, Found: foundSemaphore})
}

// notASemaphore is the refusal of a semaphore request on a lock's name.
func notASemaphore(n string) error {
	return fmt.Errorf("memstore: %w", &leash.NotALockError{Name: n, Found: foundLock})
}

// notHeld is Release's error when req.Owner does not hold req.Name: a
// NotALockError besides while the name holds the other kind (live permits
// for a lock's release, a live lock or read lease for a permit's).
func notHeld(st *name, req driver.Request) error {
	var found string
	switch {
	case req.Kind == driver.KindPermit && (st.excl != nil || len(st.readers) > 0):
		found = foundLock
	case req.Kind != driver.KindPermit && st.sem != nil && len(st.sem.permits) > 0:
		found = foundSemaphore
	default:
		return fmt.Errorf("memstore: release %q: %w", req.Name, leash.ErrNotHeld)
	}
	return fmt.Errorf("memstore: release: %w: %w", leash.ErrNotHeld, &leash.NotALockError{Name: req.Name, Found: found})
}

// Acquire implements [driver.Store].
func (s *Store) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.acquireLocked(req, now)
	if err == nil && g.Acquired {
		s.keepLocked(req, now)
	}
	return g, err
}

// acquireLocked is Acquire with s.mu held.
func (s *Store) acquireLocked(req driver.Request, now time.Time) (driver.Grant, error) {
	st := s.get(req.Name, now)
	if req.Kind == driver.KindPermit {
		return s.acquirePermit(st, req, now)
	}
	if st.sem != nil {
		return driver.Grant{}, wrongType(req.Name)
	}
	notGranted := func(until time.Time) (driver.Grant, error) {
		if until.IsZero() {
			return driver.Grant{Remaining: -1}, nil
		}
		return driver.Grant{Remaining: until.Sub(now)}, nil
	}
	if e := st.excl; e != nil && e.owner == req.Owner && !e.revoked && req.Kind != driver.KindRead {
		// A retry of a granted acquire: the same tenure, its lease
		// refreshed; or the pick-up of a lock a release handed to it.
		e.expires = now.Add(req.Lease)
		e.pending = false
		return driver.Grant{Acquired: true, Fence: st.fence}, nil
	}
	switch req.Kind {
	case driver.KindMutex:
		if req.Wait > 0 {
			// A starving waiter's mark is a place in the fair queue.
			return s.acquireFair(st, req, now, notGranted)
		}
		until := st.blocked()
		if until.IsZero() && len(st.queue) > 0 { // free, but starving or fair waiters are first
			until = st.queue[0].deadline
		}
		if !until.IsZero() {
			g, err := notGranted(until)
			g.Queued = len(st.queue) > 0
			return g, err
		}
		return st.grant(now, req.Owner, req.Lease, false), nil

	case driver.KindFair:
		return s.acquireFair(st, req, now, notGranted)

	case driver.KindRead:
		if _, ok := st.readers[req.Owner]; ok { // a retry of a granted read
			st.readers[req.Owner] = now.Add(req.Lease)
			return driver.Grant{Acquired: true, Fence: st.fence}, nil
		}
		downgrade := st.excl != nil && st.excl.write && !st.excl.revoked && req.Parent != "" && st.excl.owner == req.Parent
		switch {
		case st.excl != nil && !downgrade:
			return notGranted(st.excl.expires)
		case len(st.writers) > 0 && !downgrade:
			return notGranted(earliest(st.writers))
		}
		st.fence++
		st.readers[req.Owner] = now.Add(req.Lease)
		return driver.Grant{Acquired: true, Fence: st.fence}, nil

	case driver.KindWrite:
		if _, ok := st.readers[req.Owner]; ok {
			return driver.Grant{}, fmt.Errorf("memstore: acquire %q: %w", req.Name, leash.ErrUpgrade)
		}
		if until := st.blocked(); !until.IsZero() {
			if req.Wait > 0 {
				st.writers[req.Owner] = now.Add(req.Wait)
			}
			return notGranted(until)
		}
		delete(st.writers, req.Owner)
		return st.grant(now, req.Owner, req.Lease, true), nil
	}
	return driver.Grant{}, fmt.Errorf("memstore: acquire %q: kind %v: %w", req.Name, req.Kind, leash.ErrUnsupported)
}

// acquireFair serves a FairMutex waiter, or a starving Mutex waiter's mark:
// granted when the lock is free and the caller is first in the queue (or it
// is empty); otherwise the caller's place is taken or refreshed for req.Wait.
func (s *Store) acquireFair(st *name, req driver.Request, now time.Time, notGranted func(time.Time) (driver.Grant, error)) (driver.Grant, error) {
	i := slices.IndexFunc(st.queue, func(p place) bool { return p.owner == req.Owner })
	until := st.blocked()
	if until.IsZero() && (len(st.queue) == 0 || i == 0) {
		if i == 0 {
			st.queue = st.queue[1:]
		}
		return st.grant(now, req.Owner, req.Lease, false), nil
	}
	if req.Wait > 0 {
		if i < 0 {
			st.queue = append(st.queue, place{owner: req.Owner})
			i = len(st.queue) - 1
		}
		st.queue[i].deadline = now.Add(req.Wait)
	}
	if until.IsZero() { // free, but another waiter is first
		until = st.queue[0].deadline
	}
	return notGranted(until)
}

func (s *Store) acquirePermit(st *name, req driver.Request, now time.Time) (driver.Grant, error) {
	if st.excl != nil || len(st.readers) > 0 {
		return driver.Grant{}, notASemaphore(req.Name)
	}
	if st.sem == nil {
		st.sem = &sem{size: req.Permits, permits: map[string]time.Time{}}
	}
	if _, ok := st.sem.permits[req.Owner]; ok { // a retry of a granted permit
		st.sem.permits[req.Owner] = now.Add(req.Lease)
		return driver.Grant{Acquired: true, Fence: st.fence}, nil
	}
	if len(st.sem.permits) >= st.sem.size {
		return driver.Grant{Remaining: earliest(st.sem.permits).Sub(now)}, nil
	}
	st.fence++
	st.sem.permits[req.Owner] = now.Add(req.Lease)
	return driver.Grant{Acquired: true, Fence: st.fence}, nil
}

// Renew implements [driver.Store].
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	res := make([]driver.RenewResult, len(reqs))
	if err := ctx.Err(); err != nil {
		for i := range res {
			res[i].Err = err
		}
		return res
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range reqs {
		st := s.look(r.Name, now)
		until := now.Add(r.Lease)
		if s.sessions != nil {
			until = time.Time{} // a session store's Renew checks; KeepAlive extends
		}
		switch {
		case st.hold(r.Kind, r.Owner, until):
			res[i].Status = driver.Renewed
		case st.excl != nil && st.excl.revoked && st.excl.owner == r.Owner:
			res[i].Status = driver.RenewRevoked
		case r.Kind != driver.KindRead && r.Kind != driver.KindPermit && (st.excl != nil || len(st.readers) > 0):
			res[i].Status = driver.RenewTaken
		default:
			res[i].Status = driver.RenewGone
		}
	}
	return res
}

// hold reports whether owner holds a lock of kind on the name (the exclusive
// lock for KindMutex, KindFair and KindWrite) and, when until is not zero,
// sets that lock's lease to end then.
func (st *name) hold(kind driver.Kind, owner string, until time.Time) bool {
	var leases map[string]time.Time
	switch kind {
	case driver.KindRead:
		leases = st.readers
	case driver.KindPermit:
		if st.sem == nil {
			return false
		}
		leases = st.sem.permits
	default:
		if st.excl == nil || st.excl.owner != owner || st.excl.revoked {
			return false
		}
		if !until.IsZero() {
			st.excl.expires = until
			st.excl.pending = false // a renewal picks a handed-off lock up
		}
		return true
	}
	if _, ok := leases[owner]; !ok {
		return false
	}
	if !until.IsZero() {
		leases[owner] = until
	}
	return true
}

// Withdraw implements [driver.Withdrawer].
func (s *Store) Withdraw(ctx context.Context, req driver.Request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	st := s.look(req.Name, time.Now())
	var notes []note
	if e := st.excl; e != nil && e.pending && e.owner == req.Owner {
		// The waiter gave up with a lock handed to it and not picked up:
		// released, without a further hand-off (see driver.HandoffStore).
		st.excl = nil
		notes = st.freedNotes(false)
	}
	wasHead := len(st.queue) > 0 && st.queue[0].owner == req.Owner
	st.queue = slices.DeleteFunc(st.queue, func(p place) bool { return p.owner == req.Owner })
	if wasHead && st.blocked().IsZero() {
		if len(st.queue) > 0 {
			notes = append(notes, note{driver.KindFair, driver.Wake{To: driver.WakeHead, Head: st.queue[0].owner}})
		} else {
			// The last starving waiter's mark, or fair place, is gone from a
			// free lock: the Mutex waiters it held back may take it.
			notes = append(notes, note{driver.KindMutex, driver.Wake{To: driver.WakeOne}})
		}
	}
	if _, ok := st.writers[req.Owner]; ok {
		delete(st.writers, req.Owner)
		if len(st.writers) == 0 && st.excl == nil {
			notes = append(notes, note{driver.KindWrite, driver.Wake{To: driver.WakeReaders}})
		}
	}
	wakes := s.wakesLocked(req.Name, notes)
	s.mu.Unlock()
	for _, w := range wakes {
		w()
	}
	return nil
}

// Release implements [driver.Store].
func (s *Store) Release(ctx context.Context, req driver.Request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	s.mu.Lock()
	st := s.look(req.Name, now)
	var notes []note
	switch {
	case req.Kind == driver.KindRead:
		if _, ok := st.readers[req.Owner]; !ok {
			s.mu.Unlock()
			return notHeld(st, req)
		}
		delete(st.readers, req.Owner)
		if len(st.readers) == 0 && len(st.writers) > 0 {
			notes = append(notes, note{driver.KindWrite, driver.Wake{To: driver.WakeWriter}})
		}
	case req.Kind == driver.KindPermit:
		if st.sem == nil {
			s.mu.Unlock()
			return notHeld(st, req)
		}
		if _, ok := st.sem.permits[req.Owner]; !ok {
			s.mu.Unlock()
			return notHeld(st, req)
		}
		delete(st.sem.permits, req.Owner)
		notes = append(notes, note{driver.KindPermit, driver.Wake{To: driver.WakeOne}})
	default:
		e := st.excl
		if e == nil || e.owner != req.Owner || e.revoked {
			s.mu.Unlock()
			return notHeld(st, req)
		}
		st.excl = nil
		if n, ok := s.handoffLocked(st, req, e.write, now); ok {
			notes = append(notes, n)
		} else {
			notes = append(notes, st.freedNotes(e.write)...)
		}
	}
	wakes := s.wakesLocked(req.Name, notes)
	s.mu.Unlock()
	for _, w := range wakes {
		w()
	}
	return nil
}

// handoffLocked grants the lock just freed by req's release to the first
// place of the fair queue, when req asks for it (Wait > 0) and the lock was
// not a writer's, and returns the wake-up that carries the grant (see
// driver.HandoffStore). The place is gone; the grant is pending, for
// req.Wait or what the place had left if less, until its owner acquires or
// renews it. s.mu is held.
func (s *Store) handoffLocked(st *name, req driver.Request, write bool, now time.Time) (note, bool) {
	if req.Wait <= 0 || write || s.sessions != nil || len(st.queue) == 0 {
		return note{}, false
	}
	head := st.queue[0]
	st.queue = st.queue[1:]
	// No longer than the place had left: a waiter that is gone blocks the
	// name no longer than its place would have.
	lease := min(req.Wait, head.deadline.Sub(now))
	g := st.grant(now, head.owner, lease, false)
	st.excl.pending = true
	return note{driver.KindFair, driver.Wake{To: driver.WakeHead, Head: head.owner, Fence: g.Fence, Lease: lease}}, true
}

// freedNotes are the notifications due when the exclusive lock is freed.
func (st *name) freedNotes(write bool) []note {
	switch {
	case write && len(st.writers) > 0:
		return []note{{driver.KindWrite, driver.Wake{To: driver.WakeWriter}}}
	case write:
		return []note{{driver.KindWrite, driver.Wake{To: driver.WakeReaders}}}
	case len(st.queue) > 0:
		return []note{{driver.KindFair, driver.Wake{To: driver.WakeHead, Head: st.queue[0].owner}}}
	}
	return []note{{driver.KindMutex, driver.Wake{To: driver.WakeOne}}}
}

// A note is a notification to deliver to the watchers of one kind.
type note struct {
	kind driver.Kind
	msg  driver.Wake
}

// wakesLocked returns the calls that deliver notes about name.
func (s *Store) wakesLocked(n string, notes []note) []func() {
	var out []func()
	for _, nt := range notes {
		for _, w := range s.watchers[watchKeyOf(nt.kind, n)] {
			out = append(out, func() { w.wake(nt.msg) })
		}
	}
	return out
}

func watchKeyOf(kind driver.Kind, n string) watchKey {
	if kind == driver.KindRead {
		kind = driver.KindWrite
	}
	return watchKey{kind, n}
}

// Watch implements [driver.Watcher].
func (s *Store) Watch(ctx context.Context, kind driver.Kind, n string, wake func(driver.Wake)) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return listen(&s.mu, s.watchers, watchKeyOf(kind, n), &watch{wake: wake}), nil
}

// listen adds w to m[k] under mu, and returns the call that removes it,
// once.
func listen[K comparable, W any](mu *sync.Mutex, m map[K][]*W, k K, w *W) func() {
	mu.Lock()
	m[k] = append(m[k], w)
	mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			ws := slices.DeleteFunc(m[k], func(x *W) bool { return x == w })
			if len(ws) == 0 {
				delete(m, k)
			} else {
				m[k] = ws
			}
		})
	}
}

// Inspect implements [driver.Admin].
func (s *Store) Inspect(ctx context.Context, n string) (driver.Info, error) {
	if err := ctx.Err(); err != nil {
		return driver.Info{}, err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.look(n, now)
	info := driver.Info{Name: n, Remaining: -1, Fence: st.fence, Queued: len(st.queue) + len(st.writers)}
	for _, kind := range []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindWrite, driver.KindPermit} {
		info.Waiters += len(s.watchers[watchKey{kind, n}])
	}
	leases := func(kind driver.Kind, m map[string]time.Time) {
		for _, o := range slices.Sorted(maps.Keys(m)) {
			info.Owners = append(info.Owners, driver.OwnerHolds{Owner: o, Holds: 1, Kind: kind, Remaining: m[o].Sub(now)})
		}
		if len(m) > 0 {
			info.Remaining = max(info.Remaining, latest(m).Sub(now))
		}
	}
	switch {
	case st.sem != nil:
		info.Kind, info.Permits = driver.KindPermit, st.sem.size
		leases(driver.KindPermit, st.sem.permits)
	default:
		if e := st.excl; e != nil && e.revoked {
			info.Revoked = []string{e.owner}
			info.Remaining = e.expires.Sub(now)
		} else if e != nil {
			info.Kind = driver.KindMutex
			if e.write {
				info.Kind = driver.KindWrite
			}
			info.Owners = append(info.Owners, driver.OwnerHolds{Owner: e.owner, Holds: 1, Kind: info.Kind, Remaining: -1})
			info.Remaining = e.expires.Sub(now)
		} else if len(st.readers) > 0 {
			info.Kind = driver.KindRead
		}
		leases(driver.KindRead, st.readers)
	}
	info.Held = len(info.Owners) > 0
	return info, nil
}

// ForceRelease implements [driver.Admin].
func (s *Store) ForceRelease(ctx context.Context, n string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	st := s.look(n, time.Now())
	any := st.excl != nil || len(st.readers) > 0 || len(st.writers) > 0 || len(st.queue) > 0 ||
		(st.sem != nil && len(st.sem.permits) > 0)
	var holders []string
	if st.excl != nil && !st.excl.revoked {
		holders = append(holders, st.excl.owner)
	}
	holders = append(holders, slices.Collect(maps.Keys(st.readers))...)
	if st.sem != nil {
		holders = append(holders, slices.Collect(maps.Keys(st.sem.permits))...)
	}
	st.excl, st.queue = nil, nil
	clear(st.readers)
	clear(st.writers)
	if st.sem != nil {
		clear(st.sem.permits)
	}
	var wakes []func()
	if any {
		wakes = s.wakesLocked(n, []note{{driver.KindMutex, driver.Wake{To: driver.WakeAll}}, {driver.KindFair, driver.Wake{To: driver.WakeAll}},
			{driver.KindWrite, driver.Wake{To: driver.WakeAll}}, {driver.KindPermit, driver.Wake{To: driver.WakeAll}}})
	}
	for _, o := range holders {
		wakes = append(wakes, s.revokesLocked(driver.Revocation{Name: n, Owner: o, Freed: true})...)
	}
	s.mu.Unlock()
	for _, w := range wakes {
		w()
	}
	return any, nil
}

// SetPermits implements [driver.PermitSetter].
func (s *Store) SetPermits(ctx context.Context, n string, permits int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	st := s.get(n, time.Now())
	if st.excl != nil || len(st.readers) > 0 {
		s.mu.Unlock()
		return notASemaphore(n)
	}
	if st.sem == nil {
		st.sem = &sem{permits: map[string]time.Time{}}
	}
	st.sem.size = permits
	wakes := s.wakesLocked(n, []note{{driver.KindPermit, driver.Wake{To: driver.WakeAll}}})
	s.mu.Unlock()
	for _, w := range wakes {
		w()
	}
	return nil
}

// Partition implements [driver.MultiStore]: every name can be taken together.
func (s *Store) Partition(names []string) [][]string {
	return [][]string{slices.Sorted(slices.Values(names))}
}

// AcquireMany implements [driver.MultiStore].
func (s *Store) AcquireMany(ctx context.Context, reqs []driver.Request) (driver.MultiGrant, error) {
	if err := ctx.Err(); err != nil {
		return driver.MultiGrant{}, err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var until time.Time
	sts := make([]*name, len(reqs))
	for i, r := range reqs {
		st := s.get(r.Name, now)
		sts[i] = st
		if st.sem != nil {
			return driver.MultiGrant{}, wrongType(r.Name)
		}
		if st.excl != nil && st.excl.owner == r.Owner && !st.excl.revoked {
			continue
		}
		if b := st.blocked(); !b.IsZero() && (until.IsZero() || b.Before(until)) {
			until = b
		}
	}
	if !until.IsZero() {
		return driver.MultiGrant{Remaining: until.Sub(now)}, nil
	}
	mg := driver.MultiGrant{Acquired: true, Fences: make([]int64, len(reqs))}
	for i, r := range reqs {
		st := sts[i]                // already pruned at now by the first loop
		if e := st.excl; e != nil { // a retry of a granted acquire
			e.expires = now.Add(r.Lease)
			mg.Fences[i] = st.fence
			continue
		}
		mg.Fences[i] = st.grant(now, r.Owner, r.Lease, false).Fence
	}
	for _, r := range reqs {
		s.keepLocked(r, now)
	}
	return mg, nil
}

// PutClient implements [driver.ClientRecorder].
func (s *Store) PutClient(ctx context.Context, rec driver.ClientRecord, ttl time.Duration) error {
	rec.Locks = slices.Clone(rec.Locks)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[rec.ID] = client{rec: rec, expires: time.Now().Add(ttl)}
	return nil
}

// DeleteClient implements [driver.ClientRecorder].
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.clients, id)
	return nil
}

// GetClient implements [driver.ClientRecorder].
func (s *Store) GetClient(ctx context.Context, id string) (driver.ClientRecord, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if ok && !time.Now().Before(c.expires) {
		delete(s.clients, id)
		ok = false
	}
	if !ok {
		return driver.ClientRecord{}, false, nil
	}
	c.rec.Locks = slices.Clone(c.rec.Locks)
	return c.rec, true, nil
}

// List implements [driver.Admin]: the names holding a lock, a lease, a
// permit or a waiting place that match pattern, sorted.
func (s *Store) List(ctx context.Context, pattern string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	re, err := driver.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("memstore: list: %w", err)
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.names {
		st := s.get(n, now)
		live := st.excl != nil || len(st.readers) > 0 || len(st.writers) > 0 || len(st.queue) > 0 ||
			(st.sem != nil && len(st.sem.permits) > 0)
		if live && re.MatchString(n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// RaiseFence implements [driver.FenceRaiser]: it raises name's fencing
// counter to floor when it is lower.
func (s *Store) RaiseFence(ctx context.Context, n string, floor int64) error {
	if floor <= 0 {
		return fmt.Errorf("%w: memstore: raise the fencing counter of %q to %d: the floor must be positive", leash.ErrInvalidArgument, n, floor)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.get(n, time.Now())
	st.fence = max(st.fence, floor)
	return nil
}

var _ driver.FenceRaiser = (*Store)(nil)
