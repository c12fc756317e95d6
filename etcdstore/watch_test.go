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
// for the answer. A Lock waiting for a release starts such a watch; before
// the fix it outlived its deadline by minutes.
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
}
