package etcdstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/etcdstore"
	"github.com/leash-go/leash/internal/faultproxy"
)

// TestWatchHonoursContextInPartition starts a Watch while the server cannot
// be reached (a black hole between the client and etcd, on a connection
// that was open before): the server never answers the watch's creation, and
// Watch must return its context's error once that context ends, not wait
// for the answer (a Lock waiting for a release starts such a watch; before
// the fix it outlived its deadline by minutes). Once the partition heals,
// the client must wait again: clientv3 creates a stream's watches one at a
// time, and the creation the black hole swallowed is never answered, so
// without a new stream every later watch of this client would wait for it.
// The first Watch gives up within a second, too soon to move to a new
// stream (stuckAfter), so the second one's first creation waits behind the
// lost one, is abandoned after createPatience, and is asked again on a new
// stream.
func TestWatchHonoursContextInPartition(t *testing.T) {
	srv := shared.Etcd(t)
	p, err := faultproxy.New(strings.TrimPrefix(srv.Endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cli := newCli(t, "http://"+p.Addr)
	ctx := bg(t)
	if _, err := cli.Get(ctx, "leash-test-connect"); err != nil {
		t.Fatalf("Get through the proxy: %v", err)
	}
	p.Blackhole()
	s := etcdstore.New(cli, nil)

	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	type result struct {
		stop func()
		err  error
	}
	done := make(chan result, 1)
	go func() {
		stop, err := s.Watch(wctx, driver.KindMutex, lockName(t), func(driver.Wake) {})
		done <- result{stop, err}
	}()
	<-wctx.Done()
	select {
	case r := <-done:
		if r.err == nil {
			r.stop()
			t.Fatal("Watch returned no error though the server never answered it")
		}
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("Watch: %v, want its context's context.DeadlineExceeded", r.err)
		}
		t.Logf("Watch: %v", r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("Watch still waiting 30s after its context's deadline")
	}

	// Healed, the client waits again: a new watch is created and a release
	// by another client wakes it.
	p.Heal()
	woken := make(chan struct{}, 1)
	wctx2, cancel2 := context.WithTimeout(ctx, 20*time.Second)
	defer cancel2()
	stop, err := s.Watch(wctx2, driver.KindMutex, lockName(t), func(driver.Wake) {
		select {
		case woken <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatalf("Watch after the partition healed: %v", err)
	}
	defer stop()
	other := etcdstore.New(sharedCli(t), nil)
	req := driver.Request{Name: lockName(t), Owner: "0a0b0c0d-0000-4000-8000-000000000005:1", Lease: 5 * time.Second}
	if g, err := other.Acquire(ctx, req); err != nil || !g.Acquired {
		t.Fatalf("Acquire by another client = %+v, %v", g, err)
	}
	if err := other.Release(ctx, req); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	case <-ctx.Done():
		t.Fatal("the release did not wake the watch made after the partition healed")
	}
}
