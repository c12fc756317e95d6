package etcdstore_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/etcdstore"
	"github.com/leash-go/leash/internal/testserver"
)

// Run with:
//
//	cd etcdstore && go test -run '^$' -bench LockUnlock -benchtime 2000x
//	cd etcdstore && go test -run '^$' -bench KeepAlive -benchtime 1x
//
// Each benchmark starts its own etcd (its data directory in a temporary
// directory) on loopback.

// BenchmarkLockUnlock is one uncontended Lock and Unlock through a leash
// Client: two transactions, and a keep-alive of the client's lease at most
// about once a second (see the package doc).
func BenchmarkLockUnlock(b *testing.B) {
	srv := testserver.NewEtcd(b, testserver.EtcdOptions{})
	c := benchClient(b, srv, nil)
	m := c.Mutex("bench/lock-unlock")
	ctx := context.Background()
	before := rpcs(b, srv)
	n := 0
	for b.Loop() {
		h, err := m.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		n++
	}
	after := rpcs(b, srv)
	b.ReportMetric(float64(after.txn-before.txn)/float64(n), "txns/op")
	b.ReportMetric(float64(after.keepAlive-before.keepAlive)/float64(n), "keepalives/op")
}

// BenchmarkKeepAlive10000 holds 10,000 locks through one leash Client and
// counts, over a few renewal intervals, what the watchdog sends per
// interval: one keep-alive (the client's one lease) and one check of the
// lease's keys (a LeaseTimeToLive), not 10,000 renewals, and no
// transaction reading lock keys one by one, plus the holder record's
// publications (a read, a transaction and the refresh of the record's own
// lease each).
func BenchmarkKeepAlive10000(b *testing.B) {
	const (
		locks    = 10000
		lease    = 3 * time.Second // renewed every second
		interval = lease / 3
		rounds   = 4
	)
	srv := testserver.NewEtcd(b, testserver.EtcdOptions{})
	c := benchClient(b, srv, &leash.Options{Lease: lease})
	ctx := context.Background()
	holds := make([]*leash.Hold, locks)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < locks; i += 16 {
				h, err := c.Mutex(fmt.Sprintf("bench/held/%d", i)).Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				holds[i] = h
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	for b.Loop() {
		// Let four rounds pass first: locks taken over several seconds
		// settle into one cohort (see the core's scheduler).
		time.Sleep(4 * interval)
		before := rpcs(b, srv)
		start := time.Now()
		time.Sleep(rounds * interval) // the measurement: what the watchdog sends meanwhile
		after := rpcs(b, srv)
		per := float64(time.Since(start)) / float64(interval)
		b.ReportMetric(float64(after.keepAlive-before.keepAlive)/per, "keepalives/interval")
		b.ReportMetric(float64(after.txn-before.txn)/per, "txns/interval")
		b.ReportMetric(float64(after.ttl-before.ttl)/per, "lease-checks/interval")
		// A holder record publication reads its key (a Range) and puts it
		// (a Txn), refreshing the record's own lease.
		b.ReportMetric(float64(after.rng-before.rng)/per, "record-reads/interval")
		b.ReportMetric(float64(after.grant-before.grant)/per, "grants/interval")
	}
	for _, h := range holds {
		if err := h.Err(); err != nil {
			b.Fatalf("hold %q lost while held: %v", h.Name(), err)
		}
	}
}

func benchClient(b *testing.B, srv *testserver.Etcd, opts *leash.Options) *leash.Client {
	b.Helper()
	c, err := leash.New(etcdstore.New(newCli(b, srv.Endpoint), nil), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// rpcCounts are the server's counts of handled requests, by method.
type rpcCounts struct{ txn, keepAlive, rng, grant, ttl int64 }

// rpcs reads the server's gRPC counters from its /metrics endpoint: Txn
// requests handled, LeaseKeepAlive streams started (one per
// LeaseKeepAliveOnce), Range, LeaseGrant and LeaseTimeToLive requests
// handled.
func rpcs(b *testing.B, srv *testserver.Etcd) rpcCounts {
	b.Helper()
	resp, err := http.Get(srv.Endpoint + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var c rpcCounts
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		var into *int64
		switch {
		case strings.HasPrefix(line, "grpc_server_handled_total{") && strings.Contains(line, `grpc_method="Txn"`):
			into = &c.txn
		case strings.HasPrefix(line, "grpc_server_started_total{") && strings.Contains(line, `grpc_method="LeaseKeepAlive"`):
			into = &c.keepAlive
		case strings.HasPrefix(line, "grpc_server_handled_total{") && strings.Contains(line, `grpc_method="Range"`):
			into = &c.rng
		case strings.HasPrefix(line, "grpc_server_handled_total{") && strings.Contains(line, `grpc_method="LeaseGrant"`):
			into = &c.grant
		case strings.HasPrefix(line, "grpc_server_handled_total{") && strings.Contains(line, `grpc_method="LeaseTimeToLive"`):
			into = &c.ttl
		default:
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			b.Fatalf("metrics line %q: %v", line, err)
		}
		*into += int64(f)
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return c
}
