package mysqlstore_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/mysqlstore"
)

// The hammer tests' size: stores × workers goroutines, each taking rounds
// turns.
const (
	stores  = 4
	workers = 6 // per store
	rounds  = 40
)

// TestHammer takes one name from many goroutines on four Stores, each on a
// *sql.DB of its own as four processes would be, mixed with multi-name
// acquires of the name beside fresh names (inserts into the same index
// range) and batched renewals. It asserts no error at all (InnoDB's
// deadlock, 1213, and lock wait timeout, 1205, above all), never two holders
// at once, and tokens strictly increasing from grant to grant.
func TestHammer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	const lease = 30 * time.Second
	ss := hammerStores(t, stores)
	name := "hammer/" + t.Name()
	var (
		mu       sync.Mutex
		holding  bool
		last     int64
		grants   atomic.Int64
		refusals atomic.Int64
		wg       sync.WaitGroup
		errs     = make(chan error, stores*workers)
	)
	// granted checks a grant of name: nobody else holds it, and its token
	// is above every earlier one.
	granted := func(fence int64) error {
		mu.Lock()
		defer mu.Unlock()
		if holding {
			return fmt.Errorf("granted with fence %d while another holder holds it", fence)
		}
		if fence <= last {
			return fmt.Errorf("granted fence %d after %d", fence, last)
		}
		holding, last = true, fence
		grants.Add(1)
		return nil
	}
	released := func() {
		mu.Lock()
		holding = false
		mu.Unlock()
	}
	for si, s := range ss {
		for w := range workers {
			// Owner: this test. Stops after rounds rounds, or at the first error.
			wg.Go(func() {
				ctx := bg(t)
				for i := range rounds {
					owner := fmt.Sprintf("%08d-0000-4000-8000-%012d:%d", si, w, i)
					fresh := fmt.Sprintf("hammer/%s/%d/%d/%d", t.Name(), si, w, i)
					var (
						ok    bool
						fence int64
						held  []driver.Request
					)
					if i%3 == 0 {
						reqs := []driver.Request{
							{Name: fresh + "/a", Owner: owner, Lease: lease},
							{Name: name, Owner: owner, Lease: lease},
							{Name: fresh, Owner: owner, Lease: lease},
						}
						g, err := s.AcquireMany(ctx, reqs)
						if err != nil {
							errs <- fmt.Errorf("AcquireMany: %w", err)
							return
						}
						if ok = g.Acquired; ok {
							fence, held = g.Fences[1], reqs
						}
					} else {
						if _, err := s.Acquire(ctx, driver.Request{Name: fresh, Owner: owner, Lease: lease}); err != nil {
							errs <- fmt.Errorf("Acquire fresh: %w", err)
							return
						}
						r := driver.Request{Name: name, Owner: owner, Lease: lease}
						g, err := s.Acquire(ctx, r)
						if err != nil {
							errs <- fmt.Errorf("Acquire: %w", err)
							return
						}
						ok, fence = g.Acquired, g.Fence
						held = []driver.Request{{Name: fresh, Owner: owner, Lease: lease}}
						if ok {
							held = append(held, r)
						}
					}
					if ok {
						if err := granted(fence); err != nil {
							errs <- err
							return
						}
					} else {
						refusals.Add(1)
					}
					for _, res := range s.Renew(ctx, held) {
						if res.Err != nil || res.Status != driver.Renewed {
							errs <- fmt.Errorf("Renew = status %d, %v; want renewed", res.Status, res.Err)
							return
						}
					}
					for _, r := range held {
						if r.Name == name {
							released()
						}
						if err := s.Release(ctx, r); err != nil {
							errs <- fmt.Errorf("Release %q: %w", r.Name, err)
							return
						}
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	reportErrors(t, ss[0], errs)
	if grants.Load() == 0 || refusals.Load() == 0 {
		t.Errorf("%d grants and %d refusals: the hammer did not contend", grants.Load(), refusals.Load())
	}
	t.Logf("%d grants, %d refusals of one name; %d stores × %d workers × %d rounds", grants.Load(), refusals.Load(), stores, workers, rounds)
}

// TestHammerKinds takes every kind of lock on a few adjacent names (so that
// their holder rows share index gaps) from many goroutines on four Stores:
// readers, writers that queue, fair waiters that queue, mutexes, and
// permits of semaphores on names beside them. It asserts no error (no
// deadlock), and that no grant breaks its kind's exclusion.
func TestHammerKinds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	const (
		names   = 3
		permits = 2
		lease   = 30 * time.Second
	)
	ss := hammerStores(t, stores)
	type state struct{ excl, shared int }
	var (
		mu   sync.Mutex
		held = map[string]*state{}
		wg   sync.WaitGroup
		errs = make(chan error, stores*workers)
	)
	base := "hammerkinds/" + t.Name() + "/"
	for i := range names {
		held[fmt.Sprintf("%s%d", base, i)] = &state{}
		held[fmt.Sprintf("%s%ds", base, i)] = &state{}
	}
	// take checks a grant of kind on name and records it.
	take := func(kind driver.Kind, name string) error {
		mu.Lock()
		defer mu.Unlock()
		st := held[name]
		switch kind {
		case driver.KindRead:
			if st.excl > 0 {
				return fmt.Errorf("reader granted %q while an exclusive holder holds it", name)
			}
			st.shared++
		case driver.KindPermit:
			if st.shared >= permits {
				return fmt.Errorf("permit granted on %q with %d of %d held", name, st.shared, permits)
			}
			st.shared++
		default:
			if st.excl > 0 || st.shared > 0 {
				return fmt.Errorf("%v granted %q while held (%d exclusive, %d readers)", kind, name, st.excl, st.shared)
			}
			st.excl++
		}
		return nil
	}
	drop := func(kind driver.Kind, name string) {
		mu.Lock()
		defer mu.Unlock()
		if kind == driver.KindRead || kind == driver.KindPermit {
			held[name].shared--
		} else {
			held[name].excl--
		}
	}
	kinds := []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindRead, driver.KindWrite, driver.KindPermit, driver.KindRead}
	for si, s := range ss {
		for w := range workers {
			// Owner: this test. Stops after rounds rounds, or at the first error.
			wg.Go(func() {
				ctx := bg(t)
				for i := range rounds {
					kind := kinds[(si*workers+w+i)%len(kinds)]
					name := fmt.Sprintf("%s%d", base, (w+i)%names)
					if kind == driver.KindPermit {
						name += "s"
					}
					r := driver.Request{Kind: kind, Name: name, Owner: fmt.Sprintf("%08d-0000-4000-8000-%012d:%d", si, w, i),
						Lease: lease, Wait: lease, Permits: permits}
					if kind != driver.KindFair && kind != driver.KindWrite {
						r.Wait = 0
					}
					g, err := s.Acquire(ctx, r)
					if err != nil {
						errs <- fmt.Errorf("Acquire %v: %w", kind, err)
						return
					}
					if r.Wait > 0 && !g.Acquired {
						if err := s.Withdraw(ctx, r); err != nil {
							errs <- fmt.Errorf("Withdraw %v: %w", kind, err)
							return
						}
					}
					if !g.Acquired {
						continue
					}
					if err := take(kind, name); err != nil {
						errs <- err
						return
					}
					if res := s.Renew(ctx, []driver.Request{r}); res[0].Err != nil || res[0].Status != driver.Renewed {
						errs <- fmt.Errorf("Renew %v = %+v; want renewed", kind, res[0])
						return
					}
					drop(kind, name)
					if err := s.Release(ctx, r); err != nil {
						errs <- fmt.Errorf("Release %v: %w", kind, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	reportErrors(t, ss[0], errs)
}

// lastDeadlock returns InnoDB's report of the last deadlock it detected.
func lastDeadlock(t *testing.T, s *mysqlstore.Store) string {
	var typ, name, status string
	if err := s.DB().QueryRowContext(bg(t), "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		return "; SHOW ENGINE INNODB STATUS: " + err.Error()
	}
	if i := strings.Index(status, "LATEST DETECTED DEADLOCK"); i >= 0 {
		status = status[i:]
		if j := strings.Index(status, "\nTRANSACTIONS\n"); j >= 0 {
			status = status[:j]
		}
		return "\n" + status
	}
	return ""
}

// hammerStores returns n migrated Stores on the shared server, each on a
// *sql.DB of its own, closed at cleanup.
func hammerStores(t *testing.T, n int) []*mysqlstore.Store {
	t.Helper()
	srv := sharedServer(t)
	var ss []*mysqlstore.Store
	for range n {
		s := mysqlstore.New(openDB(t, srv, testDB, ""), nil)
		if err := s.Migrate(bg(t)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		ss = append(ss, s)
	}
	return ss
}

// reportErrors fails the test with every error of errs, with InnoDB's report
// of the last deadlock (read through s) for a deadlock or lock wait timeout.
func reportErrors(t *testing.T, s *mysqlstore.Store, errs <-chan error) {
	t.Helper()
	for err := range errs {
		var me *mysql.MySQLError
		if errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) {
			t.Errorf("InnoDB error %d: %v%s", me.Number, err, lastDeadlock(t, s))
			continue
		}
		t.Error(err)
	}
}
