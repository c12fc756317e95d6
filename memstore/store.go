// Package memstore is an in-process [leash.Store]: locks live in the memory
// of one process. Use it in unit tests of code that takes leash locks, and to
// coordinate goroutines of a single process with the full leash contract
// (leases, re-entry, fencing, lost-lease signals, every lock kind). It
// excludes nothing across processes.
//
// A Store passes the same conformance suite (package storetest) as the
// server-backed stores. Its lease clock is the process's monotonic clock, so
// it works inside testing/synctest bubbles.
package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/leash-go/leash"
)

// Store is an in-memory lock store. The zero value is not usable; call New.
// A Store is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	names    map[string]*name
	watchers map[watchKey][]*watch
	clients  map[string]client // holder records: client id -> record
}

// client is a holder record and when it expires.
type client struct {
	rec     leash.ClientRecord
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
	holds   int
	expires time.Time
	write   bool
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
	kind leash.Kind
	name string
}

type watch struct{ wake func(string) }

// New returns an empty Store.
func New() *Store {
	return &Store{names: make(map[string]*name), watchers: make(map[watchKey][]*watch), clients: make(map[string]client)}
}

var (
	_ leash.Store          = (*Store)(nil)
	_ leash.MultiStore     = (*Store)(nil)
	_ leash.PermitSetter   = (*Store)(nil)
	_ leash.ClientRecorder = (*Store)(nil)
)

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

func (st *name) grant(now time.Time, owner string, lease time.Duration, write bool) leash.Grant {
	st.fence++
	st.excl = &excl{owner: owner, holds: 1, expires: now.Add(lease), write: write}
	return leash.Grant{Acquired: true, Fence: st.fence, Holds: 1}
}

// blocked returns when the exclusive holder's or the readers' leases end, or
// the zero time when neither holds.
func (st *name) blocked() time.Time {
	if st.excl != nil {
		return st.excl.expires
	}
	return latest(st.readers)
}

// wrongType is the refusal of a lock request on a semaphore's name.
func wrongType(n string) error {
	return fmt.Errorf("memstore: %w", &leash.NotALockError{Name: n, Found: "a semaphore, not a mutex or readers-writer lock"})
}

// notASemaphore is the refusal of a semaphore request on a lock's name.
func notASemaphore(n string) error {
	return fmt.Errorf("memstore: %w", &leash.NotALockError{Name: n, Found: "a mutex or readers-writer lock, not a semaphore"})
}

// notHeld is Release's error when the owner does not hold n.
func notHeld(n string) error {
	return fmt.Errorf("memstore: release %q: %w", n, leash.ErrNotHeld)
}

// Acquire implements [leash.Store].
func (s *Store) Acquire(ctx context.Context, req leash.Request) (leash.Grant, error) {
	if err := ctx.Err(); err != nil {
		return leash.Grant{}, err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.get(req.Name, now)
	if req.Kind == leash.KindPermit {
		return s.acquirePermit(st, req, now)
	}
	if st.sem != nil {
		return leash.Grant{}, wrongType(req.Name)
	}
	notGranted := func(until time.Time) (leash.Grant, error) {
		if until.IsZero() {
			return leash.Grant{Remaining: -1}, nil
		}
		return leash.Grant{Remaining: until.Sub(now)}, nil
	}
	if e := st.excl; e != nil && e.owner == req.Owner && req.Kind != leash.KindRead {
		e.holds++
		e.expires = now.Add(req.Lease)
		return leash.Grant{Acquired: true, Fence: st.fence, Holds: e.holds}, nil
	}
	switch req.Kind {
	case leash.KindMutex:
		if until := st.blocked(); !until.IsZero() {
			return notGranted(until)
		}
		return st.grant(now, req.Owner, req.Lease, false), nil

	case leash.KindFair:
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

	case leash.KindRead:
		if _, ok := st.readers[req.Owner]; ok { // a retry of a granted read
			st.readers[req.Owner] = now.Add(req.Lease)
			return leash.Grant{Acquired: true, Fence: st.fence, Holds: 1}, nil
		}
		downgrade := st.excl != nil && st.excl.write && req.Parent != "" && st.excl.owner == req.Parent
		switch {
		case st.excl != nil && !downgrade:
			return notGranted(st.excl.expires)
		case len(st.writers) > 0 && !downgrade:
			return notGranted(earliest(st.writers))
		}
		st.fence++
		st.readers[req.Owner] = now.Add(req.Lease)
		return leash.Grant{Acquired: true, Fence: st.fence, Holds: 1}, nil

	case leash.KindWrite:
		if _, ok := st.readers[req.Owner]; ok {
			return leash.Grant{}, fmt.Errorf("memstore: acquire %q: %w", req.Name, leash.ErrUpgrade)
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
	return leash.Grant{}, fmt.Errorf("memstore: acquire %q: kind %v: %w", req.Name, req.Kind, leash.ErrUnsupported)
}

func (s *Store) acquirePermit(st *name, req leash.Request, now time.Time) (leash.Grant, error) {
	if st.excl != nil || len(st.readers) > 0 {
		return leash.Grant{}, notASemaphore(req.Name)
	}
	if st.sem == nil {
		st.sem = &sem{size: req.Permits, permits: map[string]time.Time{}}
	}
	if _, ok := st.sem.permits[req.Owner]; ok { // a retry of a granted permit
		st.sem.permits[req.Owner] = now.Add(req.Lease)
		return leash.Grant{Acquired: true, Fence: st.fence, Holds: 1}, nil
	}
	if len(st.sem.permits) >= st.sem.size {
		return leash.Grant{Remaining: earliest(st.sem.permits).Sub(now)}, nil
	}
	st.fence++
	st.sem.permits[req.Owner] = now.Add(req.Lease)
	return leash.Grant{Acquired: true, Fence: st.fence, Holds: 1}, nil
}

// Renew implements [leash.Store].
func (s *Store) Renew(ctx context.Context, reqs []leash.Request) []leash.RenewResult {
	res := make([]leash.RenewResult, len(reqs))
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
		st := s.get(r.Name, now)
		var leases map[string]time.Time
		switch r.Kind {
		case leash.KindRead:
			leases = st.readers
		case leash.KindPermit:
			if st.sem != nil {
				leases = st.sem.permits
			}
		default:
			switch {
			case st.excl == nil && len(st.readers) == 0:
				res[i].Status = leash.RenewGone
			case st.excl == nil || st.excl.owner != r.Owner:
				res[i].Status = leash.RenewTaken
			default:
				st.excl.expires = now.Add(r.Lease)
				res[i].Status = leash.Renewed
			}
			continue
		}
		if _, ok := leases[r.Owner]; ok {
			leases[r.Owner] = now.Add(r.Lease)
			res[i].Status = leash.Renewed
		} else {
			res[i].Status = leash.RenewGone
		}
	}
	return res
}

// Release implements [leash.Store].
func (s *Store) Release(ctx context.Context, req leash.Request, mode leash.ReleaseMode) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	now := time.Now()
	s.mu.Lock()
	st := s.get(req.Name, now)
	var notes []note
	freed := false
	switch {
	case mode == leash.Withdraw:
		wasHead := len(st.queue) > 0 && st.queue[0].owner == req.Owner
		st.queue = slices.DeleteFunc(st.queue, func(p place) bool { return p.owner == req.Owner })
		if wasHead && st.blocked().IsZero() && len(st.queue) > 0 {
			notes = append(notes, note{leash.KindFair, st.queue[0].owner})
		}
		if _, ok := st.writers[req.Owner]; ok {
			delete(st.writers, req.Owner)
			if len(st.writers) == 0 && st.excl == nil {
				notes = append(notes, note{leash.KindWrite, leash.WakeReaders})
			}
		}
	case req.Kind == leash.KindRead:
		if _, ok := st.readers[req.Owner]; !ok {
			s.mu.Unlock()
			return false, notHeld(req.Name)
		}
		delete(st.readers, req.Owner)
		if freed = len(st.readers) == 0; freed && len(st.writers) > 0 {
			notes = append(notes, note{leash.KindWrite, leash.WakeWriter})
		}
	case req.Kind == leash.KindPermit:
		if st.sem == nil {
			s.mu.Unlock()
			return false, notHeld(req.Name)
		}
		if _, ok := st.sem.permits[req.Owner]; !ok {
			s.mu.Unlock()
			return false, notHeld(req.Name)
		}
		delete(st.sem.permits, req.Owner)
		freed = true
		notes = append(notes, note{leash.KindPermit, leash.WakeOne})
	default:
		e := st.excl
		if e == nil || e.owner != req.Owner {
			s.mu.Unlock()
			return false, notHeld(req.Name)
		}
		if mode == leash.ReleaseOne && e.holds > 1 {
			e.holds--
			e.expires = now.Add(req.Lease)
			s.mu.Unlock()
			return false, nil
		}
		st.excl, freed = nil, true
		notes = append(notes, st.freedNotes(e.write)...)
	}
	wakes := s.wakesLocked(req.Name, notes)
	s.mu.Unlock()
	for _, w := range wakes {
		w()
	}
	return freed, nil
}

// freedNotes are the notifications due when the exclusive lock is freed.
func (st *name) freedNotes(write bool) []note {
	switch {
	case write && len(st.writers) > 0:
		return []note{{leash.KindWrite, leash.WakeWriter}}
	case write:
		return []note{{leash.KindWrite, leash.WakeReaders}}
	case len(st.queue) > 0:
		return []note{{leash.KindFair, st.queue[0].owner}}
	}
	return []note{{leash.KindMutex, leash.WakeOne}}
}

// A note is a notification to deliver to the watchers of one kind.
type note struct {
	kind leash.Kind
	msg  string
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

func watchKeyOf(kind leash.Kind, n string) watchKey {
	if kind == leash.KindRead {
		kind = leash.KindWrite
	}
	return watchKey{kind, n}
}

// Watch implements [leash.Store].
func (s *Store) Watch(ctx context.Context, kind leash.Kind, n string, wake func(string)) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k := watchKeyOf(kind, n)
	w := &watch{wake: wake}
	s.mu.Lock()
	s.watchers[k] = append(s.watchers[k], w)
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			ws := slices.DeleteFunc(s.watchers[k], func(x *watch) bool { return x == w })
			if len(ws) == 0 {
				delete(s.watchers, k)
			} else {
				s.watchers[k] = ws
			}
		})
	}, nil
}

// Inspect implements [leash.Store].
func (s *Store) Inspect(ctx context.Context, n string) (leash.Info, error) {
	if err := ctx.Err(); err != nil {
		return leash.Info{}, err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.get(n, now)
	info := leash.Info{Name: n, Remaining: -1, Fence: st.fence, Queued: len(st.queue) + len(st.writers)}
	for _, kind := range []leash.Kind{leash.KindMutex, leash.KindFair, leash.KindWrite, leash.KindPermit} {
		info.Waiters += len(s.watchers[watchKey{kind, n}])
	}
	leases := func(kind leash.Kind, m map[string]time.Time) {
		for _, o := range slices.Sorted(maps.Keys(m)) {
			info.Owners = append(info.Owners, leash.OwnerHolds{Owner: o, Holds: 1, Kind: kind, Remaining: m[o].Sub(now)})
		}
		if len(m) > 0 {
			info.Remaining = max(info.Remaining, latest(m).Sub(now))
		}
	}
	switch {
	case st.sem != nil:
		info.Kind, info.Permits = leash.KindPermit, st.sem.size
		leases(leash.KindPermit, st.sem.permits)
	default:
		if e := st.excl; e != nil {
			info.Kind = leash.KindMutex
			if e.write {
				info.Kind = leash.KindWrite
			}
			info.Owners = append(info.Owners, leash.OwnerHolds{Owner: e.owner, Holds: e.holds, Kind: info.Kind, Remaining: -1})
			info.Remaining = e.expires.Sub(now)
		} else if len(st.readers) > 0 {
			info.Kind = leash.KindRead
		}
		leases(leash.KindRead, st.readers)
	}
	info.Held = len(info.Owners) > 0
	return info, nil
}

// ForceRelease implements [leash.Store].
func (s *Store) ForceRelease(ctx context.Context, n string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	st := s.get(n, time.Now())
	any := st.excl != nil || len(st.readers) > 0 || len(st.writers) > 0 || len(st.queue) > 0 ||
		(st.sem != nil && len(st.sem.permits) > 0)
	st.excl, st.queue = nil, nil
	clear(st.readers)
	clear(st.writers)
	if st.sem != nil {
		clear(st.sem.permits)
	}
	var wakes []func()
	if any {
		wakes = s.wakesLocked(n, []note{{leash.KindMutex, leash.WakeAll}, {leash.KindFair, leash.WakeAll},
			{leash.KindWrite, leash.WakeAll}, {leash.KindPermit, leash.WakeAll}})
	}
	s.mu.Unlock()
	for _, w := range wakes {
		w()
	}
	return any, nil
}

// SetPermits implements [leash.PermitSetter].
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
	wakes := s.wakesLocked(n, []note{{leash.KindPermit, leash.WakeAll}})
	s.mu.Unlock()
	for _, w := range wakes {
		w()
	}
	return nil
}

// Partition implements [leash.MultiStore]: every name can be taken together.
func (s *Store) Partition(names []string) [][]string {
	return [][]string{slices.Sorted(slices.Values(names))}
}

// AcquireMany implements [leash.MultiStore].
func (s *Store) AcquireMany(ctx context.Context, reqs []leash.Request) (leash.MultiGrant, error) {
	if err := ctx.Err(); err != nil {
		return leash.MultiGrant{}, err
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
			return leash.MultiGrant{}, wrongType(r.Name)
		}
		if st.excl != nil && st.excl.owner == r.Owner {
			continue
		}
		if b := st.blocked(); !b.IsZero() && (until.IsZero() || b.Before(until)) {
			until = b
		}
	}
	if !until.IsZero() {
		return leash.MultiGrant{Remaining: until.Sub(now)}, nil
	}
	mg := leash.MultiGrant{Acquired: true, Fences: make([]int64, len(reqs))}
	for i, r := range reqs {
		st := sts[i] // already pruned at now by the first loop
		if e := st.excl; e != nil {
			e.holds++
			e.expires = now.Add(r.Lease)
			mg.Fences[i] = st.fence
			continue
		}
		mg.Fences[i] = st.grant(now, r.Owner, r.Lease, false).Fence
	}
	return mg, nil
}

// PutClient implements [leash.ClientRecorder].
func (s *Store) PutClient(ctx context.Context, rec leash.ClientRecord, ttl time.Duration) error {
	rec.Locks = slices.Clone(rec.Locks)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[rec.ID] = client{rec: rec, expires: time.Now().Add(ttl)}
	return nil
}

// DeleteClient implements [leash.ClientRecorder].
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.clients, id)
	return nil
}

// GetClient implements [leash.ClientRecorder].
func (s *Store) GetClient(ctx context.Context, id string) (leash.ClientRecord, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if ok && !time.Now().Before(c.expires) {
		delete(s.clients, id)
		ok = false
	}
	if !ok {
		return leash.ClientRecord{}, false, nil
	}
	c.rec.Locks = slices.Clone(c.rec.Locks)
	return c.rec, true, nil
}
