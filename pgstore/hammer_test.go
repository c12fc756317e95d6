package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
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
	mu         sync.Mutex
	exclusive  int
	readers    int
	last       int64 // the greatest token recorded
	violations []string
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
	// Readers granted together may record out of order; everything else
	// follows a release that recorded before it.
	if fence <= h.last && !(read && h.readers > 0) {
		h.violations = append(h.violations, fmt.Sprintf("%v token %d after token %d", kind, fence, h.last))
	}
	h.last = max(h.last, fence)
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
	srv := sharedPostgres(t)
	first := newStore(t, nil)
	opts := &pgstore.Options{Table: tableName(t)}
	stores := []*pgstore.Store{first}
	for range 3 {
		s := pgstore.New(newPool(t, srv.URL()), opts)
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	const (
		workers = 24
		grants  = 15 // per worker
	)
	name := "hammer"
	var h history
	kinds := []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindRead, driver.KindWrite}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			ctx := context.Background()
			for g := range grants {
				kind := kinds[(w+g)%len(kinds)]
				r := driver.Request{Kind: kind, Name: name, Owner: fmt.Sprintf("00000000-0000-4000-8000-%012d:%d", w, g),
					Lease: 10 * time.Second, Wait: 2 * time.Second}
				var fence int64
				for {
					gr, err := s.Acquire(ctx, r)
					if err != nil {
						errs <- fmt.Errorf("acquire %v: %w", kind, err)
						return
					}
					if gr.Acquired {
						fence = gr.Fence
						break
					}
					time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
				}
				h.granted(kind, fence)
				if g2, err := s.Acquire(ctx, r); err != nil || !g2.Acquired || g2.Fence != fence {
					errs <- fmt.Errorf("retried %v acquire = %+v, %v; want the same token %d", kind, g2, err, fence)
				}
				if res := s.Renew(ctx, []driver.Request{r}); res[0].Err != nil || res[0].Status != driver.Renewed {
					errs <- fmt.Errorf("renew %v = %+v", kind, res[0])
				}
				h.released(kind)
				if err := s.Release(ctx, r); err != nil {
					errs <- fmt.Errorf("release %v: %w", kind, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
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
	srv := sharedPostgres(t)
	first := newStore(t, nil)
	opts := &pgstore.Options{Table: tableName(t)}
	stores := []*pgstore.Store{first}
	for range 3 {
		s := pgstore.New(newPool(t, srv.URL()), opts)
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	names := make([]string, 12)
	for i := range names {
		names[i] = fmt.Sprintf("many/%02d", i)
	}
	const workers, rounds = 16, 20
	errs := make(chan error, workers*rounds)
	var wg sync.WaitGroup
	for w := range workers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			ctx := context.Background()
			for g := range rounds {
				owner := fmt.Sprintf("00000000-0000-4000-8000-%012d:%d", w, g)
				pick := slices.Clone(names)
				rand.Shuffle(len(pick), func(i, j int) { pick[i], pick[j] = pick[j], pick[i] })
				pick = pick[:2+rand.IntN(4)]
				reqs := make([]driver.Request, len(pick))
				for i, n := range pick {
					reqs[i] = driver.Request{Name: n, Owner: owner, Lease: 5 * time.Second}
				}
				switch w % 3 {
				case 0: // multi-name acquire and release
					mg, err := s.AcquireMany(ctx, reqs)
					if err != nil {
						errs <- err
						continue
					}
					if mg.Acquired {
						for _, r := range reqs {
							if err := s.Release(ctx, r); err != nil {
								errs <- err
							}
						}
					}
				case 1: // renewals of every name, held or not, in random order
					all := make([]driver.Request, len(names))
					for i, n := range slices.Clone(names) {
						all[i] = driver.Request{Name: n, Owner: owner, Lease: 5 * time.Second}
					}
					rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
					for _, res := range s.Renew(ctx, all) {
						if res.Err != nil {
							errs <- res.Err
						}
					}
				case 2: // single acquires, releases and the odd force release
					r := reqs[0]
					if g, err := s.Acquire(ctx, r); err != nil {
						errs <- err
					} else if g.Acquired {
						if err := s.Release(ctx, r); err != nil {
							errs <- err
						}
					}
					if g%7 == 0 {
						if _, err := s.ForceRelease(ctx, reqs[1].Name); err != nil {
							errs <- err
						}
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		switch {
		case isDeadlock(err):
			t.Errorf("deadlock or lock timeout: %v", err)
		case !errors.Is(err, driver.ErrNotHeld): // a force release took it
			t.Error(err)
		}
	}
}
