package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// userData is one kind of application data that may sit under a lock name.
type userData struct {
	name  string
	write func(ctx context.Context, rdb *redis.Client, key string) error
}

var userDataKinds = []userData{
	{"string", func(ctx context.Context, rdb *redis.Client, k string) error { return rdb.Set(ctx, k, "hello", 0).Err() }},
	{"text hash", func(ctx context.Context, rdb *redis.Client, k string) error {
		return rdb.HSet(ctx, k, "home", "a").Err()
	}},
	{"counter hash", func(ctx context.Context, rdb *redis.Client, k string) error {
		return rdb.HSet(ctx, k, "home", 10, "about", 5).Err()
	}},
	{"counter hash keyed like owners", func(ctx context.Context, rdb *redis.Client, k string) error {
		// A rate limiter's counts per user: fields "<word>:<n>" with
		// positive counts. Only a UUID before the colon makes an owner.
		return rdb.HSet(ctx, k, "user:1", 5, "user:22", 1).Err()
	}},
	{"list", func(ctx context.Context, rdb *redis.Client, k string) error { return rdb.RPush(ctx, k, "a", "b").Err() }},
	{"set", func(ctx context.Context, rdb *redis.Client, k string) error { return rdb.SAdd(ctx, k, "a", "b").Err() }},
	{"zset", func(ctx context.Context, rdb *redis.Client, k string) error {
		return rdb.ZAdd(ctx, k, redis.Z{Score: 100, Member: "alice"}, redis.Z{Score: 200, Member: "bob"}).Err()
	}},
	{"stream", func(ctx context.Context, rdb *redis.Client, k string) error {
		return rdb.XAdd(ctx, &redis.XAddArgs{Stream: k, Values: []any{"f", "v"}}).Err()
	}},
}

// keyState is what a user would check of their key: its type, contents and
// time to live.
type keyState struct {
	typ, dump string
	pttl      time.Duration
}

func stateOf(t *testing.T, rdb *redis.Client, key string) keyState {
	t.Helper()
	ctx := bg(t)
	st := keyState{typ: rdb.Type(ctx, key).Val(), pttl: rdb.PTTL(ctx, key).Val()}
	st.dump, _ = rdb.Dump(ctx, key).Result()
	return st
}

// checkUnchanged fails t if key's type or contents differ from before, or
// its TTL was added or extended.
func checkUnchanged(t *testing.T, rdb *redis.Client, key string, before keyState) {
	t.Helper()
	after := stateOf(t, rdb, key)
	if after.typ != before.typ || after.dump != before.dump {
		t.Errorf("%q is now a %s (dump %q), want the %s it was (dump %q)", key, after.typ, after.dump, before.typ, before.dump)
	}
	switch {
	case before.pttl < 0 && after.pttl != before.pttl:
		t.Errorf("%q has PTTL %v now, want none as before (%v)", key, after.pttl, before.pttl)
	case before.pttl >= 0 && (after.pttl < 0 || after.pttl > before.pttl):
		t.Errorf("%q has PTTL %v now, want at most the %v it had", key, after.pttl, before.pttl)
	}
}

// lockFunc is a Lock or TryLock method value.
type lockFunc func(context.Context) (*leash.Hold, error)

// kindLockers give the waiting and the one-attempt acquire of each kind on a
// name; MultiLock takes the name with a free one beside it.
var kindLockers = []struct {
	name  string
	locks func(c *leash.Client, n string) (wait, try lockFunc)
}{
	{"mutex", func(c *leash.Client, n string) (lockFunc, lockFunc) { m := c.Mutex(n); return m.Lock, m.TryLock }},
	{"fair", func(c *leash.Client, n string) (lockFunc, lockFunc) {
		m := c.FairMutex(n, nil)
		return m.Lock, m.TryLock
	}},
	{"read", func(c *leash.Client, n string) (lockFunc, lockFunc) {
		m := c.RWMutex(n, nil)
		return m.RLock, m.TryRLock
	}},
	{"write", func(c *leash.Client, n string) (lockFunc, lockFunc) { m := c.RWMutex(n, nil); return m.Lock, m.TryLock }},
	{"permit", func(c *leash.Client, n string) (lockFunc, lockFunc) {
		s := c.Semaphore(n, 3)
		return s.Acquire, s.TryAcquire
	}},
	{"multilock", func(c *leash.Client, n string) (lockFunc, lockFunc) {
		m := c.MultiLock([]string{n, n + "/free"})
		return m.Lock, m.TryLock
	}},
}

// TestUserDataIsNeverTouched puts each kind of application data under a
// lock name, with and without a TTL, and runs every operation of every lock
// kind on it: each is refused with ErrNotALock (never "not acquired", never
// a store error of unknown outcome), and the key keeps its type, contents
// and TTL.
func TestUserDataIsNeverTouched(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	for _, ud := range userDataKinds {
		for _, ttl := range []time.Duration{0, time.Hour} {
			withTTL := "without TTL"
			if ttl > 0 {
				withTTL = "with TTL"
			}
			t.Run(ud.name+" "+withTTL, func(t *testing.T) {
				c := newClient(t, srv.Addr, nil)
				ctx := bg(t)
				key := lockName(t)
				if err := ud.write(ctx, rdb, key); err != nil {
					t.Fatal(err)
				}
				if ttl > 0 {
					rdb.PExpire(ctx, key, ttl)
				}
				before := stateOf(t, rdb, key)
				for _, k := range kindLockers {
					lock, try := k.locks(c, key)
					for wait, acquire := range map[bool]lockFunc{true: lock, false: try} {
						h, err := acquire(ctx)
						if h != nil {
							h.Unlock(ctx)
						}
						var nal *leash.NotALockError
						if !errors.As(err, &nal) || !errors.Is(err, leash.ErrNotALock) || errors.Is(err, leash.ErrNotAcquired) || nal.Name != key {
							t.Errorf("%s (wait %v) on a %s = %v, want a *NotALockError for %q", k.name, wait, ud.name, err, key)
						}
					}
				}
				if _, err := c.Inspect(ctx, key); !errors.Is(err, leash.ErrNotALock) {
					t.Errorf("Inspect = %v, want ErrNotALock", err)
				}
				if freed, err := c.ForceUnlock(ctx, key); !errors.Is(err, leash.ErrNotALock) || freed {
					t.Errorf("ForceUnlock = %v, %v; want false, ErrNotALock", freed, err)
				}
				if err := c.Semaphore(key, 2).SetPermits(ctx, 5); !errors.Is(err, leash.ErrNotALock) {
					t.Errorf("SetPermits = %v, want ErrNotALock", err)
				}
				checkUnchanged(t, rdb, key, before)
				s := redisstore.New(rdb, nil)
				defer s.Close()
				if names, err := s.List(ctx, key+"*"); err != nil || len(names) != 0 {
					t.Errorf("List = %q, %v; want nothing", names, err)
				}
				if err := c.Close(); err != nil {
					t.Errorf("Close = %v, want nil: nothing was granted, nothing is left to release", err)
				}
				checkUnchanged(t, rdb, key, before)
			})
		}
	}
}

// TestLockReplacedByUserData takes a lock of each kind, puts application
// data where the lock was, and checks that renewal and release report the
// lock lost (released elsewhere) without touching the data.
func TestLockReplacedByUserData(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	for _, k := range kindLockers {
		t.Run(k.name, func(t *testing.T) {
			c := newClient(t, srv.Addr, nil)
			ctx := bg(t)
			key := lockName(t)
			lock, _ := k.locks(c, key)
			h, err := lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rdb.Del(ctx, key)
			rdb.Set(ctx, key, "hello", 0)
			before := stateOf(t, rdb, key)
			var lost *leash.LostError
			if err := h.Renew(ctx); !errors.As(err, &lost) || lost.Reason != leash.ReasonReleasedElsewhere {
				t.Errorf("Renew = %v, want a loss: released elsewhere", err)
			}
			if err := h.Unlock(ctx); !errors.Is(err, leash.ErrLost) {
				t.Errorf("Unlock = %v, want ErrLost", err)
			}
			checkUnchanged(t, rdb, key, before)
			if err := c.Close(); err != nil {
				t.Errorf("Close = %v, want nil", err)
			}
		})
	}
}

// TestReleaseOnUserDataIsNotHeld releases, at the store, locks of every kind
// whose name holds application data: ErrNotHeld and ErrNotALock, the data
// unchanged.
func TestReleaseOnUserDataIsNotHeld(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	s := redisstore.New(rdb, nil)
	defer s.Close()
	ctx := bg(t)
	key := lockName(t)
	rdb.Set(ctx, key, "hello", 0)
	before := stateOf(t, rdb, key)
	for _, kind := range []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindRead, driver.KindWrite, driver.KindPermit} {
		release := map[string]func(driver.Request) error{
			"all": func(r driver.Request) error { return s.Release(ctx, r) },
			"one": func(r driver.Request) error { _, err := s.ReleaseOne(ctx, r); return err },
		}
		for mode, rel := range release {
			err := rel(driver.Request{Kind: kind, Name: key, Owner: "someone:1", Lease: time.Minute})
			if kind == driver.KindRead {
				// A reader that holds no lease there has nothing to say about the name.
				if !errors.Is(err, leash.ErrNotHeld) {
					t.Errorf("Release(%v, %s) = %v, want ErrNotHeld", kind, mode, err)
				}
				continue
			}
			if !errors.Is(err, leash.ErrNotHeld) || !errors.Is(err, leash.ErrNotALock) {
				t.Errorf("Release(%v, %s) = %v, want ErrNotHeld and ErrNotALock", kind, mode, err)
			}
		}
	}
	if err := s.Withdraw(ctx, driver.Request{Kind: driver.KindFair, Name: key, Owner: "someone:1"}); err != nil {
		t.Errorf("Withdraw = %v, want nil", err)
	}
	checkUnchanged(t, rdb, key, before)
}

// TestSemaphoreAndLockNamesAreNotALock checks that a semaphore acquire on a
// held lock, and a lock acquire on a semaphore, are refused as not a lock,
// and that a force release of either still works.
func TestSemaphoreAndLockNamesAreNotALock(t *testing.T) {
	srv := sharedRedis(t)
	c := newClient(t, srv.Addr, nil)
	ctx := bg(t)
	sem, lock := lockName(t)+"/sem", lockName(t)+"/lock"
	hs, err := c.Semaphore(sem, 2).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Unlock(ctx)
	hl, err := c.Mutex(lock).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Unlock(ctx)
	if _, err := c.Mutex(sem).TryLock(ctx); !errors.Is(err, leash.ErrNotALock) {
		t.Errorf("TryLock on a semaphore = %v, want ErrNotALock", err)
	}
	if _, err := c.Semaphore(lock, 2).TryAcquire(ctx); !errors.Is(err, leash.ErrNotALock) {
		t.Errorf("TryAcquire on a lock = %v, want ErrNotALock", err)
	}
	for _, n := range []string{sem, lock} {
		if info, err := c.Inspect(ctx, n); err != nil || !info.Held {
			t.Errorf("Inspect(%q) = %+v, %v; want held", n, info, err)
		}
	}
}

// TestLeashOwnKeysAreNotLockNames checks that the names of leash's own keys
// are refused before any round trip, with the reason.
func TestLeashOwnKeysAreNotLockNames(t *testing.T) {
	s := redisstore.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), nil)
	defer s.Close()
	for _, n := range []string{"leash:epoch", "leash:epoch:{x}", "redisson_lock_token:{x}", "redisson_lock__channel:{x}",
		"redisson_unlock_latch:{x}:abc-1", "leash_fair_queue:{x}", "leash_fair_places:{x}", "leash_fair__channel:{x}",
		"leash_rw_readers:{x}", "leash_rw_writers:{x}", "leash_rw__channel:{x}", "leash_semaphore_size:{x}",
		"leash_semaphore__channel:{x}", "leash_client:{x}"} {
		if err := s.CheckName(n); err == nil {
			t.Errorf("CheckName(%q) = nil, want a refusal", n)
		}
	}
	for _, n := range []string{"leash", "leash:epochs", "orders:{x}", "my_leash_fair_queue:{x}"} {
		if err := s.CheckName(n); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", n, err)
		}
	}
	c, err := leash.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Mutex("redisson_lock_token:{orders}").TryLock(context.Background()); !errors.Is(err, leash.ErrInvalidName) {
		t.Errorf("TryLock(redisson_lock_token:{orders}) = %v, want ErrInvalidName", err)
	}
}

// TestKeyPrefixKeepsLocksApart checks Options.KeyPrefix: a lock lives under
// the prefixed key, beside the application's own key of the same name,
// which stays untouched; Inspect and List speak of the unprefixed names.
func TestKeyPrefixKeepsLocksApart(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	ctx := bg(t)
	name := lockName(t) + "/orders"
	const prefix = "app[1]:"
	rdb.Set(ctx, name, "hello", 0) // the application's key, named as the lock
	before := stateOf(t, rdb, name)
	s := redisstore.New(rdb, &redisstore.Options{KeyPrefix: prefix})
	if err := s.MarkFresh(ctx); err != nil { // the test server marked only leash:epoch
		t.Fatal(err)
	}
	c, err := leash.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock beside the application's key: %v", err)
	}
	if typ := rdb.Type(ctx, prefix+name).Val(); typ != "hash" {
		t.Errorf("the lock's key %q is a %q, want a hash", prefix+name, typ)
	}
	if ex := rdb.Exists(ctx, "redisson_lock_token:{"+prefix+name+"}").Val(); ex != 1 {
		t.Errorf("the fencing counter is not named from the prefixed key")
	}
	info, err := c.Inspect(ctx, name)
	if err != nil || !info.Held || info.Name != name || info.Owners[0].Owner != h.Owner() {
		t.Errorf("Inspect = %+v, %v; want %q held by %s", info, err, name, h.Owner())
	}
	if names, err := s.List(ctx, lockName(t)+"/*"); err != nil || len(names) != 1 || names[0] != name {
		t.Errorf("List = %q, %v; want [%q]", names, err, name)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Errorf("Unlock = %v", err)
	}
	checkUnchanged(t, rdb, name, before)
}

// TestForceReleaseKeepsForeignCompanions force-releases a held lock whose
// fair queue key holds a string someone wrote there: the lock goes, the
// string stays (leash deletes only the zsets it writes there).
func TestForceReleaseKeepsForeignCompanions(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, nil)
	ctx := bg(t)
	name := lockName(t)
	if _, err := c.Mutex(name).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	queue := "leash_fair_queue:{" + name + "}"
	rdb.Set(ctx, queue, "not leash's", 0)
	before := stateOf(t, rdb, queue)
	if freed, err := c.ForceUnlockNow(ctx, name); err != nil || !freed {
		t.Fatalf("ForceUnlockNow = %v, %v; want true, nil", freed, err)
	}
	if n := rdb.Exists(ctx, name).Val(); n != 0 {
		t.Errorf("the lock is still there after ForceUnlockNow")
	}
	checkUnchanged(t, rdb, queue, before)
}

// companionOp is one operation on a name whose companion keys may hold a
// user's data; uses names the companions it reads or writes, which must make
// it refuse with ErrNotALock.
type companionOp struct {
	name string
	uses []string
	run  func(ctx context.Context, c *leash.Client, n string, put func()) error
}

// companionOps are every acquire (waiting and one-attempt), the release of a
// held lock of each kind, ForceUnlock, Inspect and SetPermits. put writes the
// user's data; an operation on a held lock calls it after taking the lock.
func companionOps() []companionOp {
	var ops []companionOp
	uses := map[string][]string{
		"mutex": {"token", "queue"}, "fair": {"token", "queue"}, "read": {"token", "readers", "writers"},
		"write": {"token", "readers", "writers"}, "permit": {"token", "size"}, "multilock": {"token"},
	}
	for _, k := range kindLockers {
		for _, wait := range []bool{true, false} {
			ops = append(ops, companionOp{fmt.Sprintf("%s (wait %v)", k.name, wait), uses[k.name],
				func(ctx context.Context, c *leash.Client, n string, put func()) error {
					put()
					lock, try := k.locks(c, n)
					if !wait {
						lock = try
					}
					h, err := lock(ctx)
					if h != nil {
						h.Unlock(ctx)
					}
					return err
				}})
		}
	}
	unlocks := map[string][]string{"mutex": {"queue", "places"}, "fair": {"queue", "places"},
		"read": {"readers", "writers"}, "write": {"readers", "writers"}, "permit": nil}
	for _, k := range kindLockers {
		if _, ok := unlocks[k.name]; !ok {
			continue
		}
		ops = append(ops, companionOp{"unlock " + k.name, unlocks[k.name],
			func(ctx context.Context, c *leash.Client, n string, put func()) error {
				lock, _ := k.locks(c, n)
				h, err := lock(ctx)
				if err != nil {
					return fmt.Errorf("taking the lock: %w", err)
				}
				put()
				return h.Unlock(ctx)
			}})
	}
	ops = append(ops,
		companionOp{"force unlock", nil, func(ctx context.Context, c *leash.Client, n string, put func()) error {
			if _, err := c.Mutex(n).Lock(ctx); err != nil {
				return fmt.Errorf("taking the lock: %w", err)
			}
			put()
			freed, err := c.ForceUnlock(ctx, n)
			if err == nil && !freed {
				err = errors.New("ForceUnlock freed nothing")
			}
			return err
		}},
		companionOp{"inspect", []string{"token", "queue", "readers", "writers", "size"},
			func(ctx context.Context, c *leash.Client, n string, put func()) error {
				if _, err := c.Mutex(n).Lock(ctx); err != nil {
					return fmt.Errorf("taking the lock: %w", err)
				}
				put()
				_, err := c.Inspect(ctx, n)
				return err
			}},
		companionOp{"multilock, the name second", []string{"token"},
			func(ctx context.Context, c *leash.Client, n string, put func()) error {
				put()
				h, err := c.MultiLock([]string{n + "/first", n}).TryLock(ctx)
				if h != nil {
					h.Unlock(ctx)
				}
				if info, ierr := c.Inspect(ctx, n+"/first"); ierr != nil || info.Held {
					return fmt.Errorf("the first name is held (%v) after %v", ierr, err)
				}
				return err
			}},
		companionOp{"set permits", []string{"size"}, func(ctx context.Context, c *leash.Client, n string, put func()) error {
			put()
			return c.Semaphore(n, 2).SetPermits(ctx, 5)
		}},
	)
	return ops
}

// TestCompanionUserDataIsNeverTouched puts a user's data at each companion
// key of a name (fencing counter, fair queue and places, readers, waiting
// writers, permit count) and runs every operation on the name: one that
// would read or write that key is refused with ErrNotALock naming it, any
// other succeeds, and the user's key keeps its type, contents and TTL.
func TestCompanionUserDataIsNeverTouched(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	companions := map[string]string{"token": "redisson_lock_token:{%s}", "queue": "leash_fair_queue:{%s}",
		"places": "leash_fair_places:{%s}", "readers": "leash_rw_readers:{%s}", "writers": "leash_rw_writers:{%s}",
		"size": "leash_semaphore_size:{%s}"}
	values := []userData{userDataKinds[0], userDataKinds[1], userDataKinds[6],
		{"negative counter", func(ctx context.Context, rdb *redis.Client, k string) error { return rdb.Set(ctx, k, "-5", 0).Err() }},
		{"counter at 2^53-1", func(ctx context.Context, rdb *redis.Client, k string) error {
			return rdb.Set(ctx, k, "9007199254740991", 0).Err()
		}}}
	c := newClient(t, srv.Addr, nil)
	for comp, format := range companions {
		for _, ud := range values {
			for _, op := range companionOps() {
				t.Run(comp+"/"+ud.name+"/"+op.name, func(t *testing.T) {
					ctx := bg(t)
					n := lockName(t)
					key := fmt.Sprintf(format, n)
					var before keyState
					put := func() {
						rdb.Del(ctx, key)
						if err := ud.write(ctx, rdb, key); err != nil {
							t.Fatal(err)
						}
						before = stateOf(t, rdb, key)
					}
					err := op.run(ctx, c, n, put)
					var nal *leash.NotALockError
					switch {
					case slices.Contains(op.uses, comp):
						if !errors.As(err, &nal) || !strings.Contains(nal.Found, key) {
							t.Errorf("%s with %s at %s = %v, want a *NotALockError naming %q", op.name, ud.name, key, err, key)
						}
					case err != nil:
						t.Errorf("%s with %s at %s = %v, want nil: it does not use that key", op.name, ud.name, key, err)
					}
					checkUnchanged(t, rdb, key, before)
					c.ForceUnlock(ctx, n) // free what a refused release left held
				})
			}
		}
	}
}

// TestReentryBesideForeignQueue: an acquire by the lock's own holder (a
// transport's resend of a granted acquire, or the pick-up of a lock a release
// handed over) on a name whose fair queue or places hold a user's data
// leaves that key as it was; where it would have to write the key (a queue
// that is not a zset) it is refused with ErrNotALock naming it, the
// holder's holds unchanged, never with Redis's own WRONGTYPE. A user's zset
// without the holder's entry is not written: the holder re-enters.
func TestReentryBesideForeignQueue(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	s := redisstore.New(rdb, nil)
	defer s.Close()
	const holder = "00000000-0000-4000-8000-0000000000aa:1"
	for _, format := range []string{"leash_fair_queue:{%s}", "leash_fair_places:{%s}"} {
		for _, ud := range []userData{userDataKinds[0], {"zset of non-owners", func(ctx context.Context, rdb *redis.Client, k string) error {
			return rdb.ZAdd(ctx, k, redis.Z{Score: 1, Member: "alice"}).Err()
		}}} {
			for _, kind := range []driver.Kind{driver.KindMutex, driver.KindFair} {
				if kind == driver.KindMutex && strings.Contains(format, "places") {
					continue // a Mutex's re-entry reads the places only with a queue
				}
				t.Run(fmt.Sprintf("%s/%s/%v", strings.SplitN(format, ":", 2)[0], ud.name, kind), func(t *testing.T) {
					ctx := bg(t)
					n := lockName(t)
					key := fmt.Sprintf(format, n)
					if err := rdb.HSet(ctx, n, holder, 1).Err(); err != nil {
						t.Fatal(err)
					}
					rdb.PExpire(ctx, n, time.Minute)
					rdb.Set(ctx, "redisson_lock_token:{"+n+"}", "7", 0) // the holder's token
					if err := ud.write(ctx, rdb, key); err != nil {
						t.Fatal(err)
					}
					before := stateOf(t, rdb, key)
					req := driver.Request{Kind: kind, Name: n, Owner: holder, Lease: time.Minute}
					if kind == driver.KindFair {
						req.Wait = 3 * time.Second // a waiter's attempt, which takes a place
					}
					_, err := s.Acquire(ctx, req)
					var nal *leash.NotALockError
					switch refused := errors.As(err, &nal); {
					case refused && !strings.Contains(nal.Found, key):
						t.Errorf("re-entry by the holder with %s at %s refused for %q, want that key named", ud.name, key, nal.Found)
					case refused:
						if holds := rdb.HGet(ctx, n, holder).Val(); holds != "1" {
							t.Errorf("the holder's holds after the refusal = %q, want 1", holds)
						}
					case ud.name == "string" || err != nil:
						t.Errorf("re-entry by the holder with %s at %s = %v, want a *NotALockError naming %q", ud.name, key, err, key)
					}
					checkUnchanged(t, rdb, key, before)
					rdb.Del(ctx, n, key, "redisson_lock_token:{"+n+"}")
				})
			}
		}
	}
}

// TestWithdrawLeavesForeignCompanions withdraws a waiter, at the store, from
// a name whose fair queue, places or waiting writers hold a user's data: no
// error, the data unchanged.
func TestWithdrawLeavesForeignCompanions(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	s := redisstore.New(rdb, nil)
	defer s.Close()
	ctx := bg(t)
	for i, format := range []string{"leash_fair_queue:{%s}", "leash_fair_places:{%s}", "leash_rw_writers:{%s}"} {
		n := fmt.Sprintf("%s/%d", lockName(t), i)
		key := fmt.Sprintf(format, n)
		rdb.ZAdd(ctx, key, redis.Z{Score: 1, Member: "alice"}, redis.Z{Score: 2, Member: "someone:1"})
		before := stateOf(t, rdb, key)
		if err := s.Withdraw(ctx, driver.Request{Kind: driver.KindFair, Name: n, Owner: "someone:1"}); err != nil {
			t.Errorf("Withdraw with a user's zset at %s = %v, want nil", key, err)
		}
		checkUnchanged(t, rdb, key, before)
	}
}

// TestManyReadersAreStillALock checks that a Redisson read lock held by more
// than 256 threads is still a lock: Inspect reads it, and a Mutex on the name
// waits for it (not acquired) instead of calling it a user's data.
func TestManyReadersAreStillALock(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, nil)
	ctx := bg(t)
	n := lockName(t)
	fields := []any{"mode", "read"}
	for i := range 300 {
		fields = append(fields, fmt.Sprintf("8f0c4b9e-1d2a-4c3b-9e8f-0a1b2c3d4e5f:%d", i+1), 1)
	}
	rdb.HSet(ctx, n, fields...)
	rdb.PExpire(ctx, n, time.Hour)
	if info, err := c.Inspect(ctx, n); err != nil || !info.Held {
		t.Errorf("Inspect = %+v, %v; want held", info, err)
	}
	if _, err := c.Mutex(n).TryLock(ctx); !errors.Is(err, leash.ErrNotAcquired) {
		t.Errorf("TryLock = %v, want ErrNotAcquired", err)
	}
	rdb.Del(ctx, n)
}

// TestRenewWriteBesideForeignReaders renews a held write lock whose readers
// key holds a user's string: the renewal succeeds, the string unchanged.
func TestRenewWriteBesideForeignReaders(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, nil)
	ctx := bg(t)
	n := lockName(t)
	h, err := c.RWMutex(n, nil).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := "leash_rw_readers:{" + n + "}"
	rdb.Set(ctx, key, "hello", 0)
	before := stateOf(t, rdb, key)
	if err := h.Renew(ctx); err != nil {
		t.Errorf("Renew = %v, want nil", err)
	}
	checkUnchanged(t, rdb, key, before)
	c.ForceUnlock(ctx, n)
}

// TestRestartMarkerHoldingUserData: the restart marker's key (leash:epoch
// under the store's KeyPrefix) holding an application's data — a list, or
// a string that is no marker — is never overwritten: not by the first
// acquire after a restart, which would write the marker, nor by MarkFresh.
// Both are refused with an ErrNotALock saying what the key holds, and so is
// GraceLeft (the CLI's grace note), which would otherwise report a grace.
func TestRestartMarkerHoldingUserData(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	ctx := bg(t)
	for what, put := range map[string]func(key string){
		"a list":   func(key string) { rdb.RPush(ctx, key, "a", "b") },
		"a string": func(key string) { rdb.Set(ctx, key, "hello", 0) },
	} {
		t.Run(what, func(t *testing.T) {
			prefix := fmt.Sprintf("marker-%d:", time.Now().UnixNano())
			marker := prefix + "leash:epoch"
			put(marker)
			t.Cleanup(func() { rdb.Del(ctx, marker) })
			before := stateOf(t, rdb, marker)
			s := redisstore.New(rdb, &redisstore.Options{KeyPrefix: prefix})
			c, err := leash.New(s, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if h, err := c.Mutex(lockName(t)).TryLock(ctx); !errors.Is(err, leash.ErrNotALock) ||
				!strings.Contains(err.Error(), "restart marker") {
				t.Errorf("TryLock with %s at the marker's key = %v, %v; want ErrNotALock naming the marker", what, h, err)
				if h != nil {
					_ = h.Unlock(ctx)
				}
			}
			checkUnchanged(t, rdb, marker, before)
			if left, err := s.GraceLeft(ctx, lockName(t), time.Minute); !errors.Is(err, leash.ErrNotALock) {
				t.Errorf("GraceLeft with %s at the marker's key = %v, %v; want ErrNotALock", what, left, err)
			}
			if err := s.MarkFresh(ctx); !errors.Is(err, leash.ErrNotALock) {
				t.Errorf("MarkFresh with %s at the marker's key = %v; want ErrNotALock", what, err)
			}
			checkUnchanged(t, rdb, marker, before)
		})
	}
}
