package redisstore_test

import (
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/faultproxy"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestCloseBlackholedSubscription closes a Store whose server went silent
// while its pub/sub connection was being replaced: the health check's ping
// went unanswered, and the SUBSCRIBE of the watched channels waits on a new
// connection to a black-holed server. The redis client's ReadTimeout is a
// minute, so a Close that waited for that subscription to give up (as it
// did, holding the notifier's lock) would take a minute; the bound of 20 s
// only catches that. The negative control is the black-hole itself: the
// proxy counts the replacement's connection before Close is called.
func TestCloseBlackholedSubscription(t *testing.T) {
	srv := sharedRedis(t)
	proxy, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
		MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	s := redisstore.New(rdb, &redisstore.Options{HealthCheck: 50 * time.Millisecond})
	stop, err := s.Watch(bg(t), driver.KindMutex, lockName(t), func(driver.Wake) {})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	stopRevokes, err := s.WatchRevokes(bg(t), "0123456789abcdef", func(driver.Revocation) {})
	if err != nil {
		t.Fatal(err)
	}
	defer stopRevokes()
	before := proxy.Accepted()
	proxy.Blackhole()
	// The ping goes unanswered for a HealthCheck, then the connection is
	// replaced: the new one is dialed (through the proxy, which accepts it)
	// and its SUBSCRIBE waits for an answer that does not come.
	waitFor(t, "the replacement's connection", func() bool { return proxy.Accepted() > before })
	closed := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		_ = s.Close()
		closed <- time.Since(start)
	}()
	select {
	case d := <-closed:
		t.Logf("Close returned after %v", d)
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return within 20 s while the subscription's connection was black-holed (the redis client's ReadTimeout is a minute)")
	}
}
