package redisstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/faultproxy"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/leash-go/leash/redlock"
	"github.com/leash-go/leash/storetest"
)

// masters starts n independent redis-servers (no persistence) for a
// Redlock test.
func masters(t *testing.T, n int) []*testserver.Redis {
	t.Helper()
	ms := make([]*testserver.Redis, n)
	for i := range ms {
		ms[i] = testserver.NewRedis(t, testserver.RedisOptions{})
	}
	return ms
}

// quorumOver returns a Redlock store over one redisstore Store per address.
func quorumOver(t *testing.T, addrs []string, opts *redlock.Options) *redlock.Store {
	t.Helper()
	members := make([]driver.Store, len(addrs))
	for i, a := range addrs {
		members[i] = redisstore.New(newRDB(t, a), nil)
	}
	q, err := redlock.New(members, opts)
	if err != nil {
		t.Fatalf("redlock.New: %v", err)
	}
	t.Cleanup(func() { q.Close() }) // closes the members; a Client's Close may have already
	return q
}

func addrsOf(ms []*testserver.Redis) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Addr
	}
	return out
}

// proxied puts a fault proxy in front of each server, closed at cleanup.
func proxied(t *testing.T, ms []*testserver.Redis) []*faultproxy.Proxy {
	t.Helper()
	ps := make([]*faultproxy.Proxy, len(ms))
	for i, m := range ms {
		p, err := faultproxy.New(m.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		ps[i] = p
	}
	return ps
}

func proxyAddrs(ps []*faultproxy.Proxy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Addr
	}
	return out
}

func quorumClient(t *testing.T, q *redlock.Store, opts *leash.Options) *leash.Client {
	t.Helper()
	c, err := leash.New(q, opts)
	return testkit.Closing(t, c, err)
}

func TestRedlockConformance(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d masters", n), func(t *testing.T) {
			q := quorumOver(t, addrsOf(masters(t, n)), nil)
			storetest.Run(t, func(t *testing.T) driver.Store { return q })
		})
	}
}

// A minority of masters dead, paused or cut off changes nothing for the
// holder or for waiters; losing the majority tells the holder, before its
// validity ends, and no one else gets the lock until then.
func TestRedlockMinorityFaults(t *testing.T) {
	ms := masters(t, 3)
	ps := proxied(t, ms)
	const lease = 1500 * time.Millisecond
	holder := quorumClient(t, quorumOver(t, proxyAddrs(ps), nil), &leash.Options{Lease: lease})
	other := quorumClient(t, quorumOver(t, addrsOf(ms), nil), &leash.Options{Lease: lease})
	name := lockName(t)

	h, err := holder.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	// One master paused (SIGSTOP): renewals go on through the other two
	// for several leases.
	if err := ms[0].Pause(); err != nil {
		t.Fatal(err)
	}
	waitRenewals(t, h, 3*lease)
	if _, err := other.Mutex(name).TryLock(bg(t)); !errors.Is(err, leash.ErrNotAcquired) {
		t.Fatalf("TryLock by another client with one master paused = %v, want ErrNotAcquired", err)
	}
	if err := ms[0].Resume(); err != nil {
		t.Fatal(err)
	}
	// The paused master lost the lock (its lease ran out there); the next
	// renewals take it again there, so that a second fault is survived.
	awaitHeldOn(t, ms[0].Addr, name, h.Owner())
	// One master killed: the same.
	if err := ms[1].Kill(); err != nil {
		t.Fatal(err)
	}
	waitRenewals(t, h, 2*lease)
	if _, err := other.Mutex(name).TryLock(bg(t)); !errors.Is(err, leash.ErrNotAcquired) {
		t.Fatalf("TryLock by another client with one master dead = %v, want ErrNotAcquired", err)
	}
	// The holder cut off from a second master: it has no majority, and is
	// told before its validity ends.
	ps[2].Blackhole()
	select {
	case <-h.Lost():
	case <-time.After(10 * lease):
		t.Fatal("holder cut off from a majority was never told")
	}
	var le *leash.LostError
	if !errors.As(h.Err(), &le) || le.Reason != leash.ReasonUnreachable {
		t.Fatalf("holder's loss = %v, want ReasonUnreachable", h.Err())
	}
	lostAt := time.Now()
	// The other client, which reaches masters 0 and 2, gets it, but only
	// once the holder's lease has ended there.
	h2, err := other.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatalf("Lock after the holder lost its majority: %v", err)
	}
	if !time.Now().After(lostAt) {
		t.Fatal("granted before the holder was told")
	}
	if h2.Fence() <= h.Fence() {
		t.Errorf("fence after takeover = %d, want > %d", h2.Fence(), h.Fence())
	}
	_ = h2.Unlock(bg(t))
}

// awaitHeldOn waits until the redis-server at addr records owner as the
// holder of name.
func awaitHeldOn(t *testing.T, addr, name, owner string) {
	t.Helper()
	st := redisstore.New(newRDB(t, addr), nil)
	defer st.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := st.Inspect(bg(t), name)
		if err == nil && len(info.Owners) == 1 && info.Owners[0].Owner == owner {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never recorded %s as the holder of %q again: %+v, %v", addr, owner, name, info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRenewals waits for d, checking every lease/10 that h is still held.
// The waiting is the test's subject: a hold must survive it.
func waitRenewals(t *testing.T, h *leash.Hold, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := h.Err(); err != nil {
			t.Fatalf("hold lost with a minority of masters faulty: %v", err)
		}
		time.Sleep(d / 30)
	}
}

// A master restarted without persistence forgets the lock; its restart
// grace keeps it from granting the lock to someone else while the old
// holder's lease may still run. Without the grace (the restarted server
// declared fresh, an operator's mistake), two clients hold the lock at once:
// Kleppmann's counter-example, reproduced.
func TestRedlockRestartWithoutPersistence(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fresh bool // declare the restarted master fresh: no grace
	}{{"with the restart grace", false}, {"negative control: declared fresh after the restart", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ms := masters(t, 3)
			ps := proxied(t, ms)
			const lease = 3 * time.Second
			// The holder cannot reach master 2: it holds on masters 0 and 1.
			ps[2].Refuse()
			a := quorumClient(t, quorumOver(t, proxyAddrs(ps), nil), &leash.Options{Lease: lease})
			b := quorumClient(t, quorumOver(t, addrsOf(ms), nil), &leash.Options{Lease: lease})
			name := lockName(t)
			ha, err := a.Mutex(name).Lock(bg(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := ms[1].Restart(); err != nil { // forgets the lock
				t.Fatal(err)
			}
			if tc.fresh {
				if err := ms[1].MarkFresh(); err != nil {
					t.Fatal(err)
				}
			}
			hb, err := b.Mutex(name).TryLock(bg(t))
			if !tc.fresh {
				if !errors.Is(err, leash.ErrRestartGrace) {
					t.Fatalf("TryLock through the restarted master = %v, %v; want refused with ErrRestartGrace", hb, err)
				}
				if err := ha.Err(); err != nil {
					t.Fatalf("holder lost its lock: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("negative control: TryLock = %v; want the double grant the grace prevents", err)
			}
			if err := ha.Err(); err != nil {
				t.Fatalf("negative control: the first holder was already told (%v); the double grant was not shown", err)
			}
			t.Logf("double grant shown: holder fence %d still valid, second holder fence %d", ha.Fence(), hb.Fence())
		})
	}
}

// bareMember is a member without the optional capabilities (no fence
// floors), for the fencing test's negative control.
type bareMember struct{ driver.Store }

// The redlock package documentation's counter-example on three
// redis-servers: master B's fencing counter is far ahead of the others'
// (say its clock once ran ahead). Grant G1 is made by A and B (C cut off),
// grant G2 by A and C (B cut off). Without fence floors G2's token, the
// largest of A's and C's clock readings, is below G1's, B's counter; with
// them G1 raised A's counter to its token, and G2's is larger.
func TestRedlockFenceFloors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		floors bool
	}{
		{"fence floors", true},
		{"negative control: members without fence floors", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := masters(t, 3)
			ps := proxied(t, ms)
			name := lockName(t)
			ahead := int64(1) << 52 // B's counter, in µs: decades past the clock (Lua keeps integers exact below 2^53)
			if err := redisstore.New(newRDB(t, ms[1].Addr), nil).RaiseFence(bg(t), name, ahead); err != nil {
				t.Fatal(err)
			}
			members := make([]driver.Store, 3)
			for i, p := range ps {
				members[i] = redisstore.New(newRDB(t, p.Addr), nil)
				if !tc.floors {
					members[i] = bareMember{members[i]}
				}
			}
			q, err := redlock.New(members, nil)
			if err != nil {
				t.Fatal(err)
			}
			c := quorumClient(t, q, nil)
			fenceCut := func(cut *faultproxy.Proxy) int64 {
				t.Helper()
				cut.Refuse()
				cut.Reset()
				h, err := c.Mutex(name).TryLock(bg(t))
				cut.Heal()
				if err != nil {
					t.Fatalf("TryLock with one master cut off: %v", err)
				}
				if err := h.Unlock(bg(t)); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
				return h.Fence()
			}
			g1 := fenceCut(ps[2]) // on A and B
			g2 := fenceCut(ps[1]) // on A and C
			t.Logf("G1's token %d, G2's %d", g1, g2)
			if g1 != ahead+1 {
				t.Fatalf("G1's token = %d, want B's %d", g1, ahead+1)
			}
			if tc.floors && g2 <= g1 {
				t.Fatalf("G2's token %d <= G1's %d with fence floors: want it larger", g2, g1)
			}
			if !tc.floors && g2 >= g1 {
				t.Fatalf("G2's token %d >= G1's %d without fence floors: the control should go backwards", g2, g1)
			}
		})
	}
}
