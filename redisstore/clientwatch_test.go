package redisstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestHeadWakeUpGoesToItsClient checks that the wake-up of a fair queue's
// head, here a release handing a FairMutex to the first of two waiting
// clients, is published on that client's own channel: the other waiting
// client, which does not subscribe it, is not woken by it, and nothing goes
// on the name's shared fair channel, which every waiting client subscribes.
// Each release then costs one process's wake-up, not one per waiting client.
func TestHeadWakeUpGoesToItsClient(t *testing.T) {
	srv := sharedRedis(t)
	name := lockName(t)
	shared := "leash_fair__channel:{" + name + "}"
	ctx := bg(t)
	rdb := newRDB(t, srv.Addr)
	ps := rdb.PSubscribe(ctx, shared+"*")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	q := &leash.QueueOptions{QueueLease: 30 * time.Second}
	holder := newClient(t, srv.Addr, nil)
	h, err := holder.FairMutex(name, q).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiters := []*leash.Client{newClient(t, srv.Addr, nil), newClient(t, srv.Addr, nil)}
	type granted struct {
		h   *leash.Hold
		err error
	}
	// Buffered: a Lock still waiting when the test fails returns at
	// cleanup (client closed), after the test has ended.
	holds := make(chan granted, len(waiters))
	for i, c := range waiters {
		go func() {
			h, err := c.FairMutex(name, q).Lock(ctx)
			holds <- granted{h, err}
		}()
		waitFor(t, "the waiter to queue", func() bool {
			info, err := holder.Inspect(ctx, name)
			return err == nil && info.Queued == i+1
		})
		// The first attempt writes the place; the watch follows it.
		own := shared + ":" + c.ID()
		waitFor(t, "the waiting client's store to subscribe "+own, func() bool {
			return rdb.PubSubNumSub(ctx, own).Val()[own] == 1
		})
	}
	for i, c := range waiters {
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		var g granted
		select {
		case g = <-holds:
		case <-time.After(time.Minute):
			t.Fatalf("hand-off %d: no waiter was granted the lock", i)
		}
		if g.err != nil {
			t.Fatalf("hand-off %d: %v", i, g.err)
		}
		h = g.h
		m, err := ps.ReceiveTimeout(ctx, 10*time.Second)
		if err != nil {
			t.Fatalf("hand-off %d: no wake-up published: %v", i, err)
		}
		msg, ok := m.(*redis.Message)
		if !ok {
			t.Fatalf("hand-off %d: %T %v, want a message", i, m, m)
		}
		if want := shared + ":" + c.ID(); msg.Channel != want || !strings.HasPrefix(msg.Payload, "=") {
			t.Errorf("hand-off %d: %q on %s, want a grant on %s", i, msg.Payload, msg.Channel, want)
		}
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The last release, with no one queued, wakes plain Mutex waiters on
	// Redisson's channel: nothing more on the fair channels.
	if m, err := ps.ReceiveTimeout(ctx, 200*time.Millisecond); err == nil {
		t.Errorf("after the last hand-off: %v", m)
	}
}

// TestWatchClientRefusesBadClient checks that WatchClient refuses, before
// any network call, a client id that could not be the part of an owner
// before its first ':': the head wake-ups it watches for would never come.
func TestWatchClientRefusesBadClient(t *testing.T) {
	s := redisstore.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), nil) // nothing listens
	defer s.Close()
	for _, client := range []string{"", "a:b"} {
		_, err := s.WatchClient(bg(t), driver.KindFair, "n", client, func(driver.Wake) {})
		if !errors.Is(err, leash.ErrInvalidArgument) {
			t.Errorf("WatchClient(%q) = %v, want ErrInvalidArgument", client, err)
		}
	}
}
