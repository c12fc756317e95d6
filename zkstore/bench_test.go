package zkstore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/zkstore"
)

// Run with:
//
//	cd zkstore && go test -run '^$' -bench LockUnlock -benchtime 2000x
//	cd zkstore && go test -run '^$' -bench RenewalRound10k -benchtime 5x
//
// Each benchmark starts its own ZooKeeper server on loopback
// (testserver: forceSync=no, so the numbers are of the protocol, not of a
// disk's fsync).

// BenchmarkLockUnlock is an uncontended Lock and Unlock through a
// leash.Client: two round trips for Lock, three for Unlock (the node's data
// is read before it is deleted).
func BenchmarkLockUnlock(b *testing.B) {
	z := testserver.NewZooKeeper(b)
	s, err := zkstore.Dial([]string{z.Addr}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := leash.New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	m := c.Mutex("bench/lock-unlock")
	ctx := b.Context()
	for b.Loop() {
		h, err := m.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenewalRound10k is what 10,000 locks held by one Client cost per
// renewal interval: the round the watchdog runs, one KeepAlive of the
// client's session and one Renew (a check) of every lock. The first Renew
// reads every hold node, setting its watch; later ones read none (the
// node-reads/round metric), only a write on the session.
func BenchmarkRenewalRound10k(b *testing.B) {
	const locks = 10000
	z := testserver.NewZooKeeper(b)
	s, err := zkstore.Dial([]string{z.Addr}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := b.Context()
	const client = "00000000-0000-4000-8000-00000000beef"
	reqs := make([]driver.Request, locks)
	for i := range reqs {
		reqs[i] = driver.Request{Name: fmt.Sprintf("bench/held/%d", i), Owner: fmt.Sprintf("%s:%d", client, i), Lease: 30 * time.Second}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, r := range reqs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if g, err := s.Acquire(ctx, r); err != nil || !g.Acquired {
				b.Errorf("Acquire(%q) = %+v, %v", r.Name, g, err)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	b.ResetTimer()
	before := s.SlowChecks()
	for b.Loop() {
		if err := s.KeepAlive(ctx, client); err != nil {
			b.Fatal(err)
		}
		for i, r := range s.Renew(ctx, reqs) {
			if r.Err != nil || r.Status != driver.Renewed {
				b.Fatalf("Renew(%q) = %+v", reqs[i].Name, r)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/locks, "ns/lock")
	b.ReportMetric(float64(s.SlowChecks()-before)/float64(b.N), "node-reads/round")
}
