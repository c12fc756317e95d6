package leash_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
)

// TestFairMutexServesArrivalOrder also counts the round trips of the
// hand-offs: with the store handing each lock to the head in its release
// (handoff.go), the woken waiter sends no acquire at all; without, one.
func TestFairMutexServesArrivalOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handoff bool
		perHand int64 // acquire attempts per hand-off
	}{{"release hands off", true, 0}, {"waiter acquires", false, 1}} {
		t.Run(tc.name, func(t *testing.T) { fairArrivalOrder(t, tc.handoff, tc.perHand) })
	}
}

func fairArrivalOrder(t *testing.T, handoff bool, perHand int64) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		holder := newClient(t, s, nil)
		defer holder.Close()
		leash.SetHandoff(holder, handoff)
		h := mustLock(t, holder.FairMutex("fifo", nil), context.Background())
		const n = 6
		var (
			mu    sync.Mutex
			order []int
			wg    sync.WaitGroup
		)
		for i := range n {
			c := newClient(t, s, nil) // one client per waiter: the release reaches all of them
			defer c.Close()
			leash.SetHandoff(c, handoff)
			wg.Go(func() {
				h, err := c.FairMutex("fifo", nil).Lock(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				_ = h.Unlock(context.Background())
			})
			synctest.Wait() // waiter i is queued before waiter i+1 arrives
		}
		before := s.acquires.Load()
		mustUnlock(t, h)
		wg.Wait()
		for i, got := range order {
			if got != i {
				t.Fatalf("grant order = %v, want arrival order 0..%d", order, n-1)
			}
		}
		// Each release woke only the head: one attempt per grant, or none
		// when the release granted it.
		if got := s.acquires.Load() - before; got != n*perHand {
			t.Errorf("acquire attempts for %d hand-offs = %d, want %d (no herd)", n, got, n*perHand)
		}
	})
}

func TestFairMutexWaiterThatGivesUpLeavesAtOnce(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		m := c.FairMutex("quit", nil)
		h := mustLock(t, m, context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		quit := make(chan error, 1)
		go func() {
			_, err := m.Lock(ctx)
			quit <- err
		}()
		synctest.Wait()
		got := grantedAt(t, m, context.Background())
		synctest.Wait()
		if info, _ := s.Inspect(context.Background(), "quit"); info.Queued != 2 {
			t.Fatalf("queued = %d, want 2", info.Queued)
		}
		cancel()
		if err := <-quit; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Lock = %v", err)
		}
		synctest.Wait()
		if info, _ := s.Inspect(context.Background(), "quit"); info.Queued != 1 {
			t.Errorf("queued after the head gave up = %d, want 1", info.Queued)
		}
		released := time.Now()
		mustUnlock(t, h)
		if at := <-got; at != released {
			t.Errorf("the remaining waiter got the lock %v after the release, want at once", at.Sub(released))
		}
	})
}

func TestFairMutexDeadWaiterBlocksOneQueueLease(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		q := &leash.QueueOptions{QueueLease: 2 * time.Second}
		m := c.FairMutex("dead", q)
		h := mustLock(t, m, context.Background())
		// A waiter that took a place and died: nobody renews its place.
		if _, err := s.Acquire(context.Background(), driver.Request{Kind: driver.KindFair, Name: "dead",
			Owner: "dead-client:1", Lease: time.Minute, Wait: 2 * time.Second}); err != nil {
			t.Fatal(err)
		}
		got := grantedAt(t, m, context.Background())
		synctest.Wait()
		start := time.Now()
		mustUnlock(t, h)
		if d := (<-got).Sub(start); d > 2*time.Second+100*time.Millisecond {
			t.Errorf("behind a dead waiter, got the lock after %v, want within one queue lease (2s)", d)
		}
	})
}

func TestFairMutexTryLockDoesNotQueue(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		m := c.FairMutex("try", nil)
		h := mustLock(t, m, context.Background())
		if _, err := m.TryLock(context.Background()); !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("TryLock of a held fair lock = %v", err)
		}
		if info, _ := s.Inspect(context.Background(), "try"); info.Queued != 0 {
			t.Errorf("TryLock took a place: queued = %d", info.Queued)
		}
		h2 := mustLock(t, m, h.Context()) // re-entry
		if h2.Fence() != h.Fence() {
			t.Errorf("fair re-entry fence %d, want %d", h2.Fence(), h.Fence())
		}
		mustUnlock(t, h2)
		mustUnlock(t, h)
	})
}

func TestRWMutexReadersShareAndWriterIsNotStarved(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c1, c2 := newClient(t, s, &leash.Options{Lease: time.Second}), newClient(t, s, nil)
		defer c1.Close()
		defer c2.Close()
		rw1, rw2 := c1.RWMutex("doc", nil), c2.RWMutex("doc", nil)
		r1 := mustLock(t, readLocker{rw1}, context.Background())
		r2 := mustLock(t, readLocker{rw2}, context.Background())
		if r2.Kind() != driver.KindRead || r1.Fence() == r2.Fence() {
			t.Errorf("readers: kind %v, fences %d and %d; want two read grants with their own tokens", r2.Kind(), r1.Fence(), r2.Fence())
		}
		time.Sleep(3 * time.Second) // three leases: each reader renewed by its watchdog
		wrote := lockAsync(t, rw2, context.Background())
		synctest.Wait()
		// A writer waits: a new reader must wait too.
		if _, err := rw1.TryRLock(context.Background()); !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("new reader while a writer waits = %v, want ErrNotAcquired", err)
		}
		lateReader := lockAsync(t, readLocker{rw1}, context.Background())
		synctest.Wait()
		mustUnlock(t, r1)
		synctest.Wait()
		if len(wrote) != 0 {
			t.Fatal("writer got the lock while a reader still held it")
		}
		mustUnlock(t, r2)
		w := <-wrote
		synctest.Wait()
		if len(lateReader) != 0 {
			t.Fatal("reader got in while the writer held the lock")
		}
		mustUnlock(t, w)
		r3 := <-lateReader
		mustUnlock(t, r3)
	})
}

// readLocker adapts RLock to mustLock.
type readLocker struct{ rw *leash.RWMutex }

func (r readLocker) Lock(ctx context.Context) (*leash.Hold, error) { return r.rw.RLock(ctx) }

func TestRWMutexDowngradeAndUpgrade(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c, other := newClient(t, s, nil), newClient(t, s, nil)
		defer c.Close()
		defer other.Close()
		rw := c.RWMutex("rw", nil)
		w := mustLock(t, rw, context.Background())
		w2 := mustLock(t, rw, w.Context()) // writer re-entry
		if w2.Fence() != w.Fence() {
			t.Errorf("write re-entry fence %d, want %d", w2.Fence(), w.Fence())
		}
		mustUnlock(t, w2)
		r := mustLock(t, readLocker{rw}, w.Context()) // downgrade: at once
		if r.Kind() != driver.KindRead {
			t.Fatalf("downgrade hold kind = %v", r.Kind())
		}
		// Inside the read hold, Lock re-enters the write lock it came from.
		w3 := mustLock(t, rw, r.Context())
		if w3.Fence() != w.Fence() {
			t.Errorf("write lock from inside the downgrade = fence %d, want the writer's %d", w3.Fence(), w.Fence())
		}
		mustUnlock(t, w3)
		mustUnlock(t, w)
		if _, err := other.RWMutex("rw", nil).TryLock(context.Background()); !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("writer after the downgrade = %v, want ErrNotAcquired (a reader holds)", err)
		}
		r2 := mustLock(t, readLocker{other.RWMutex("rw", nil)}, context.Background())
		mustUnlock(t, r2)
		// Now only a reader: upgrading through its context is refused at once.
		if _, err := rw.Lock(r.Context()); !errors.Is(err, leash.ErrUpgrade) {
			t.Errorf("Lock with a read hold's context = %v, want ErrUpgrade", err)
		}
		// An explicit owner holding a read lease is refused by the store.
		ctx := leash.WithOwner(context.Background(), "job-1")
		jr := mustLock(t, readLocker{rw}, ctx)
		if _, err := rw.Lock(ctx); !errors.Is(err, leash.ErrUpgrade) {
			t.Errorf("write Lock by an owner holding a read lease = %v, want ErrUpgrade", err)
		}
		mustUnlock(t, jr)
		mustUnlock(t, r)
		h := mustLock(t, other.RWMutex("rw", nil), context.Background())
		mustUnlock(t, h)
		// An explicit owner holding the write lock downgrades at once, and
		// the store holds the read lease after the writer leaves.
		jctx := leash.WithOwner(context.Background(), "job-2")
		jw := mustLock(t, rw, jctx)
		jr2 := mustLock(t, readLocker{rw}, jctx)
		if jr2.Kind() != driver.KindRead || jr2.Owner() == jw.Owner() {
			t.Errorf("explicit owner's downgrade: kind %v owner %q, want a read hold under an owner of its own (the writer's is %q)", jr2.Kind(), jr2.Owner(), jw.Owner())
		}
		mustUnlock(t, jw)
		if _, err := other.RWMutex("rw", nil).TryLock(context.Background()); !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("writer after the explicit owner's downgrade = %v, want ErrNotAcquired (its read lease holds)", err)
		}
		mustUnlock(t, jr2)
		// A Mutex held by an explicit owner cannot be taken by it as a reader.
		mctx := leash.WithOwner(context.Background(), "job-3")
		mh := mustLock(t, c.Mutex("plain"), mctx)
		if _, err := c.RWMutex("plain", nil).RLock(mctx); !errors.Is(err, leash.ErrInvalidArgument) {
			t.Errorf("read lock by the owner of a Mutex on the name = %v, want ErrInvalidArgument", err)
		}
		mustUnlock(t, mh)
	})
}

// A writer's second downgrade, taken while its first one's release is on
// its way, must keep its read lease in the store once that release lands:
// each downgraded read has a store owner of its own.
func TestRWMutexDowngradeWhileEarlierOneReleases(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c, other := newClient(t, s, nil), newClient(t, s, nil)
		defer c.Close()
		defer other.Close()
		rw := c.RWMutex("rw-twice", nil)
		w := mustLock(t, rw, context.Background())
		r1 := mustLock(t, readLocker{rw}, w.Context())
		gate, unlocked := s.unlockStalled(r1)
		r2 := mustLock(t, readLocker{rw}, w.Context()) // the second downgrade
		close(gate)
		if err := <-unlocked; err != nil {
			t.Fatalf("first downgrade's Unlock: %v", err)
		}
		if r2.Owner() == r1.Owner() {
			t.Errorf("both downgrades have store owner %q, want one each", r2.Owner())
		}
		mustUnlock(t, w)
		if h, err := other.RWMutex("rw-twice", nil).TryLock(context.Background()); !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("another client's writer = %v, %v while the second downgrade holds its read lease; want ErrNotAcquired", h, err)
		}
		if err := r2.Err(); err != nil {
			t.Fatalf("second downgrade: %v", err)
		}
		mustUnlock(t, r2)
	})
}

// An explicit owner whose read lock has just expired locally asks for the
// write lock: noticing the expiry ends the read tenure, which must not
// deadlock with the owner registry being consulted.
func TestExplicitOwnerWriteAfterItsReadExpired(t *testing.T) {
	s := newFaultStore(t)
	c := newClient(t, s, &leash.Options{Lease: time.Second})
	defer c.Close()
	rw := c.RWMutex("expired-read", nil)
	ctx := leash.WithOwner(context.Background(), "job-4")
	r := mustLock(t, readLocker{rw}, ctx)
	leash.ExpireLocally(r) // as after a pause: the store's lease has not run out
	done := make(chan error, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		w, err := rw.Lock(lctx)
		if err == nil {
			err = w.Unlock(context.Background())
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write Lock after the owner's read lock expired = %v, want the lock once the read lease ends", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("write Lock after the owner's read lock expired never returned")
	}
	wantLost(t, r, leash.ReasonExpired)
}

func TestRWMutexCrashedReaderFreesItsShareAlone(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		// A reader that crashed: its lease is never renewed.
		if _, err := s.Acquire(context.Background(), driver.Request{Kind: driver.KindRead, Name: "share",
			Owner: "crashed:1", Lease: 3 * time.Second}); err != nil {
			t.Fatal(err)
		}
		live := mustLock(t, readLocker{c.RWMutex("share", nil)}, context.Background())
		start := time.Now()
		got := grantedAt(t, c.RWMutex("share", nil), context.Background())
		time.Sleep(5 * time.Second)
		mustUnlock(t, live) // the live reader leaves at 5s; the crashed one left at 3s
		if d := (<-got).Sub(start); d != 5*time.Second {
			t.Errorf("writer got the lock at %v, want 5s (when the live reader left)", d)
		}
	})
}

func TestSemaphore(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second})
		defer c.Close()
		sem := c.Semaphore("pool", 2)
		a := mustLock(t, semLocker{sem}, context.Background())
		b := mustLock(t, semLocker{sem}, a.Context()) // no re-entry: another permit
		if b.Fence() <= a.Fence() || b.Owner() == a.Owner() {
			t.Errorf("second permit = owner %q fence %d, want a permit of its own", b.Owner(), b.Fence())
		}
		time.Sleep(3 * time.Second) // permits renewed by the watchdog
		if _, err := sem.TryAcquire(context.Background()); !errors.Is(err, leash.ErrNotAcquired) {
			t.Fatalf("third permit of 2 = %v, want ErrNotAcquired", err)
		}
		got := lockAsync(t, semLocker{sem}, context.Background())
		synctest.Wait()
		released := time.Now()
		mustUnlock(t, a)
		third := <-got
		if time.Since(released) != 0 {
			t.Errorf("waiter got the permit %v after the release, want at once", time.Since(released))
		}
		if err := a.Unlock(context.Background()); !errors.Is(err, leash.ErrNotHeld) {
			t.Errorf("releasing a permit twice = %v, want ErrNotHeld", err)
		}
		// Grow the semaphore while permits are held: a waiter gets in.
		got = lockAsync(t, semLocker{sem}, context.Background())
		synctest.Wait()
		if err := c.Semaphore("pool", 99).SetPermits(context.Background(), 3); err != nil {
			t.Fatal(err)
		}
		fourth := <-got
		if info, _ := s.Inspect(context.Background(), "pool"); info.Permits != 3 || len(info.Owners) != 3 {
			t.Errorf("Inspect = %+v, want 3 permits, 3 held", info)
		}
		for _, h := range []*leash.Hold{b, third, fourth} {
			mustUnlock(t, h)
		}
		if err := sem.SetPermits(context.Background(), 0); !errors.Is(err, leash.ErrInvalidArgument) {
			t.Errorf("SetPermits(0) = %v, want ErrInvalidArgument", err)
		}
		if _, err := c.Semaphore("bad", 0).Acquire(context.Background()); !errors.Is(err, leash.ErrInvalidArgument) {
			t.Errorf("Semaphore with 0 permits = %v, want ErrInvalidArgument", err)
		}
	})
}

type semLocker struct{ s *leash.Semaphore }

func (l semLocker) Lock(ctx context.Context) (*leash.Hold, error) { return l.s.Acquire(ctx) }

func TestSemaphoreCrashedHolderReturnsPermit(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, nil)
		defer c.Close()
		if _, err := s.Acquire(context.Background(), driver.Request{Kind: driver.KindPermit, Name: "one",
			Owner: "crashed:1", Lease: 2 * time.Second, Permits: 1}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		h := mustLock(t, semLocker{c.Semaphore("one", 1)}, context.Background())
		defer mustUnlock(t, h)
		if d := time.Since(start); d < 2*time.Second || d > 2*time.Second+100*time.Millisecond {
			t.Errorf("permit of a crashed holder returned after %v, want one lease (2s)", d)
		}
	})
}

func TestMultiLockAllOrNothing(t *testing.T) {
	for name, newStore := range map[string]func() driver.Store{
		"one step":     func() driver.Store { return memstore.New() },
		"name by name": func() driver.Store { return singleStore{memstore.New()} },
	} {
		t.Run(name, func(t *testing.T) {
			synctestRun(t, func(t *testing.T) {
				s := newStore()
				c, other := newClient(t, s, nil), newClient(t, s, nil)
				defer c.Close()
				defer other.Close()
				blocker := mustLock(t, other.Mutex("b"), context.Background())
				m := c.MultiLock([]string{"c", "a", "b"})
				if _, err := m.TryLock(context.Background()); !errors.Is(err, leash.ErrNotAcquired) {
					t.Fatalf("TryLock with b held = %v", err)
				}
				for _, n := range []string{"a", "c"} {
					if heldBy(t, s, n) != "" {
						t.Errorf("%q held after a failed TryLock: not all or nothing", n)
					}
				}
				got := lockAsync(t, m, context.Background())
				time.Sleep(90 * time.Second) // three leases: groups held while waiting stay renewed
				mustUnlock(t, blocker)
				h := <-got
				if got := h.Names(); fmt.Sprint(got) != "[a b c]" {
					t.Errorf("Names = %v", got)
				}
				for _, n := range []string{"a", "b", "c"} {
					if heldBy(t, s, n) != h.Owner() || h.FenceOf(n) <= 0 {
						t.Errorf("%q: held by %q with fence %d, want the multi-lock", n, heldBy(t, s, n), h.FenceOf(n))
					}
				}
				if h.FenceOf("b") <= blocker.Fence() || h.Fence() < h.FenceOf("a") {
					t.Errorf("fences: b %d (blocker %d), max %d", h.FenceOf("b"), blocker.Fence(), h.Fence())
				}
				h2 := mustLock(t, m, h.Context()) // re-entry
				mustUnlock(t, h2)
				if _, err := c.Mutex("a").Lock(h.Context()); !errors.Is(err, leash.ErrInvalidArgument) {
					t.Errorf("Mutex on a name held by a MultiLock in this context = %v, want ErrInvalidArgument", err)
				}
				mustUnlock(t, h)
				for _, n := range []string{"a", "b", "c"} {
					if heldBy(t, s, n) != "" {
						t.Errorf("%q held after Unlock", n)
					}
				}
			})
		})
	}
}

func TestMultiLockRollsBackWhenItGivesUp(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := singleStore{memstore.New()}
		c, other := newClient(t, s, nil), newClient(t, s, nil)
		defer c.Close()
		defer other.Close()
		blocker := mustLock(t, other.Mutex("z"), context.Background())
		defer mustUnlock(t, blocker)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.MultiLock([]string{"a", "z"}).Lock(ctx)
		if !errors.Is(err, leash.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock = %v, want ErrNotAcquired and DeadlineExceeded", err)
		}
		if heldBy(t, s, "a") != "" {
			t.Errorf("\"a\" left held after the multi-lock gave up")
		}
	})
}

func TestMultiLocksOverlappingDoNotDeadlock(t *testing.T) {
	for name, s := range map[string]driver.Store{"one step": memstore.New(), "name by name": singleStore{memstore.New()}} {
		t.Run(name, func(t *testing.T) {
			synctestRun(t, func(t *testing.T) {
				sets := [][]string{{"a", "b"}, {"b", "c"}, {"c", "a"}, {"a", "b", "c"}}
				var (
					wg   sync.WaitGroup
					held [3]atomic.Int32
				)
				for i, set := range sets {
					c := newClient(t, s, nil)
					defer c.Close()
					wg.Go(func() {
						for range 20 {
							h, err := c.MultiLock(set).Lock(context.Background())
							if err != nil {
								t.Error(err)
								return
							}
							for _, n := range set {
								if held[n[0]-'a'].Add(1) != 1 {
									t.Errorf("client %d: %q held twice", i, n)
								}
							}
							time.Sleep(time.Millisecond)
							for _, n := range set {
								held[n[0]-'a'].Add(-1)
							}
							_ = h.Unlock(context.Background())
						}
					})
				}
				wg.Wait() // a deadlock would block the bubble here
			})
		})
	}
}

func TestMultiLockLosesWholeHold(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: 3 * time.Second})
		defer c.Close()
		h := mustLock(t, c.MultiLock([]string{"x", "y"}), context.Background())
		if _, err := s.ForceRelease(context.Background(), "y"); err != nil {
			t.Fatal(err)
		}
		wantLost(t, h, leash.ReasonReleasedElsewhere)
		if err := h.Unlock(context.Background()); !errors.Is(err, leash.ErrLost) {
			t.Errorf("Unlock = %v, want the loss", err)
		}
		if heldBy(t, s, "x") != "" {
			t.Errorf("\"x\" left held")
		}
	})
}

// A MultiLock waiting for a later group that loses an earlier one starts
// over, and must then wait for the first group's release, not the later
// group's.
func TestMultiLockStartingOverWatchesFirstGroup(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := singleStore{memstore.New()} // one group per name: "a", then "b"
		opts := &leash.Options{Lease: 3 * time.Second}
		holderB, multi, holderA := newClient(t, s, opts), newClient(t, s, opts), newClient(t, s, opts)
		defer holderB.Close()
		defer multi.Close()
		defer holderA.Close()
		start := time.Now()
		hb := mustLock(t, holderB.Mutex("b"), context.Background())
		got := grantedAt(t, multi.MultiLock([]string{"a", "b"}), context.Background())
		time.Sleep(200 * time.Millisecond) // the MultiLock holds "a" and waits for "b"
		if _, err := s.ForceRelease(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		ha := mustLock(t, holderA.Mutex("a"), context.Background()) // "a" is lost to another client
		time.Sleep(1300 * time.Millisecond)                         // its renewal finds out: start over
		mustUnlock(t, hb)
		time.Sleep(500 * time.Millisecond)
		released := time.Now()
		mustUnlock(t, ha)
		if at := <-got; at.Sub(released) > 10*time.Millisecond {
			t.Errorf("MultiLock granted %v after \"a\" was released (%v after start), want at once", at.Sub(released), at.Sub(start))
		}
	})
}

// extraRenewStore answers every Renew with one result too many.
type extraRenewStore struct{ singleStore }

func (s extraRenewStore) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	return append(s.singleStore.Renew(ctx, reqs), driver.RenewResult{Status: driver.Renewed})
}

// A store that answers a MultiLock's renewal of its held groups with the
// wrong number of results is treated as a failed renewal, not trusted.
func TestMultiLockRejectsWrongRenewalCount(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := extraRenewStore{singleStore{memstore.New()}}
		opts := &leash.Options{Lease: 3 * time.Second}
		holder, multi := newClient(t, s, opts), newClient(t, s, opts)
		defer holder.Close()
		defer multi.Close()
		hb := mustLock(t, holder.Mutex("b"), context.Background())
		got := grantedAt(t, multi.MultiLock([]string{"a", "b"}), context.Background())
		time.Sleep(1500 * time.Millisecond) // past the renewal of "a" while waiting
		mustUnlock(t, hb)
		if at := <-got; at.IsZero() {
			t.Fatal("MultiLock failed")
		}
	})
}

func TestMultiLockRejectsBadNames(t *testing.T) {
	c := newClient(t, memstore.New(), nil)
	defer c.Close()
	for name, names := range map[string][]string{"none": nil, "twice": {"a", "b", "a"}, "bad name": {"a", ""}} {
		if _, err := c.MultiLock(names).TryLock(context.Background()); !errors.Is(err, leash.ErrInvalidArgument) {
			t.Errorf("%s: TryLock = %v, want ErrInvalidArgument", name, err)
		}
	}
}

// singleStore hides memstore's MultiStore, so MultiLock takes names one at
// a time in order: its Partition method, of another signature, shadows the
// promoted one, and the type no longer implements driver.MultiStore.
type singleStore struct{ *memstore.Store }

func (singleStore) Partition() {}

var _ = func() bool { _, ok := driver.Store(singleStore{}).(driver.MultiStore); return !ok }

// TestNotALockIsRefusedAtOnce takes a semaphore and then asks for a Mutex, an
// RWMutex and a MultiLock on its name: each returns ErrNotALock at once
// (Lock does not wait for a "holder"), and since nothing was granted, nothing
// is released, neither in the background nor on Close.
func TestNotALockIsRefusedAtOnce(t *testing.T) {
	f := newFaultStore(t)
	c := newClient(t, f, nil)
	ctx := context.Background()
	h, err := c.Semaphore("pool", 2).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := f.releases.Load()
	for name, lock := range map[string]func(context.Context) (*leash.Hold, error){
		"mutex":     c.Mutex("pool").Lock,
		"rw write":  c.RWMutex("pool", nil).Lock,
		"rw read":   c.RWMutex("pool", nil).RLock,
		"multilock": c.MultiLock([]string{"other", "pool"}).Lock,
	} {
		if _, err := lock(ctx); !errors.Is(err, leash.ErrNotALock) || errors.Is(err, leash.ErrNotAcquired) {
			t.Errorf("%s on a semaphore's name = %v, want ErrNotALock", name, err)
		}
	}
	if got := f.releases.Load() - before; got != 0 {
		t.Errorf("releases after the refusals = %d, want none: nothing was granted", got)
	}
	mustUnlock(t, h)
	if err := c.Close(); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	if got := f.releases.Load() - before; got != 1 {
		t.Errorf("releases by Unlock and Close = %d, want 1 (the semaphore's own)", got)
	}
}
