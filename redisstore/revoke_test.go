package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/redis/go-redis/v9"
)

// A handover is one force unlock as the tests see it: when the old holder
// was told (zero if never), a lower bound of when its lease ended on the
// server (which its validity never outlasts), and when the name was next
// granted.
type handover struct {
	told, leaseEnd, granted time.Time
}

// early returns how long the next grant came before the old holder was
// told or its lease ended, whichever came first: 0 when the handover was
// safe.
func (h handover) early() time.Duration {
	end := h.leaseEnd
	if !h.told.IsZero() && h.told.Before(end) {
		end = h.told
	}
	if h.granted.Before(end) {
		return end.Sub(h.granted)
	}
	return 0
}

// leaseEnd returns a lower bound of when name's lease ends on the server.
func leaseEnd(t *testing.T, rdb *redis.Client, name string) time.Time {
	t.Helper()
	sent := time.Now()
	ttl, err := rdb.PTTL(bg(t), name).Result()
	if err != nil || ttl <= 0 {
		t.Fatalf("PTTL(%q) = %v, %v; want a lease", name, ttl, err)
	}
	return sent.Add(ttl - time.Millisecond) // PTTL is rounded down to the millisecond
}

// revokeListening waits until the client that holds name listens for
// revocations.
func revokeListening(t *testing.T, c *leash.Client, rdb *redis.Client, name string) {
	t.Helper()
	info, err := c.Inspect(bg(t), name)
	if err != nil || len(info.Owners) != 1 {
		t.Fatalf("Inspect(%q) = %+v, %v; want one holder", name, info, err)
	}
	ch := "leash_revoke__channel:" + driver.OwnerClient(info.Owners[0].Owner)
	waitFor(t, "the holder to listen for revocations", func() bool { return numSub(t, rdb, ch) == 1 })
}

// told reads the holder child's lines up to its "told <unix ns> <reason>".
func (h *holder) told(t *testing.T) (time.Time, string) {
	t.Helper()
	l, err := h.Await("told ", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(l)
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || len(f) != 3 {
		t.Fatalf("holder said %q, want told <ns> <reason>", l)
	}
	return time.Unix(0, ns), f[2]
}

// A live holder in another process is told "revoked" before the name is
// granted to the waiter, and its acknowledgement frees the name long before
// its lease would have ended.
func TestForceUnlockTellsLiveHolder(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	name := lockName(t)
	const lease = 30 * time.Second
	child := startChild(t, srv.Addr, name, lease, "mutex", false, "LEASH_TEST_TOLD=1")
	c := newClient(t, srv.Addr, nil)
	revokeListening(t, c, rdb, name)
	got := grantedAt(t, func() (*leash.Hold, error) { return c.Mutex(name).Lock(bg(t)) })
	waitFor(t, "the waiter to subscribe", func() bool { return numSub(t, rdb, "redisson_lock__channel:{"+name+"}") == 1 })
	end := leaseEnd(t, rdb, name)
	if ok, err := c.ForceUnlock(bg(t), name); err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	told, reason := child.told(t)
	h := handover{told: told, leaseEnd: end, granted: <-got}
	if reason != "revoked" {
		t.Errorf("holder lost its lock for %q, want revoked", reason)
	}
	if d := h.early(); d > 0 {
		t.Errorf("the name was granted %v before the holder was told", d)
	}
	if !h.granted.Before(end) {
		t.Errorf("the name was granted only when the holder's lease ran out: its acknowledgement did not free it")
	}
}

// A holder that cannot hear (paused, killed) keeps the name out of use
// until its lease ends; freeing at once (ForceUnlockNow, the negative
// control) hands it over while the paused holder's lease still runs.
func TestForceUnlockSilentHolder(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	const lease = 3 * time.Second
	for _, tc := range []struct {
		name  string
		kill  bool
		now   bool // the control: free at once
		early bool // the control must see an early grant
	}{
		{name: "paused"},
		{name: "killed", kill: true},
		{name: "paused, freed at once (control)", now: true, early: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := lockName(t)
			child := startChild(t, srv.Addr, name, lease, "mutex", false, "LEASH_TEST_TOLD=1")
			c := newClient(t, srv.Addr, nil)
			revokeListening(t, c, rdb, name)
			if tc.kill {
				child.Kill()
			} else {
				if err := child.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = child.Signal(syscall.SIGCONT) }()
				// kill returns before the signal is acted on: a child still
				// running could hear the revocation, which is not this test.
				waitFor(t, "the holder to stop", func() bool { return stopped(t, child.Pid()) })
			}
			end := leaseEnd(t, rdb, name)
			force := c.ForceUnlock
			if tc.now {
				force = c.ForceUnlockNow
			}
			if ok, err := force(bg(t), name); err != nil || !ok {
				t.Fatalf("force unlock = %v, %v", ok, err)
			}
			h, err := c.Mutex(name).Lock(bg(t))
			if err != nil {
				t.Fatal(err)
			}
			hv := handover{leaseEnd: end, granted: time.Now()} // never told: paused or dead
			defer h.Unlock(bg(t))
			if d := hv.early(); (d > 0) != tc.early {
				t.Errorf("granted %v before the silent holder's lease ended; want early %v", d, tc.early)
			}
		})
	}
}

// A Redisson holder (raw commands in Redisson's layout) force-unlocked by
// leash: Redisson's own checks still see the name held, its watchdog no
// longer finds its field, its unlock fails as Redisson's does for a lock it
// lost, and the name frees when the Redisson lease ends.
func TestForceUnlockRedissonHolder(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, nil)
	name := lockName(t)
	javaOwner := "0f8fad5b-d9cb-469f-a165-70867728950e:57"
	other := "0f8fad5b-d9cb-469f-a165-70867728950e:58"
	if err := rdb.HIncrBy(bg(t), name, javaOwner, 1).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(bg(t), name, 2*time.Second)
	end := leaseEnd(t, rdb, name)
	if ok, err := c.ForceUnlock(bg(t), name); err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	// Redisson's acquire condition: the key is absent or holds the caller's field.
	tryLock := `if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[1]) == 1) then return nil end; return redis.call('pttl', KEYS[1])`
	if v, err := rdb.Eval(bg(t), tryLock, []string{name}, other).Result(); err != nil || v.(int64) <= 0 {
		t.Errorf("Redisson tryLock on the tombstone = %v, %v; want the remaining lease (held)", v, err)
	}
	// Redisson's watchdog: extend only while its field is there.
	renew := `if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then redis.call('pexpire', KEYS[1], 30000); return 1 end; return 0`
	if v, err := rdb.Eval(bg(t), renew, []string{name}, javaOwner).Result(); err != nil || v.(int64) != 0 {
		t.Errorf("Redisson renewal of the revoked lock = %v, %v; want 0 (not extended)", v, err)
	}
	if ttl, _ := rdb.PTTL(bg(t), name).Result(); ttl > 2*time.Second {
		t.Errorf("tombstone PTTL = %v, want the Redisson lease's remainder", ttl)
	}
	// Redisson's unlock finds no field: IllegalMonitorStateException, nothing changed.
	if n, _ := rdb.HExists(bg(t), name, javaOwner).Result(); n {
		t.Error("the revoked Redisson owner's field is still there")
	}
	h, err := c.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(bg(t))
	if d := (handover{leaseEnd: end, granted: time.Now()}).early(); d > 0 {
		t.Errorf("leash was granted %v before the Redisson holder's lease ended", d)
	}
}

// Inspect shows a tombstone as revoked, not held; a second force unlock
// finds nothing more to revoke; ForceUnlockNow clears it.
func TestRevokedInspectAndNow(t *testing.T) {
	srv := sharedRedis(t)
	name := lockName(t)
	holder := newClient(t, srv.Addr, &leash.Options{Lease: time.Minute})
	c := newClient(t, srv.Addr, nil)
	h, err := holder.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	revokeListening(t, c, newRDB(t, srv.Addr), name)
	if ok, err := c.ForceUnlock(bg(t), name); err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	<-h.Lost()
	if !errors.Is(h.Err(), leash.ErrRevoked) {
		t.Errorf("Err() = %v, want ErrRevoked", h.Err())
	}
	if err := h.Unlock(context.Background()); !errors.Is(err, leash.ErrRevoked) {
		t.Errorf("Unlock after the revocation = %v, want ErrRevoked", err)
	}
	// The acknowledgement may or may not have landed yet: either the
	// tombstone is there (revoked, not held) or the name is free.
	info, err := c.Inspect(bg(t), name)
	if err != nil || info.Held {
		t.Errorf("Inspect after the revocation = %+v, %v; want not held", info, err)
	}
	if ok, err := c.ForceUnlockNow(bg(t), name); err != nil {
		t.Fatalf("ForceUnlockNow = %v, %v", ok, err)
	}
	if info, _ := c.Inspect(bg(t), name); info.Held || len(info.Revoked) > 0 {
		t.Errorf("Inspect after ForceUnlockNow = %+v, want free", info)
	}
}

// stopped reports whether process pid is stopped (state T in /proc).
func stopped(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't')
}

// TestRevokeSkipsEndedReader: a write lock whose holder downgraded, and
// whose read lease has since ended (its field still in the hash), is
// revoked from the writer alone: the ended reader, which will never
// acknowledge, is purged first, so the name is free once the writer's
// client has acknowledged (it was kept out of use until the writer's lease
// ran out, an hour here).
func TestRevokeSkipsEndedReader(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	n := lockName(t)
	holder := newClient(t, srv.Addr, &leash.Options{Lease: time.Hour})
	other := newClient(t, srv.Addr, nil)
	w, err := holder.RWMutex(n, nil).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	revokeListening(t, other, rdb, n)
	// The downgrade's read hold, ended a second ago.
	ended := driver.OwnerClient(w.Owner()) + ":999"
	now, err := rdb.Time(bg(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	readers := "leash_rw_readers:{" + n + "}"
	if err := rdb.HSet(bg(t), n, ended, 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(bg(t), readers, redis.Z{Score: float64(now.UnixMilli() - 1000), Member: ended}).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := other.ForceUnlock(bg(t), n); err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	select {
	case <-w.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the writer was not told of the revocation")
	}
	waitFor(t, "the name free once the writer acknowledged", func() bool {
		h, err := other.RWMutex(n, nil).TryLock(bg(t))
		if err != nil {
			return false
		}
		_ = h.Unlock(bg(t))
		return true
	})
}
