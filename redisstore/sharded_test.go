package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// The tests in this file check release messages on a Redis 7 Cluster as
// Redisson sends and hears them: since 3.22.0, under its default
// shardedSubscriptionMode (AUTO: sharded when the cluster answers PUBSUB
// SHARDNUMSUB), an RLock unlock runs SPUBLISH of "0" (UNLOCK_MESSAGE) on
// redisson_lock__channel:{name}, and its waiters listen with SSUBSCRIBE on
// the master of that channel's slot.

// redissonChannel is the release channel of an RLock named name: the name
// in braces, unless it has a hash tag of its own.
func redissonChannel(name string) string {
	if strings.Contains(name, "{") {
		return "redisson_lock__channel:" + name
	}
	return "redisson_lock__channel:{" + name + "}"
}

// shardWaiter returns a leash Client on a Store with opts (StayOnMoves when
// stay) on a Cluster client of its own, closed at cleanup, and the count of
// the scripts the Store had answered. Its waiters do not starve: a starving
// Mutex waiter keeps a place in line and retries at a third of its life,
// which would hide the fallback timer the controls look for.
func shardWaiter(t *testing.T, cl *testserver.Cluster, opts *redisstore.Options, stay bool) (*leash.Client, *atomic.Int64) {
	t.Helper()
	answered := new(atomic.Int64)
	cc := clusterClient(t, cl)
	cc.AddHook(answeredScripts{answered})
	s := redisstore.New(cc, opts)
	if stay {
		redisstore.StayOnMoves(s)
	}
	c, err := leash.New(s, &leash.Options{Lease: 30 * time.Second, Starvation: leash.NoStarvation})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, answered
}

// answeredScripts is a go-redis hook that counts the scripts answered
// without an error (a NOSCRIPT, sent again in full, counts once).
type answeredScripts struct{ n *atomic.Int64 }

func (h answeredScripts) count(cmd redis.Cmder) {
	if name := cmd.Name(); (name == "evalsha" || name == "eval") && cmd.Err() == nil {
		h.n.Add(1)
	}
}

func (answeredScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h answeredScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.count(cmd)
		return err
	}
}

func (h answeredScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return err
	}
}

// redissonHold takes name as a Redisson RLock would (a hash of the holder's
// field, the key's TTL its lease), for hold, with no renewal.
func redissonHold(t *testing.T, cc *redis.ClusterClient, name string, hold time.Duration) {
	t.Helper()
	if err := cc.HSet(bg(t), name, "8743c9c0-0795-4907-87fd-6c719a6b4586:1", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cc.PExpire(bg(t), name, hold).Err(); err != nil {
		t.Fatal(err)
	}
}

// redissonShardedRelease releases name as Redisson's unlock does on a Redis
// 7 Cluster: the hash deleted, then "0" published with SPUBLISH on the
// lock's channel (one script there; two commands here, the same effect on a
// waiter). It returns the lock's remaining TTL just before, which a waiter
// that missed the message waits out.
func redissonShardedRelease(t *testing.T, cl *testserver.Cluster, name string) time.Duration {
	t.Helper()
	// A client of its own, whose slot map is read now: after a failover or
	// a master's death, an older client's map may name the old master.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer cc.Close()
	left, err := cc.PTTL(bg(t), name).Result()
	if err != nil || left <= 0 {
		t.Fatalf("PTTL of the held %s: %v, %v", name, left, err)
	}
	if err := cc.Del(bg(t), name).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cc.SPublish(bg(t), redissonChannel(name), "0").Err(); err != nil {
		t.Fatal(err)
	}
	return left
}

// subscribers returns how many clients subscribe to channel: with
// SSUBSCRIBE on its slot's master, and with SUBSCRIBE on any master.
func subscribers(t *testing.T, cc *redis.ClusterClient, channel string) (sharded, plain int64) {
	t.Helper()
	m, err := cc.MasterForKey(bg(t), channel)
	if err == nil {
		var n map[string]int64
		if n, err = m.PubSubShardNumSub(bg(t), channel).Result(); err == nil {
			sharded = n[channel]
		}
	}
	if err != nil {
		t.Logf("PUBSUB SHARDNUMSUB %s: %v", channel, err)
	}
	var subs atomic.Int64 // ForEachMaster asks the masters concurrently
	_ = cc.ForEachMaster(bg(t), func(ctx context.Context, m *redis.Client) error {
		n, err := m.PubSubNumSub(ctx, channel).Result()
		subs.Add(n[channel])
		return err
	})
	return sharded, subs.Load()
}

// markFresh declares cl's nodes new after a slot moved or a replica was
// promoted: the waiter's grant would otherwise wait out the restart grace
// (the node serving the slot is not the one its marker names), and these
// tests are about how the waiter wakes, not when it may be granted.
func markFresh(t *testing.T, cl *testserver.Cluster) {
	t.Helper()
	fresh := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer fresh.Close()
	if err := redisstore.New(fresh, nil).MarkFresh(bg(t)); err != nil {
		t.Fatal(err)
	}
}

// shardedWait holds name as Redisson would for hold, starts waiter's Lock
// of it, and returns once the waiter sleeps: subscribed (subscribed says
// how, given the SSUBSCRIBE and SUBSCRIBE counts of the lock's channel;
// nil: with SSUBSCRIBE) and past its two attempts (one before it
// subscribes, one after), as answered counts them.
func shardedWait(t *testing.T, cc *redis.ClusterClient, waiter *leash.Client, answered *atomic.Int64,
	name string, hold time.Duration, subscribed func(sharded, plain int64) bool) <-chan *leash.Hold {
	t.Helper()
	if subscribed == nil {
		subscribed = func(sharded, _ int64) bool { return sharded > 0 }
	}
	redissonHold(t, cc, name, hold)
	before := answered.Load()
	got := lockAsync(t, waiter, name)
	waitFor(t, "the waiter's subscription and second attempt", func() bool {
		return answered.Load() >= before+2 && subscribed(subscribers(t, cc, redissonChannel(name)))
	})
	return got
}

// awaitWake waits for a waiter's grant after a release that left the lock
// left to live, and checks how it woke: by the message, well before the
// lock would have expired, or, when it cannot hear the message (a control),
// by its fallback timer at the expiry.
func awaitWake(t *testing.T, what string, got <-chan *leash.Hold, released time.Time, left time.Duration, hears bool) {
	t.Helper()
	h := <-got
	if h == nil {
		t.FailNow()
	}
	d := time.Since(released)
	t.Logf("%s: granted %v after the release (the lock had %v left)", what, d.Round(time.Millisecond), left)
	switch {
	case hears && d >= left/2:
		t.Errorf("%s: woken %v after the release, want at once (the fallback timer fires at %v)", what, d, left)
	case !hears && d < left*3/4:
		t.Errorf("%s: woken %v after a release it cannot hear, want its fallback timer at about %v: the control shows nothing", what, d, left)
	}
	_ = h.Unlock(bg(t))
}

func TestClusterShardedPubSub(t *testing.T) {
	cl, cc := newReplicatedCluster(t, testserver.ClusterOptions{})
	const hold = 8 * time.Second

	// A Go waiter is woken by a Redisson release (SPUBLISH) under
	// ShardedAuto and ShardedOn; under ShardedOff it hears nothing and
	// waits for its fallback timer.
	t.Run("RedissonReleaseWakesGoWaiter", func(t *testing.T) {
		for _, tc := range []struct {
			mode           redisstore.ShardedPubSub
			sharded, plain bool // how the waiter subscribes
		}{
			{redisstore.ShardedAuto, true, true},
			{redisstore.ShardedOn, true, false},
			{redisstore.ShardedOff, false, true},
		} {
			name := fmt.Sprintf("%s/mode=%d", lockName(t), tc.mode)
			waiter, answered := shardWaiter(t, cl, &redisstore.Options{ShardedPubSub: tc.mode}, false)
			got := shardedWait(t, cc, waiter, answered, name, hold, func(s, p int64) bool {
				return (s > 0) == tc.sharded && (p > 0) == tc.plain
			})
			released := time.Now()
			left := redissonShardedRelease(t, cl, name)
			awaitWake(t, fmt.Sprintf("mode %d", tc.mode), got, released, left, tc.sharded)
		}
	})

	// A raw SSUBSCRIBE listener, standing in for a Redisson waiter, hears a
	// leash release ("0" on the lock's channel); a raw SUBSCRIBE listener
	// does not, since leash publishes one way only. Under ShardedOff it is
	// the other way round. A marker published both ways after the release
	// tells "not heard" without waiting for anything.
	t.Run("GoReleaseReachesShardedListener", func(t *testing.T) {
		for _, mode := range []redisstore.ShardedPubSub{redisstore.ShardedAuto, redisstore.ShardedOff} {
			name := fmt.Sprintf("%s/mode=%d", lockName(t), mode)
			channel := redissonChannel(name)
			shardPS, plainPS := cc.SSubscribe(bg(t), channel), cc.Subscribe(bg(t), channel)
			t.Cleanup(func() { shardPS.Close(); plainPS.Close() })
			for _, ps := range []*redis.PubSub{shardPS, plainPS} {
				if _, err := ps.Receive(bg(t)); err != nil { // the confirmation
					t.Fatal(err)
				}
			}
			holder := clusterLeash(t, cc, 30*time.Second, &redisstore.Options{ShardedPubSub: mode})
			h, err := holder.Mutex(name).Lock(bg(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Unlock(bg(t)); err != nil {
				t.Fatal(err)
			}
			if err := cc.SPublish(bg(t), channel, "marker").Err(); err != nil {
				t.Fatal(err)
			}
			if err := cc.Publish(bg(t), channel, "marker").Err(); err != nil {
				t.Fatal(err)
			}
			sharded := mode != redisstore.ShardedOff
			for _, l := range []struct {
				what  string
				ps    *redis.PubSub
				hears bool
			}{{"SSUBSCRIBE", shardPS, sharded}, {"SUBSCRIBE", plainPS, !sharded}} {
				want := "marker"
				if l.hears {
					want = "0"
				}
				m, err := l.ps.ReceiveMessage(bg(t))
				if err != nil {
					t.Fatal(err)
				}
				if m.Channel != channel || m.Payload != want {
					t.Errorf("mode %d: a %s listener's first message after leash's release: %q on %s, want %q", mode, l.what, m.Payload, m.Channel, want)
				}
			}
		}
	})

	// What a release costs the cluster: a PUBLISH goes over the cluster bus
	// to every other node (five here), an SPUBLISH only to the replicas of
	// the lock's shard (one). Counted by CLUSTER INFO on every node.
	t.Run("PublishCost", func(t *testing.T) {
		const releases = 200
		sent := func() (plain, shard int64) {
			for _, node := range cl.Nodes() {
				c := redis.NewClient(&redis.Options{Addr: node.Addr})
				info, err := c.ClusterInfo(bg(t)).Result()
				c.Close()
				if err != nil {
					t.Fatal(err)
				}
				plain += infoField(info, "cluster_stats_messages_publish_sent")
				shard += infoField(info, "cluster_stats_messages_publishshard_sent")
			}
			return plain, shard
		}
		per := map[redisstore.ShardedPubSub]float64{}
		for _, mode := range []redisstore.ShardedPubSub{redisstore.ShardedAuto, redisstore.ShardedOff} {
			holder := clusterLeash(t, cc, 30*time.Second, &redisstore.Options{ShardedPubSub: mode})
			name := fmt.Sprintf("%s/mode=%d", lockName(t), mode)
			p0, s0 := sent()
			for range releases {
				h, err := holder.Mutex(name).Lock(bg(t))
				if err != nil {
					t.Fatal(err)
				}
				if err := h.Unlock(bg(t)); err != nil {
					t.Fatal(err)
				}
			}
			p1, s1 := sent()
			per[mode] = float64(p1-p0+s1-s0) / releases
			t.Logf("mode %d: %d releases sent %d PUBLISH and %d SPUBLISH messages over the cluster bus: %.2f a release",
				mode, releases, p1-p0, s1-s0, per[mode])
		}
		if per[redisstore.ShardedAuto] >= per[redisstore.ShardedOff] {
			t.Errorf("a sharded release costs %.2f bus messages, a plain one %.2f: want fewer", per[redisstore.ShardedAuto], per[redisstore.ShardedOff])
		}
	})

	// What a watch costs: waiters on names in distinct slots subscribe
	// each channel with SSUBSCRIBE on a connection per slot (ShardedOn),
	// with SUBSCRIBE on the Store's one connection (ShardedOff), or both
	// (ShardedAuto). Counted by INFO commandstats and CLIENT LIST TYPE
	// pubsub on every master.
	t.Run("WatchCost", func(t *testing.T) {
		const names = 12
		count := func() (ssub, sub, conns int64) {
			for _, m := range cl.Masters {
				c := redis.NewClient(&redis.Options{Addr: m.Addr})
				stats, err := c.Info(bg(t), "commandstats").Result()
				var list string
				if err == nil {
					list, err = c.Do(bg(t), "CLIENT", "LIST", "TYPE", "pubsub").Text()
				}
				c.Close()
				if err != nil {
					t.Fatal(err)
				}
				ssub += infoStat(stats, "cmdstat_ssubscribe", "calls")
				sub += infoStat(stats, "cmdstat_subscribe", "calls")
				for _, l := range strings.Split(list, "\n") {
					if strings.TrimSpace(l) != "" {
						conns++
					}
				}
			}
			return ssub, sub, conns
		}
		for _, mode := range []redisstore.ShardedPubSub{redisstore.ShardedAuto, redisstore.ShardedOn, redisstore.ShardedOff} {
			waiter, _ := shardWaiter(t, cl, &redisstore.Options{ShardedPubSub: mode}, false)
			ss0, s0, c0 := count()
			ctx, cancel := context.WithCancel(bg(t))
			done := make(chan struct{}, names)
			seen := map[int64]bool{}
			for i := 0; len(seen) < names; i++ {
				name := fmt.Sprintf("%s/mode=%d/%d", lockName(t), mode, i)
				sl, err := cc.ClusterKeySlot(bg(t), name).Result()
				if err != nil {
					t.Fatal(err)
				}
				if seen[sl] {
					continue
				}
				seen[sl] = true
				redissonHold(t, cc, name, time.Minute)
				go func() {
					_, _ = waiter.Mutex(name).Lock(ctx)
					done <- struct{}{}
				}()
				waitFor(t, "the waiter's subscriptions", func() bool {
					// Every subscription the mode makes, not the first of
					// them: the counts below are read once they are all made.
					s, p := subscribers(t, cc, redissonChannel(name))
					switch mode {
					case redisstore.ShardedAuto:
						return s > 0 && p > 0
					case redisstore.ShardedOn:
						return s > 0
					}
					return p > 0
				})
			}
			ss1, s1, c1 := count()
			cancel()
			for range names {
				<-done
			}
			t.Logf("mode %d: %d waiters on names in %d slots: %d SSUBSCRIBE, %d SUBSCRIBE, %d pub/sub connections",
				mode, names, names, ss1-ss0, s1-s0, c1-c0)
			want := map[redisstore.ShardedPubSub][3]int64{
				redisstore.ShardedAuto: {names, names, names + 1},
				redisstore.ShardedOn:   {names, 0, names},
				redisstore.ShardedOff:  {0, names, 1},
			}[mode]
			if got := [3]int64{ss1 - ss0, s1 - s0, c1 - c0}; got != want {
				t.Errorf("mode %d: SSUBSCRIBE, SUBSCRIBE, connections = %v, want %v", mode, got, want)
			}
			// Closed, so that its connections do not close during the next
			// mode's count.
			_ = waiter.Close()
			waitFor(t, "the waiter's pub/sub connections closed", func() bool {
				_, _, c := count()
				return c == c0
			})
		}
	})

	// A waiter whose lock's slot moves to another master while it waits
	// follows it (the old master unsubscribes it) and is woken by the
	// release published on the new master; the control, which stays on the
	// old master, waits for its fallback timer. A failover of the lock's
	// master while it waits still wakes it.
	t.Run("SlotMoveStillWakes", func(t *testing.T) {
		for _, follow := range []bool{true, false} {
			tag := namesOn(t, cc, fmt.Sprintf("tag/follow=%v", follow), len(cl.Masters), 0, 1)[0]
			name := "{" + tag + "}/" + lockName(t)
			slot, err := cc.ClusterKeySlot(bg(t), name).Result()
			if err != nil {
				t.Fatal(err)
			}
			waiter, answered := shardWaiter(t, cl, &redisstore.Options{ShardedPubSub: redisstore.ShardedOn}, !follow)
			got := shardedWait(t, cc, waiter, answered, name, hold, nil)
			from, err := cl.MasterOf(int(slot))
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.MigrateSlot(int(slot), from, cl.Masters[1], nil); err != nil {
				t.Fatal(err)
			}
			markFresh(t, cl)
			released := time.Now()
			left := redissonShardedRelease(t, cl, name)
			awaitWake(t, fmt.Sprintf("slot moved, follow=%v", follow), got, released, left, follow)
		}

		// Each in a shard of its own: the masters refuse a second election in
		// a shard soon after the first (Redis votes for one shard's
		// failover at most once in two node timeouts).
		for i, follow := range []bool{true, false} {
			shard := []int{2, 0}[i]
			var name string
			for _, tag := range namesOn(t, cc, fmt.Sprintf("tag/failover/follow=%v", follow), len(cl.Masters), shard, 3) {
				sl, err := cc.ClusterKeySlot(bg(t), tag).Result()
				if err != nil {
					t.Fatal(err)
				}
				if m, err := cl.MasterOf(int(sl)); err == nil && m == cl.Masters[shard] { // not a migrated slot
					name = "{" + tag + "}/" + lockName(t)
					break
				}
			}
			if name == "" {
				t.Fatalf("no name served by master %d", shard)
			}
			waiter, answered := shardWaiter(t, cl, &redisstore.Options{ShardedPubSub: redisstore.ShardedOn}, !follow)
			got := shardedWait(t, cc, waiter, answered, name, 2*hold, nil) // a failover takes longer than a migration
			if err := cl.Failover(cl.Replicas[shard][0], false); err != nil {
				t.Fatal(err)
			}
			markFresh(t, cl)
			released := time.Now()
			left := redissonShardedRelease(t, cl, name)
			awaitWake(t, fmt.Sprintf("failover, follow=%v", follow), got, released, left, follow)
		}

		// A master killed while its lock is waited for: the waiter's
		// connection breaks, go-redis redials it on the slot map the store
		// reloads, on the promoted replica, and the resubscription wakes the
		// waiter or it hears the release there.
		tag := namesOn(t, cc, "tag/killed", len(cl.Masters), 1, 1)[0]
		name := "{" + tag + "}/" + lockName(t)
		slot, err := cc.ClusterKeySlot(bg(t), name).Result()
		if err != nil {
			t.Fatal(err)
		}
		waiter, answered := shardWaiter(t, cl, &redisstore.Options{ShardedPubSub: redisstore.ShardedOn}, false)
		got := shardedWait(t, cc, waiter, answered, name, 2*hold, nil)
		master, err := cl.MasterOf(int(slot))
		if err != nil {
			t.Fatal(err)
		}
		var promote *testserver.Redis
		for i, m := range cl.Masters {
			if m == master {
				promote = cl.Replicas[i][0]
			}
		}
		if promote == nil {
			t.Fatalf("slot %d's master %s is not one of the masters as started", slot, master.Addr)
		}
		if err := master.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := cl.Failover(promote, true); err != nil {
			t.Fatal(err)
		}
		markFresh(t, cl)
		released := time.Now()
		left := redissonShardedRelease(t, cl, name)
		awaitWake(t, "master killed, replica promoted", got, released, left, true)
	})
}

// infoStat returns the integer key of an INFO commandstats line
// ("cmdstat_get:calls=3,usec=…"), or 0.
func infoStat(info, line, key string) int64 {
	for _, l := range strings.Split(info, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(l), line+":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(v, ",") {
			if n, ok := strings.CutPrefix(kv, key+"="); ok {
				c, _ := strconv.ParseInt(n, 10, 64)
				return c
			}
		}
	}
	return 0
}

// infoField returns the integer field of an INFO-style reply, or 0.
func infoField(info, field string) int64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
