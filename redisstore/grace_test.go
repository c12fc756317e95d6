package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestRestartGrace restarts a server without persistence while A holds a
// lock. With the grace (the default), B — a client that starts after the
// restart and never saw the old server — is refused until A's lease would
// have ended; with NoRestartGrace (the negative control; unchecked, as the
// user may not run INFO), B is granted the lock at once while A's lease
// still runs: a double grant.
func TestRestartGrace(t *testing.T) {
	for name, tc := range map[string]struct {
		grace      time.Duration
		lease      time.Duration
		doubleWant bool
	}{
		"default grace refuses until the old lease has ended": {0, 2 * time.Second, false},
		// The control's lease is long: on a slow machine the restart and
		// B's TryLock must still fall within it for the grant to be double.
		"no grace grants a lock whose lease still runs": {redisstore.NoRestartGrace, time.Minute, true},
	} {
		t.Run(name, func(t *testing.T) {
			lease := tc.lease
			srv := testserver.NewRedis(t, testserver.RedisOptions{})
			newC := func() *leash.Client {
				opts := &redisstore.Options{RestartGrace: tc.grace, AllowEviction: tc.grace == redisstore.NoRestartGrace}
				rdb := newRDB(t, srv.Addr)
				if opts.AllowEviction {
					rdb = noInfoRDB(t, srv.Addr)
				}
				c, err := leash.New(redisstore.New(rdb, opts), &leash.Options{Lease: lease})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			a := newC()
			ha, err := a.Mutex(lockName(t)).Lock(bg(t))
			if err != nil {
				t.Fatal(err)
			}
			granted := time.Now() // A's lease runs at least until granted+lease
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			b := newC()
			_, err = b.Mutex(lockName(t)).TryLock(bg(t))
			double := err == nil && time.Now().Before(granted.Add(lease))
			if double != tc.doubleWant {
				t.Fatalf("B's TryLock right after the restart = %v (double grant %v), want double grant %v", err, double, tc.doubleWant)
			}
			if double {
				return
			}
			var na *leash.NotAcquiredError
			if !errors.As(err, &na) || !errors.Is(err, leash.ErrRestartGrace) || na.Remaining <= 0 || na.Remaining > lease {
				t.Fatalf("B's TryLock in the grace = %v, want ErrRestartGrace with the grace left (0, %v]", err, lease)
			}
			hb, err := b.Mutex(lockName(t)).Lock(bg(t))
			if err != nil {
				t.Fatal(err)
			}
			if at := time.Now(); at.Before(granted.Add(lease)) {
				t.Errorf("B granted %v after A, within A's lease %v", at.Sub(granted), lease)
			}
			if hb.Fence() <= ha.Fence() {
				t.Errorf("B's token %d, want > A's %d", hb.Fence(), ha.Fence())
			}
			if err := ha.Err(); !errors.Is(err, leash.ErrLost) {
				t.Errorf("A's Err() once B holds the lock = %v, want ErrLost", err)
			}
		})
	}
}

// TestRestartGraceSkipsAnOldServer deletes the marker on a server that has
// been up longer than the grace: the store reads the uptime, lowers the
// marker, and grants at once.
func TestRestartGraceSkipsAnOldServer(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	rdb := newRDB(t, srv.Addr)
	time.Sleep(3100 * time.Millisecond) // up at least 2s by the conservative estimate: past the 1s grace
	if err := rdb.Del(bg(t), "leash:epoch").Err(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, srv.Addr, &leash.Options{Lease: time.Second})
	h, err := c.Mutex(lockName(t)).TryLock(bg(t))
	if err != nil {
		t.Fatalf("TryLock on a server up for 2s with a 1s grace = %v, want granted", err)
	}
	defer h.Unlock(bg(t))
	v, err := rdb.Get(bg(t), "leash:epoch").Result()
	start, _ := strconv.ParseInt(v, 10, 64)
	if err != nil || time.Since(time.UnixMicro(start)) < 2*time.Second {
		t.Errorf("marker = %q, %v; want the server's start time, over 2s ago", v, err)
	}
}

// TestRestartGraceEveryKind checks that every kind of fresh grant, not only
// a Mutex's, waits out the grace after a restart without persistence.
func TestRestartGraceEveryKind(t *testing.T) {
	const lease = 5 * time.Second // the refusals below must come within it, however slow the machine
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	before := time.Now()                  // the new server process starts after this
	if err := srv.Restart(); err != nil { // the marker is gone, as after a crash
		t.Fatal(err)
	}
	c := newClient(t, srv.Addr, &leash.Options{Lease: lease})
	base := lockName(t)
	tries := map[string]func() (*leash.Hold, error){
		"mutex":  func() (*leash.Hold, error) { return c.Mutex(base + "/m").TryLock(bg(t)) },
		"fair":   func() (*leash.Hold, error) { return c.FairMutex(base+"/f", nil).TryLock(bg(t)) },
		"read":   func() (*leash.Hold, error) { return c.RWMutex(base+"/r", nil).TryRLock(bg(t)) },
		"write":  func() (*leash.Hold, error) { return c.RWMutex(base+"/w", nil).TryLock(bg(t)) },
		"permit": func() (*leash.Hold, error) { return c.Semaphore(base+"/p", 3).TryAcquire(bg(t)) },
		"multi":  func() (*leash.Hold, error) { return c.MultiLock([]string{base + "/x", base + "/y"}).TryLock(bg(t)) },
	}
	for kind, try := range tries {
		_, err := try()
		var na *leash.NotAcquiredError
		if !errors.As(err, &na) || !errors.Is(err, leash.ErrRestartGrace) || na.Remaining <= 0 || na.Remaining > lease {
			t.Errorf("%s right after the restart = %v, want refused by the grace, with the grace left", kind, err)
		}
	}
	// A refusal writes nothing of the name: not even a semaphore's count.
	if keys, err := newRDB(t, srv.Addr).Keys(bg(t), "*"+base+"*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("keys of the names after the refusals: %q, %v; want none", keys, err)
	}
	waits := map[string]func(context.Context) (*leash.Hold, error){
		"mutex":  c.Mutex(base + "/m").Lock,
		"fair":   c.FairMutex(base+"/f", nil).Lock,
		"read":   c.RWMutex(base+"/r", nil).RLock,
		"write":  c.RWMutex(base+"/w", nil).Lock,
		"permit": c.Semaphore(base+"/p", 3).Acquire,
		"multi":  c.MultiLock([]string{base + "/x", base + "/y"}).Lock,
	}
	for kind, lock := range waits {
		ctx, cancel := context.WithTimeout(bg(t), 3*lease)
		h, err := lock(ctx) // waits out the rest of the grace
		cancel()
		if err != nil {
			t.Errorf("%s, waiting out the grace = %v, want granted", kind, err)
			continue
		}
		if at := time.Now(); at.Before(before.Add(lease)) {
			t.Errorf("%s granted %v after the restart began, inside the %v grace", kind, at.Sub(before), lease)
		}
		if err := h.Unlock(bg(t)); err != nil {
			t.Error(err)
		}
	}
}

// TestMarkFresh: a server declared new grants at once, where after a plain
// restart it would wait out the grace.
func TestMarkFresh(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	s := redisstore.New(newRDB(t, srv.Addr), nil)
	if err := s.MarkFresh(bg(t)); err != nil {
		t.Fatal(err)
	}
	c, err := leash.New(s, &leash.Options{Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := c.Mutex(lockName(t)).TryLock(bg(t))
	if err != nil {
		t.Fatalf("TryLock after MarkFresh = %v, want granted at once", err)
	}
	_ = h.Unlock(bg(t))
}

// noInfoRDB is a client of srv's user "noinfo", which may run every command
// but INFO (and CONFIG).
func noInfoRDB(t *testing.T, addr string) *redis.Client {
	t.Helper()
	admin := newRDB(t, addr)
	if err := admin.Do(bg(t), "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, Username: "noinfo", Password: "pw", MaxRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestRestartFromSnapshot restarts a server from an RDB snapshot taken
// before A took its lock: the snapshot holds the restart marker but not A's
// lock. B, a client that starts after the restart, must be refused by the
// grace until A's lease would have ended, and so must A's own client, whose
// connections were all cut; the negative control (the marker-only rule of
// earlier versions) grants B the lock at once: a double grant.
func TestRestartFromSnapshot(t *testing.T) {
	const lease = 2 * time.Second
	for name, markerOnly := range map[string]bool{
		"the run id in the marker catches the restart":  false,
		"the marker alone misses it (negative control)": true,
	} {
		t.Run(name, func(t *testing.T) {
			srv := testserver.NewRedis(t, testserver.RedisOptions{})
			newC := func() *leash.Client {
				s := redisstore.New(newRDB(t, srv.Addr), nil)
				if markerOnly {
					s = redisstore.MarkerOnly(s)
				}
				c, err := leash.New(s, &leash.Options{Lease: lease})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			a := newC()
			if _, err := a.Mutex(lockName(t) + "/warm").TryLock(bg(t)); err != nil {
				t.Fatal(err) // the client has read the server's identity
			}
			if err := newRDB(t, srv.Addr).Save(bg(t)).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Mutex(lockName(t)).Lock(bg(t)); err != nil {
				t.Fatal(err)
			}
			granted := time.Now()
			if err := srv.Restart(); err != nil { // SIGKILL, then start from the snapshot
				t.Fatal(err)
			}
			b := newC()
			_, errB := b.Mutex(lockName(t)).TryLock(bg(t))
			_, errA := a.Mutex(lockName(t) + "/other").TryLock(bg(t))
			if markerOnly {
				if errB != nil || time.Now().After(granted.Add(lease)) {
					t.Fatalf("control: B's TryLock = %v; want granted within A's lease (a double grant), or the control proves nothing", errB)
				}
				return
			}
			for who, err := range map[string]error{"B": errB, "A's client": errA} {
				if !errors.Is(err, leash.ErrRestartGrace) {
					t.Errorf("%s's TryLock right after the restart from a snapshot = %v, want ErrRestartGrace", who, err)
				}
			}
			if _, err := b.Mutex(lockName(t)).Lock(bg(t)); err != nil {
				t.Fatal(err)
			}
			if at := time.Now(); at.Before(granted.Add(lease)) {
				t.Errorf("B granted %v after A, within A's lease %v", at.Sub(granted), lease)
			}
		})
	}
}

// TestNoRestartGraceIsChecked: turning the grace off declares that the
// server loses no acknowledged write, and the Store checks it.
func TestNoRestartGraceIsChecked(t *testing.T) {
	for name, tc := range map[string]struct {
		opts testserver.RedisOptions
		want error
	}{
		"appendonly no":                {testserver.RedisOptions{}, redisstore.ErrNotDurable},
		"appendfsync everysec":         {testserver.RedisOptions{AOF: true, Args: []string{"--appendfsync", "everysec"}}, redisstore.ErrNotDurable},
		"appendonly yes, fsync always": {testserver.RedisOptions{AOF: true}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			srv := testserver.NewRedis(t, tc.opts)
			c, err := leash.New(redisstore.New(newRDB(t, srv.Addr), &redisstore.Options{RestartGrace: redisstore.NoRestartGrace}), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			h, err := c.Mutex(lockName(t)).TryLock(bg(t))
			if !errors.Is(err, tc.want) {
				t.Fatalf("TryLock with NoRestartGrace on %s = %v, want %v", name, err, tc.want)
			}
			if err == nil {
				_ = h.Unlock(bg(t))
			}
		})
	}
}

// TestNoInfoIsRefused: a user that may not run INFO cannot tell a restarted
// server, so every acquire fails, saying how to fix it.
func TestNoInfoIsRefused(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	c, err := leash.New(redisstore.New(noInfoRDB(t, srv.Addr), nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Mutex(lockName(t)).TryLock(bg(t))
	if !errors.Is(err, redisstore.ErrNoServerInfo) || !strings.Contains(err.Error(), "+info") {
		t.Fatalf("TryLock without INFO = %v, want ErrNoServerInfo naming +info", err)
	}
}

// TestRepromotedProcessWaitsOutTheGrace demotes a primary P and promotes it
// again, the same process with the same run_id: while its replica Q was
// promoted, X took a lock on P alone, and P's resync from Q erased it. The
// marker P wrote before names P's run_id, so a rule that trusted the run_id
// alone granted the lock to Y at once while X's lease still ran; the
// replication id in the marker, new with every promotion, starts the grace.
func TestRepromotedProcessWaitsOutTheGrace(t *testing.T) {
	p, q := repromotePair(t)
	name := lockName(t)
	granted, hx := repromote(t, p, q, name)
	_, err := repromoteClient(t, p, nil).Mutex(name).TryLock(bg(t))
	wantGraceAfterRepromotion(t, name, granted, hx, err)
}

// TestStaleViewOfARepromotedProcess is TestRepromotedProcessWaitsOutTheGrace
// for a client that read the primary's INFO before the failover and holds
// no lock meanwhile, so that no renewal round re-reads it and no dial shows
// a change: Redis keeps a client's connections open when the server is made
// a replica and promoted again. Its view still names the process as never
// promoted, which the marker resynced from the replica matches, so only its
// age can make the client read INFO anew: once the view is CheckInterval
// old, Y waits out the grace. The negative control keeps the view until a
// dial (ViewNeverAges), as earlier versions did, and grants X's lock to Y
// while X's lease runs.
func TestStaleViewOfARepromotedProcess(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(*redisstore.Store) *redisstore.Store
		fixed bool
	}{
		{"view read anew once CheckInterval old", nil, true},
		{"negative control: view kept until a dial", redisstore.ViewNeverAges, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, q := repromotePair(t)
			const check = 50 * time.Millisecond
			// Y reads P's INFO now, taking and releasing a lock of another
			// name, and then holds nothing. The first Lock dials the
			// connection the others use, which makes the next one read
			// INFO again: from then on the view stands until a dial.
			y := repromoteClient(t, p, tc.store, func(o *redisstore.Options) { o.CheckInterval = check })
			for range 2 {
				hy, err := y.Mutex(lockName(t) + "/before").TryLock(bg(t))
				if err != nil {
					t.Fatal(err)
				}
				if err := hy.Unlock(bg(t)); err != nil {
					t.Fatal(err)
				}
			}
			viewRead := time.Now()
			name := lockName(t)
			granted, hx := repromote(t, p, q, name)
			// The view's age is what the fix goes by: wait until Y's is
			// older than its CheckInterval (the resync mostly took longer
			// already).
			for time.Since(viewRead) <= check {
				time.Sleep(10 * time.Millisecond)
			}
			_, err := y.Mutex(name).TryLock(bg(t))
			if !tc.fixed {
				if err != nil || !time.Now().Before(granted.Add(repromoteLease)) {
					t.Fatalf("negative control: Y's TryLock = %v, want a grant on its stale view within X's lease (the double grant the fix prevents)", err)
				}
				return
			}
			wantGraceAfterRepromotion(t, name, granted, hx, err)
		})
	}
}

// repromoteLease is the lease of the clients of the re-promotion tests.
const repromoteLease = time.Minute

// repromotePair starts a primary P and its replica Q.
func repromotePair(t *testing.T) (p, q *testserver.Redis) {
	p = testserver.NewRedis(t, testserver.RedisOptions{})
	return p, testserver.NewRedis(t, testserver.RedisOptions{ReplicaOf: p.Addr})
}

// repromoteClient returns a client of p with repromoteLease, whose Store is
// made with the options set (none: defaults) and wrapped by wrap (if any).
func repromoteClient(t *testing.T, p *testserver.Redis, wrap func(*redisstore.Store) *redisstore.Store, set ...func(*redisstore.Options)) *leash.Client {
	t.Helper()
	var opts redisstore.Options
	for _, f := range set {
		f(&opts)
	}
	s := redisstore.New(newRDB(t, p.Addr), &opts)
	if wrap != nil {
		s = wrap(s)
	}
	c, err := leash.New(s, &leash.Options{Lease: repromoteLease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// repromote plays a failover and a failback on P and its replica Q: once Q
// has P's marker, Q is promoted while P, cut off, still takes writes; a new
// client X takes name on P alone; P rejoins under Q, and its resync erases
// X's grant; P is promoted again, the same process with the same run_id. It
// returns when X was granted, and X's hold.
func repromote(t *testing.T, p, q *testserver.Redis, name string) (time.Time, *leash.Hold) {
	t.Helper()
	pa, qa := newRDB(t, p.Addr), newRDB(t, q.Addr)
	marker, err := pa.Get(bg(t), "leash:epoch").Result()
	if err != nil {
		t.Fatal(err)
	}
	deadline := bg(t)
	await := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if deadline.Err() != nil {
				t.Fatalf("never: %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	await("Q has P's marker", func() bool { v, _ := qa.Get(bg(t), "leash:epoch").Result(); return v == marker })
	if err := qa.ReplicaOf(bg(t), "no", "one").Err(); err != nil { // Q promoted; P, cut off, still takes writes
		t.Fatal(err)
	}
	hx, err := repromoteClient(t, p, nil).Mutex(name).TryLock(bg(t)) // on P alone
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	host, port, _ := strings.Cut(q.Addr, ":")
	if err := pa.ReplicaOf(bg(t), host, port).Err(); err != nil { // P rejoins under Q: X's grant is gone
		t.Fatal(err)
	}
	await("P resynced from Q", func() bool {
		info, _ := pa.Info(bg(t), "replication").Result()
		n, _ := pa.Exists(bg(t), name).Result()
		return n == 0 && strings.Contains(info, "master_link_status:up")
	})
	if err := pa.ReplicaOf(bg(t), "no", "one").Err(); err != nil { // failback: the same P is primary again
		t.Fatal(err)
	}
	return granted, hx
}

// wantGraceAfterRepromotion fails t unless err, Y's TryLock of name after
// repromote, is the restart grace's refusal: a grant while X's lease (from
// granted) runs is a double grant.
func wantGraceAfterRepromotion(t *testing.T, name string, granted time.Time, hx *leash.Hold, err error) {
	t.Helper()
	if err == nil && time.Now().Before(granted.Add(repromoteLease)) {
		t.Fatalf("Y granted %q while X (token %d) still holds its lease: a double grant", name, hx.Fence())
	}
	if !errors.Is(err, leash.ErrRestartGrace) {
		t.Errorf("Y's TryLock on the re-promoted primary = %v, want ErrRestartGrace", err)
	}
}
