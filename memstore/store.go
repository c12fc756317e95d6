// Package memstore is an in-process [leash.Store]: locks live in the memory
// of one process. Use it in unit tests of code that takes leash locks, and to
// coordinate goroutines of a single process with the full leash contract
// (leases, re-entry, fencing, lost-lease signals). It excludes nothing across
// processes.
//
// A Store passes the same conformance suite (package storetest) as the
// server-backed stores. Its lease clock is the process's monotonic clock, so
// it works inside testing/synctest bubbles.
package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leash-go/leash"
)

// Store is an in-memory lock store. The zero value is not usable; call New.
// A Store is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	locks    map[string]*lock
	fences   map[string]int64
	watchers map[string][]*watch
}

type lock struct {
	owner   string
	holds   int
	expires time.Time
}

type watch struct{ wake func() }

// New returns an empty Store.
func New() *Store {
	return &Store{
		locks:    make(map[string]*lock),
		fences:   make(map[string]int64),
		watchers: make(map[string][]*watch),
	}
}

var _ leash.Store = (*Store)(nil)

// live returns the lock called name if it exists and has not expired. The
// caller holds s.mu.
func (s *Store) live(name string, now time.Time) *lock {
	l := s.locks[name]
	if l != nil && !now.Before(l.expires) {
		delete(s.locks, name)
		return nil
	}
	return l
}

// Acquire implements [leash.Store].
func (s *Store) Acquire(ctx context.Context, req leash.Request) (leash.Grant, error) {
	if err := ctx.Err(); err != nil {
		return leash.Grant{}, err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.live(req.Name, now)
	switch {
	case l == nil:
		f := s.fences[req.Name] + 1
		s.fences[req.Name] = f
		s.locks[req.Name] = &lock{owner: req.Owner, holds: 1, expires: now.Add(req.Lease)}
		return leash.Grant{Acquired: true, Fence: f, Holds: 1}, nil
	case l.owner == req.Owner:
		l.holds++
		l.expires = now.Add(req.Lease)
		return leash.Grant{Acquired: true, Fence: s.fences[req.Name], Holds: l.holds}, nil
	default:
		return leash.Grant{Remaining: l.expires.Sub(now)}, nil
	}
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
		l := s.live(r.Name, now)
		switch {
		case l == nil:
			res[i].Status = leash.RenewGone
		case l.owner != r.Owner:
			res[i].Status = leash.RenewTaken
		default:
			l.expires = now.Add(r.Lease)
			res[i].Status = leash.Renewed
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
	l := s.live(req.Name, now)
	if l == nil || l.owner != req.Owner {
		s.mu.Unlock()
		return false, fmt.Errorf("memstore: release %q: %w", req.Name, leash.ErrNotHeld)
	}
	if mode == leash.ReleaseOne && l.holds > 1 {
		l.holds--
		l.expires = now.Add(req.Lease)
		s.mu.Unlock()
		return false, nil
	}
	delete(s.locks, req.Name)
	wakes := s.wakesLocked(req.Name)
	s.mu.Unlock()
	for _, w := range wakes {
		w()
	}
	return true, nil
}

// wakesLocked returns the wake functions of name's watchers.
func (s *Store) wakesLocked(name string) []func() {
	ws := s.watchers[name]
	wakes := make([]func(), len(ws))
	for i, w := range ws {
		wakes[i] = w.wake
	}
	return wakes
}

// Watch implements [leash.Store].
func (s *Store) Watch(ctx context.Context, name string, wake func()) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &watch{wake: wake}
	s.mu.Lock()
	s.watchers[name] = append(s.watchers[name], w)
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			ws := s.watchers[name]
			if i := slices.Index(ws, w); i >= 0 {
				ws = slices.Delete(ws, i, i+1)
			}
			if len(ws) == 0 {
				delete(s.watchers, name)
			} else {
				s.watchers[name] = ws
			}
		})
	}, nil
}

// Inspect implements [leash.Store].
func (s *Store) Inspect(ctx context.Context, name string) (leash.Info, error) {
	if err := ctx.Err(); err != nil {
		return leash.Info{}, err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	info := leash.Info{Name: name, Remaining: -1, Fence: s.fences[name], Waiters: len(s.watchers[name])}
	if l := s.live(name, now); l != nil {
		info.Held = true
		info.Owners = []leash.OwnerHolds{{Owner: l.owner, Holds: l.holds}}
		info.Remaining = l.expires.Sub(now)
	}
	return info, nil
}

// ForceRelease implements [leash.Store].
func (s *Store) ForceRelease(ctx context.Context, name string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	l := s.live(name, time.Now())
	if l == nil {
		s.mu.Unlock()
		return false, nil
	}
	delete(s.locks, name)
	wakes := s.wakesLocked(name)
	s.mu.Unlock()
	for _, w := range wakes {
		w()
	}
	return true, nil
}
