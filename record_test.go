package leash_test

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
)

// recordStore counts the holder-record publications of a memstore.
type recordStore struct {
	*memstore.Store
	puts atomic.Int64
}

func (s *recordStore) PutClient(ctx context.Context, rec driver.ClientRecord, ttl time.Duration) error {
	s.puts.Add(1)
	return s.Store.PutClient(ctx, rec, ttl)
}

func getRecord(t *testing.T, s driver.ClientRecorder, id string) (driver.ClientRecord, bool) {
	t.Helper()
	rec, ok, err := s.GetClient(context.Background(), id)
	if err != nil {
		t.Fatalf("GetClient: %v", err)
	}
	return rec, ok
}

// TestRecordNamesTheHolder: a Client that takes a lock publishes who it is
// (host, pid, label, command) and when it took the lock, and deletes the
// record on Close.
func TestRecordNamesTheHolder(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := &recordStore{Store: memstore.New()}
		c := newClient(t, s, &leash.Options{Label: "billing worker", Command: "./bill --day today"})
		synctest.Wait()
		if _, ok := getRecord(t, s, c.ID()); ok {
			t.Fatal("a Client that holds nothing published a record")
		}
		before := time.Now()
		h := mustLock(t, c.Mutex("orders:42"), context.Background())
		time.Sleep(time.Second) // a lock held this long is recorded
		synctest.Wait()
		rec, ok := getRecord(t, s, c.ID())
		if !ok {
			t.Fatal("no record while the Client holds a lock")
		}
		host, _ := os.Hostname()
		if rec.Host != host || rec.PID != os.Getpid() || rec.Label != "billing worker" || rec.Command != "./bill --day today" {
			t.Errorf("record = %+v, want host %q, pid %d, the label and the command", rec, host, os.Getpid())
		}
		l, listed := rec.Lock(h.Owner())
		if !listed || l.Acquired.Before(before) || l.Acquired.After(time.Now()) || !l.TailSince.IsZero() {
			t.Errorf("record's lock %q = %+v (listed %v), want acquired at %v, held", h.Owner(), l, listed, before)
		}
		if got := driver.OwnerClient(h.Owner()); got != c.ID() {
			t.Errorf("OwnerClient(%q) = %q, want %q", h.Owner(), got, c.ID())
		}
		mustUnlock(t, h)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if rec, ok := getRecord(t, s, c.ID()); ok {
			t.Errorf("record after Close = %+v, want none", rec)
		}
	})
}

// TestRecordCostsNoRoundTripPerLock: short locks taken and released in a
// loop publish no record; locks held in a loop publish it once.
func TestRecordCostsNoRoundTripPerLock(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := &recordStore{Store: memstore.New()}
		c := newClient(t, s, nil)
		defer c.Close()
		for range 100 {
			mustUnlock(t, mustLock(t, c.Mutex("orders:42"), context.Background()))
			synctest.Wait()
		}
		if n := s.puts.Load(); n != 0 {
			t.Errorf("100 instant lock/unlock cycles published the record %d times, want 0", n)
		}
		for range 100 {
			h := mustLock(t, c.Mutex("orders:42"), context.Background())
			time.Sleep(100 * time.Millisecond)
			mustUnlock(t, h)
		}
		if n := s.puts.Load(); n != 1 {
			t.Errorf("100 lock/unlock cycles of 100ms each published the record %d times, want 1", n)
		}
	})
}

// TestRecordKeptWhileHeld: the record never lapses while a lock is held,
// and lists a lock taken after it was published once that lock is renewed.
func TestRecordKeptWhileHeld(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := &recordStore{Store: memstore.New()}
		const lease = time.Second
		c := newClient(t, s, &leash.Options{Lease: lease})
		defer c.Close()
		first := mustLock(t, c.Mutex("first"), context.Background())
		synctest.Wait()
		second := mustLock(t, c.Mutex("second"), context.Background())
		synctest.Wait()
		for i := range 20 {
			time.Sleep(lease / 2)
			synctest.Wait()
			rec, ok := getRecord(t, s, c.ID())
			if !ok {
				t.Fatalf("record gone %v into a hold", time.Duration(i+1)*lease/2)
			}
			if _, ok := rec.Lock(first.Owner()); !ok {
				t.Fatalf("record %v into a hold does not list the lock: %+v", time.Duration(i+1)*lease/2, rec)
			}
		}
		rec, _ := getRecord(t, s, c.ID())
		if _, ok := rec.Lock(second.Owner()); !ok {
			t.Errorf("record does not list a lock held for 20 renewals: %+v", rec)
		}
		if n := s.puts.Load(); n > 15 {
			t.Errorf("10 leases of holding published the record %d times, want about once a lease", n)
		}
	})
}

// TestRecordOfATail: a lock left to expire with UnlockAfter is recorded as a
// tail, and its record outlives Close until the lock's lease ends, then
// expires.
func TestRecordOfATail(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		s := &recordStore{Store: memstore.New()}
		c := newClient(t, s, &leash.Options{Command: "./report.sh"})
		h := mustLock(t, c.Mutex("nightly-report"), context.Background())
		owner := h.Owner()
		time.Sleep(time.Second) // the job
		ended := time.Now()
		const atLeast = 10 * time.Minute
		if err := h.UnlockAfter(context.Background(), atLeast); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		rec, ok := getRecord(t, s, c.ID())
		if !ok {
			t.Fatal("no record after Close while a lock left to expire still runs")
		}
		l, listed := rec.Lock(owner)
		if !listed || !l.TailSince.Equal(ended) || rec.Command != "./report.sh" {
			t.Errorf("record's lock = %+v (listed %v) in %+v, want a tail since %v", l, listed, rec, ended)
		}
		time.Sleep(atLeast + 2*time.Second)
		if rec, ok := getRecord(t, s, c.ID()); ok {
			t.Errorf("record %v after the tail ended = %+v, want none", 2*time.Second, rec)
		}
	})
}

// TestLabelChecked: a label or command that is too long or not printable is
// refused by New.
func TestLabelChecked(t *testing.T) {
	for name, o := range map[string]leash.Options{
		"long label":      {Label: string(make([]byte, leash.MaxLabelLen+1))},
		"control label":   {Label: "a\nb"},
		"long command":    {Command: string(make([]byte, leash.MaxCommandLen+1))},
		"control command": {Command: "a\x00b"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := leash.New(memstore.New(), &o); !errors.Is(err, leash.ErrInvalidOptions) {
				t.Errorf("New(%q) = %v, want ErrInvalidOptions", name, err)
			}
		})
	}
}
