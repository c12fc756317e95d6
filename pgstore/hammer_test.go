package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/pgstore"
)

// history checks grants of one name as the holders see them: no two
// exclusive holders at once, no reader beside a writer, and every token
// greater than every token granted before.
type history struct {
	mu            sync.Mutex
	exclusive     int
	readers       int
	last          int64 // the greatest token recorded
	lastExclusive int64 // the last exclusive grant's token
	violations    []string
}

// granted records a grant, before its holder releases it.
func (h *history) granted(kind driver.Kind, fence int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	read := kind == driver.KindRead
	switch {
	case h.exclusive > 0:
		h.violations = append(h.violations, fmt.Sprintf("%v granted (token %d) while an exclusive lock is held", kind, fence))
	case !read && h.readers > 0:
		h.violations = append(h.violations, fmt.Sprintf("%v granted (token %d) while %d readers hold", kind, fence, h.readers))
	}
	// An exclusive grant follows the release of every earlier grant, which
	// recorded before it: its token is above all. A reader's grant may
	// record after other readers' later grants (and releases), but no
	// exclusive grant can come between its grant and its record: its token
	// is above every exclusive one.
	switch {
	case !read && fence <= h.last:
		h.violations = append(h.violations, fmt.Sprintf("%v token %d after token %d", kind, fence, h.last))
	case read && fence <= h.lastExclusive:
		h.violations = append(h.violations, fmt.Sprintf("read token %d after exclusive token %d", fence, h.lastExclusive))
	}
	h.last = max(h.last, fence)
	if !read {
		h.lastExclusive = fence
	}
	if read {
		h.readers++
	} else {
		h.exclusive++
	}
}

// released records the end of a grant, before its release is sent.
func (h *history) released(kind driver.Kind) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if kind == driver.KindRead {
		h.readers--
	} else {
		h.exclusive--
	}
}

// storesOnPools returns four stores on the test's tables, each on a pool of
// its own (so on connections of its own), closed at cleanup.
func storesOnPools(t *testing.T) []*pgstore.Store {
	t.Helper()
	stores := []*pgstore.Store{newStore(t, nil)}
	for range 3 {
		s := pgstore.New(newPool(t, sharedPostgres(t).URL()), &pgstore.Options{Table: tableName(t)})
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	return stores
}

// hammer runs work on workers goroutines at once, worker w on stores[w %
// len(stores)], and returns the errors they reported.
func hammer(stores []*pgstore.Store, workers int, work func(w int, s *pgstore.Store, report func(error))) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	report := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for w := range workers {
		wg.Go(func() { work(w, stores[w%len(stores)], report) })
	}
	wg.Wait()
	return errs
}

// acquireEventually tries r until it is granted, with a short random pause
// between tries.
func acquireEventually(ctx context.Context, s *pgstore.Store, r driver.Request) (driver.Grant, error) {
	for {
		g, err := s.Acquire(ctx, r)
		if err != nil || g.Acquired {
			return g, err
		}
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
	}
}

// isDeadlock reports whether err is PostgreSQL's deadlock_detected (or a
// lock timeout): what the fixed lock order must rule out.
func isDeadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "55P03")
}

// TestHammerOneName takes one name from many goroutines on several pools
// (connections), with every lock kind but permits, renewing and retrying
// as the core does: no statement may fail (a deadlock would), no two
// holders may overlap, and tokens only grow.
func TestHammerOneName(t *testing.T) {
	const workers, grants = 24, 15
	var h history
	kinds := []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindRead, driver.KindWrite}
	errs := hammer(storesOnPools(t), workers, func(w int, s *pgstore.Store, report func(error)) {
		ctx := context.Background()
		for g := range grants {
			kind := kinds[(w+g)%len(kinds)]
			r := driver.Request{Kind: kind, Name: "hammer", Owner: fmt.Sprintf("00000000-0000-4000-8000-%012d:%d", w, g),
				Lease: 10 * time.Second, Wait: 2 * time.Second}
			gr, err := acquireEventually(ctx, s, r)
			if err != nil {
				report(fmt.Errorf("acquire %v: %w", kind, err))
				return
			}
			h.granted(kind, gr.Fence)
			if g2, err := s.Acquire(ctx, r); err != nil || !g2.Acquired || g2.Fence != gr.Fence {
				report(fmt.Errorf("retried %v acquire = %+v, %v; want the same token %d", kind, g2, err, gr.Fence))
			}
			if res := s.Renew(ctx, []driver.Request{r}); res[0].Err != nil || res[0].Status != driver.Renewed {
				report(fmt.Errorf("renew %v = %+v", kind, res[0]))
			}
			h.released(kind)
			if err := s.Release(ctx, r); err != nil {
				report(fmt.Errorf("release %v: %w", kind, err))
				return
			}
		}
	})
	for _, err := range errs {
		if isDeadlock(err) {
			t.Errorf("deadlock or lock timeout: %v", err)
		} else {
			t.Error(err)
		}
	}
	for _, v := range h.violations {
		t.Error(v)
	}
}

// TestHammerManyNames runs, at once and on several pools, multi-name
// acquires of overlapping sets in random orders, renewals of every name in
// random orders, releases and force releases: the row locks are taken in
// name order everywhere, so no statement may deadlock.
func TestHammerManyNames(t *testing.T) {
	names := make([]string, 12)
	for i := range names {
		names[i] = fmt.Sprintf("many/%02d", i)
	}
	const workers, rounds = 16, 20
	errs := hammer(storesOnPools(t), workers, func(w int, s *pgstore.Store, report func(error)) {
		ctx := context.Background()
		for g := range rounds {
			owner := fmt.Sprintf("00000000-0000-4000-8000-%012d:%d", w, g)
			reqs := make([]driver.Request, len(names))
			for i, n := range names {
				reqs[i] = driver.Request{Name: n, Owner: owner, Lease: 5 * time.Second}
			}
			rand.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
			switch w % 3 {
			case 0: // multi-name acquire of a few, and their releases
				some := reqs[:2+rand.IntN(4)]
				mg, err := s.AcquireMany(ctx, some)
				if err != nil {
					report(err)
					continue
				}
				if mg.Acquired {
					for _, r := range some {
						if err := s.Release(ctx, r); err != nil {
							report(err)
						}
					}
				}
			case 1: // renewals of every name, held or not, in random order
				for _, res := range s.Renew(ctx, reqs) {
					if res.Err != nil {
						report(res.Err)
					}
				}
			case 2: // single acquires, releases and the odd force release
				if gr, err := s.Acquire(ctx, reqs[0]); err != nil {
					report(err)
				} else if gr.Acquired {
					if err := s.Release(ctx, reqs[0]); err != nil {
						report(err)
					}
				}
				if g%7 == 0 {
					if _, err := s.ForceRelease(ctx, reqs[1].Name); err != nil {
						report(err)
					}
				}
			}
		}
	})
	for _, err := range errs {
		switch {
		case isDeadlock(err):
			t.Errorf("deadlock or lock timeout: %v", err)
		case !errors.Is(err, driver.ErrNotHeld): // a force release took it
			t.Error(err)
		}
	}
}

// TestHammerSemaphore takes permits of one semaphore from many goroutines
// on several pools, and resizes it meanwhile: never more holders than the
// largest count it had, every token unique, and no statement fails.
func TestHammerSemaphore(t *testing.T) {
	const workers, grants, most = 16, 12, 3
	var (
		mu      sync.Mutex
		holding int
		tokens  = map[int64]bool{}
	)
	errs := hammer(storesOnPools(t), workers, func(w int, s *pgstore.Store, report func(error)) {
		ctx := context.Background()
		for g := range grants {
			if w == 0 && g%4 == 0 { // resize between 2 and the most
				if err := s.SetPermits(ctx, "sem", 2+g%2); err != nil {
					report(err)
				}
			}
			r := driver.Request{Kind: driver.KindPermit, Name: "sem", Owner: fmt.Sprintf("00000000-0000-4000-8000-%012d:%d", w, g),
				Lease: 10 * time.Second, Permits: most}
			gr, err := acquireEventually(ctx, s, r)
			if err != nil {
				report(err)
				return
			}
			mu.Lock()
			holding++
			if holding > most || tokens[gr.Fence] {
				report(fmt.Errorf("%d permits held at once (most %d), token %d seen before: %v", holding, most, gr.Fence, tokens[gr.Fence]))
			}
			tokens[gr.Fence] = true
			mu.Unlock()
			if res := s.Renew(ctx, []driver.Request{r}); res[0].Err != nil || res[0].Status != driver.Renewed {
				report(fmt.Errorf("renew of a permit = %+v", res[0]))
			}
			mu.Lock()
			holding--
			mu.Unlock()
			if err := s.Release(ctx, r); err != nil {
				report(err)
			}
		}
	})
	for _, err := range errs {
		t.Error(err)
	}
}
