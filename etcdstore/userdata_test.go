package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/etcdstore"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestUserDataUntouched puts an application's keys where the Store keeps a
// lock key and a fence key, and checks that every method refuses them with
// a *driver.NotALockError (Renew: RenewGone), saying what is there, and
// leaves them as they are.
func TestUserDataUntouched(t *testing.T) {
	cli := sharedCli(t)
	s := etcdstore.New(cli, &etcdstore.Options{Prefix: "userdata/" + t.Name() + "/"})
	ctx := bg(t)
	const owner = "0a0b0c0d-0000-4000-8000-000000000001:1"
	for _, tc := range []struct{ name, key, value string }{
		{"a string where the lock key is", "lock/app", "hello"},
		{"JSON that is not a lock where the lock key is", "lock/json", `{"leash":1,"kind":"mutex","owner":"x","lease_ms":1,"extra":2}`},
		{"a string where the fence key is", "fence/counter", "41"},
		{"a string where the semaphore key is", "sem/pool", "7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, name, _ := strings.Cut(tc.key, "/")
			key := s.Prefix() + tc.key
			if _, err := cli.Put(ctx, key, tc.value); err != nil {
				t.Fatal(err)
			}
			before, err := cli.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			r := driver.Request{Name: name, Owner: owner, Lease: 30 * time.Second}
			wantNotALock := func(what string, err error) {
				t.Helper()
				var nal *driver.NotALockError
				if !errors.As(err, &nal) || nal.Name != name {
					t.Errorf("%s = %v, want a *driver.NotALockError for %q", what, err, name)
				}
			}
			for _, kind := range []driver.Kind{driver.KindMutex, driver.KindFair, driver.KindPermit} {
				r := r
				r.Kind, r.Permits, r.Wait = kind, 2, time.Minute
				g, err := s.Acquire(ctx, r)
				wantNotALock("Acquire "+kind.String(), err)
				if g.Acquired {
					t.Errorf("Acquire %v granted a name holding %q", kind, tc.value)
				}
			}
			wantNotALock("SetPermits", s.SetPermits(ctx, name, 3))
			_, err = s.AcquireMany(ctx, []driver.Request{{Name: "other-" + name, Owner: owner, Lease: r.Lease}, r})
			wantNotALock("AcquireMany", err)
			if strings.HasPrefix(tc.key, "lock/") {
				if res := s.Renew(ctx, []driver.Request{r}); res[0].Err != nil || res[0].Status != driver.RenewGone {
					t.Errorf("Renew = %+v, want RenewGone", res[0])
				}
				err = s.Release(ctx, r)
				wantNotALock("Release", err)
				if !errors.Is(err, driver.ErrNotHeld) {
					t.Errorf("Release = %v, want ErrNotHeld too", err)
				}
			}
			_, err = s.Inspect(ctx, name)
			wantNotALock("Inspect", err)
			freed, err := s.ForceRelease(ctx, name)
			wantNotALock("ForceRelease", err)
			if freed {
				t.Error("ForceRelease reported a deletion")
			}
			if got, err := s.List(ctx, ""); err != nil || slices.Contains(got, name) {
				t.Errorf("List = %q, %v; want no %q", got, err, name)
			}
			after, err := cli.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if len(after.Kvs) != 1 || after.Kvs[0].ModRevision != before.Kvs[0].ModRevision || string(after.Kvs[0].Value) != tc.value {
				t.Errorf("key %q after every method = %v, want unchanged %q", key, after.Kvs, tc.value)
			}
			// Nothing was created beside it.
			for _, k := range []string{s.Prefix() + "lock/other-" + name, s.Prefix() + "fence/other-" + name, s.Prefix() + "queue/" + name + "\x00" + owner} {
				if resp, err := cli.Get(ctx, k, clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
					t.Errorf("key %q: count %v, %v; want none left behind", k, resp.Count, err)
				}
			}
		})
	}
}

// TestUserDataRecordKey puts an application's value where the Store keeps
// a client's holder record: PutClient and DeleteClient refuse it, GetClient
// reports no record, and the key is left as it is.
func TestUserDataRecordKey(t *testing.T) {
	cli := sharedCli(t)
	s := etcdstore.New(cli, &etcdstore.Options{Prefix: "userdata/" + t.Name() + "/"})
	ctx := bg(t)
	const id = "0a0b0c0d-0000-4000-8000-000000000002"
	key := s.Prefix() + "client/" + id
	if _, err := cli.Put(ctx, key, "not a record"); err != nil {
		t.Fatal(err)
	}
	before, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutClient(ctx, driver.ClientRecord{ID: id, Host: "h", PID: 1}, time.Minute); err == nil {
		t.Error("PutClient over an application's key = nil, want a refusal")
	}
	if err := s.DeleteClient(ctx, id); err == nil {
		t.Error("DeleteClient of an application's key = nil, want a refusal")
	}
	if _, ok, err := s.GetClient(ctx, id); ok || err != nil {
		t.Errorf("GetClient of an application's key = %v, %v; want no record", ok, err)
	}
	after, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Kvs) != 1 || after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
		t.Errorf("key %q after every method = %v, want unchanged", key, after.Kvs)
	}
}

// TestUserDataPermitKey puts an application's value where the Store keeps
// a semaphore's permit: every operation on the semaphore refuses it, and the
// key is left as it is.
func TestUserDataPermitKey(t *testing.T) {
	cli := sharedCli(t)
	s := etcdstore.New(cli, &etcdstore.Options{Prefix: "userdata/" + t.Name() + "/"})
	ctx := bg(t)
	const owner = "0a0b0c0d-0000-4000-8000-000000000003:1"
	key := s.Prefix() + "permit/slots\x00" + owner
	if _, err := cli.Put(ctx, key, `{"leash":2}`); err != nil {
		t.Fatal(err)
	}
	before, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	p := driver.Request{Kind: driver.KindPermit, Name: "slots", Owner: owner, Lease: 30 * time.Second, Permits: 2}
	var nal *driver.NotALockError
	if g, err := s.Acquire(ctx, p); !errors.As(err, &nal) || g.Acquired {
		t.Errorf("Acquire of a permit = %+v, %v; want a *driver.NotALockError", g, err)
	}
	if err := s.SetPermits(ctx, p.Name, 3); !errors.As(err, &nal) {
		t.Errorf("SetPermits = %v, want a *driver.NotALockError", err)
	}
	if res := s.Renew(ctx, []driver.Request{p}); res[0].Err != nil || res[0].Status != driver.RenewGone {
		t.Errorf("Renew of the permit = %+v, want RenewGone", res[0])
	}
	if err := s.Release(ctx, p); !errors.As(err, &nal) || !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release of the permit = %v, want ErrNotHeld and a *driver.NotALockError", err)
	}
	if got, err := s.List(ctx, ""); err != nil || len(got) != 0 {
		t.Errorf("List = %q, %v; want nothing", got, err)
	}
	after, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Kvs) != 1 || after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
		t.Errorf("key %q after every method = %v, want unchanged", key, after.Kvs)
	}
}

// TestLockOrSemaphore checks that a name is a lock or a semaphore, not both,
// whichever kind took it first: a write lock, a read lease or a permit.
func TestLockOrSemaphore(t *testing.T) {
	s := etcdstore.New(sharedCli(t), nil)
	ctx := bg(t)
	owner := func(i int) string { return fmt.Sprintf("0a0b0c0d-0000-4000-8000-%012d:1", i) }
	for _, first := range []driver.Kind{driver.KindWrite, driver.KindRead, driver.KindPermit} {
		name := lockName(t) + "/" + first.String()
		r := driver.Request{Kind: first, Name: name, Owner: owner(1), Lease: 30 * time.Second, Permits: 2}
		if g, err := s.Acquire(ctx, r); err != nil || !g.Acquired {
			t.Fatalf("Acquire %v = %+v, %v", first, g, err)
		}
		for _, then := range []driver.Kind{driver.KindMutex, driver.KindRead, driver.KindWrite, driver.KindPermit} {
			r2 := driver.Request{Kind: then, Name: name, Owner: owner(2), Lease: 30 * time.Second, Permits: 2}
			g, err := s.Acquire(ctx, r2)
			isSem, wantSem := first == driver.KindPermit, then == driver.KindPermit
			switch {
			case g.Acquired && !(isSem && wantSem) && !(first == driver.KindRead && then == driver.KindRead):
				t.Errorf("Acquire %v after %v = granted", then, first)
			case isSem != wantSem && !errors.Is(err, driver.ErrNotALock):
				t.Errorf("Acquire %v after %v = %+v, %v; want ErrNotALock", then, first, g, err)
			}
			if g.Acquired {
				if err := s.Release(ctx, r2); err != nil {
					t.Error(err)
				}
			}
		}
		if err := s.Release(ctx, r); err != nil {
			t.Error(err)
		}
	}
}

// TestUserDataPlaceKeyOnGrant puts an application's value at the key of an
// owner's queue place (FairMutex) or writer mark (RWMutex write lock), with
// no lock held yet, and where the owner holds the lock already (its retry):
// its retries are granted (or refused, saying what is there), and the
// value is left as it is: a grant deletes the owner's place only when it is
// a place.
func TestUserDataPlaceKeyOnGrant(t *testing.T) {
	cli := sharedCli(t)
	s := etcdstore.New(cli, &etcdstore.Options{Prefix: "userdata/" + t.Name() + "/"})
	ctx := bg(t)
	const owner = "0a0b0c0d-0000-4000-8000-000000000009:1"
	for _, tc := range []struct {
		kind  driver.Kind
		space string
	}{{driver.KindFair, "queue"}, {driver.KindWrite, "wmark"}} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			name := "app-" + tc.kind.String()
			r := driver.Request{Kind: tc.kind, Name: name, Owner: owner, Lease: 30 * time.Second}
			if g, err := s.Acquire(ctx, r); err != nil || !g.Acquired {
				t.Fatalf("Acquire = %+v, %v", g, err)
			}
			key := s.Prefix() + tc.space + "/" + name + "\x00" + owner
			if _, err := cli.Put(ctx, key, "hello"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = cli.Delete(context.Background(), key) }) // the application's, left by the Store
			before, err := cli.Get(ctx, key)
			if err != nil || len(before.Kvs) != 1 {
				t.Fatalf("key %q = %v, %v", key, before, err)
			}
			for _, wait := range []time.Duration{0, time.Minute} {
				r.Wait = wait
				// Granted, or refused for what the queue holds.
				var nal *driver.NotALockError
				if g, err := s.Acquire(ctx, r); !errors.As(err, &nal) && (err != nil || !g.Acquired) {
					t.Fatalf("Acquire by its holder (wait %v) = %+v, %v; want granted or a *driver.NotALockError", wait, g, err)
				}
			}
			after, err := cli.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if len(after.Kvs) != 1 || after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
				t.Errorf("key %q after the holder's retries = %v, want unchanged %q", key, after.Kvs, "hello")
			}
			if err := s.Release(ctx, r); err != nil {
				t.Error(err)
			}
		})
	}
}
