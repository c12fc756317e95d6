package redisstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/faultproxy"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// TestReplacementWakesOnceSubscribed: a release published after a dead
// pub/sub connection was replaced, but before the new connection's
// SUBSCRIBE reached Redis, is heard by no one; the new subscription's
// confirmation must then wake every watcher, or they sleep until their
// holder's lease runs out. The proxy delays the SUBSCRIBE so that the
// release lands in that gap; a Watch started in the gap returns only once
// the new subscription is live.
func TestReplacementWakesOnceSubscribed(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	proxy, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	// Once armed, a new connection's first command after its handshake
	// (the replacement's SUBSCRIBE) reaches Redis only after delay.
	const delay = 500 * time.Millisecond
	var armed atomic.Bool
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr, OnConnect: func(context.Context, *redis.Conn) error {
		if armed.Load() {
			proxy.SetLatency(delay)
		}
		return nil
	}})
	t.Cleanup(func() { rdb.Close() })
	direct := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { direct.Close() })
	// No health check runs during the test: the test replaces the
	// connection itself.
	s := New(rdb, &Options{HealthCheck: time.Hour})
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	name := "test/replacement"
	woke := make(chan struct{}, 16)
	stop, err := s.Watch(ctx, driver.KindMutex, name, func(driver.Wake) { woke <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	armed.Store(true)
	s.notify.mu.Lock()
	old := s.notify.ps
	s.notify.mu.Unlock()
	go s.notify.replace(old)
	select {
	case <-woke: // replace's own wake: a release may have gone unheard while the connection was dead
	case <-time.After(time.Minute):
		t.Fatal("replace woke no one")
	}
	if err := direct.Publish(ctx, channelName(name), "0").Err(); err != nil {
		t.Fatal(err)
	}
	published := time.Now()
	// A Watch of the same channel started now returns once the new
	// subscription is confirmed, not at once on the old one's confirmation.
	watched := make(chan time.Time, 1)
	go func() {
		if stop2, err := s.Watch(ctx, driver.KindMutex, name, func(driver.Wake) {}); err == nil {
			watched <- time.Now()
			stop2()
		} else {
			t.Errorf("Watch during the replacement: %v", err)
			watched <- time.Time{}
		}
	}()
	select {
	case <-woke:
	case <-time.After(time.Minute):
		t.Fatal("the release published before the new subscription was live was never heard, and its confirmation woke no one")
	}
	if at := <-watched; !at.IsZero() && at.Sub(published) < delay/2 {
		t.Errorf("a Watch started during the replacement returned %v after the release, before the new subscription was confirmed (its SUBSCRIBE is delayed %v)",
			at.Sub(published), delay)
	}
}

// TestRedissonRWWake: on Redisson's readers-writer channel, leash's own
// releases ("00", "01") wake no one (leash's channel did), and Redisson's
// ("0", "1", or anything else) wake every waiter.
func TestRedissonRWWake(t *testing.T) {
	for payload, want := range map[string]bool{"00": false, "01": false, "0": true, "1": true, "": true, "2": true} {
		msg, java := redissonRWWake(payload)
		if java != want || (java && wakeOf(msg).To != driver.WakeAll) {
			t.Errorf("redissonRWWake(%q) = %q, %v; want a Java release: %v, waking every waiter", payload, msg, java, want)
		}
	}
}
