package leash_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/storetest"
)

// minimalStore is the smallest store leash runs on, and the template for a
// new one: the required core of driver.Store (Acquire, Renew and Release of
// KindMutex locks) over a map guarded by a mutex. Its clock is its own
// time.Now, as a server's clock would be.
//
// A server-backed store does the same steps, each in one atomic operation on
// its server: a Lua script on Redis, one SQL statement, an etcd transaction.
// It need not count re-entries, keep timers or know goroutines: the core
// does all of that. Without driver.Watcher, waiters poll; without the other
// capabilities, the core refuses FairMutex, RWMutex, Semaphore and the
// operator's calls before any round trip, naming the store (String).
type minimalStore struct {
	mu    sync.Mutex
	locks map[string]*minimalLock
}

// minimalLock is one name: its holder, if any, and its fencing counter.
type minimalLock struct {
	owner   string    // the holder's owner string; "" when free
	expires time.Time // when the holder's lease ends, by the store's clock
	fence   int64     // the last token granted: kept while free, so tokens only grow
}

func newMinimalStore() *minimalStore {
	return &minimalStore{locks: make(map[string]*minimalLock)}
}

// String names the store in the core's messages (see driver.Describe).
func (s *minimalStore) String() string { return "minimal store" }

// lock returns the state of name, its lease ended if it has run out. The
// caller holds s.mu.
func (s *minimalStore) lock(name string, now time.Time) *minimalLock {
	l := s.locks[name]
	if l == nil {
		l = &minimalLock{}
		s.locks[name] = l
	}
	if l.owner != "" && !now.Before(l.expires) {
		l.owner = ""
	}
	return l
}

// Acquire grants a free lock with a new token, grants a retry by the holder
// with the same token, and refuses anyone else with the remaining lease.
func (s *minimalStore) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lock(req.Name, now)
	switch l.owner {
	case "": // free: a new tenure
		l.owner = req.Owner
		l.fence++
	case req.Owner: // a retry of a granted acquire: the same tenure
	default:
		return driver.Grant{Remaining: l.expires.Sub(now)}, nil
	}
	l.expires = now.Add(req.Lease)
	return driver.Grant{Acquired: true, Fence: l.fence}, nil
}

// Renew extends each lock its owner still holds, and says per lock why not.
func (s *minimalStore) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
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
		switch l := s.lock(r.Name, now); l.owner {
		case "":
			res[i].Status = driver.RenewGone
		case r.Owner:
			l.expires = now.Add(r.Lease)
			res[i].Status = driver.Renewed
		default:
			res[i].Status = driver.RenewTaken
		}
	}
	return res
}

// Release frees the lock for its owner only.
func (s *minimalStore) Release(ctx context.Context, req driver.Request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lock(req.Name, time.Now())
	if l.owner == "" || l.owner != req.Owner {
		return fmt.Errorf("minimal store: release %q: %w", req.Name, driver.ErrNotHeld)
	}
	l.owner = ""
	return nil
}

// TestMinimalStoreConformance shows that the required core alone passes the
// conformance suite's required section; Run logs every other section as not
// run, naming the capability the store lacks.
func TestMinimalStoreConformance(t *testing.T) {
	s := newMinimalStore()
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}
