package zkstore_test

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/zkstore"
)

// TestUserZnodesUntouched puts an application's znodes where lock
// directories and lock nodes live: every operation refuses them with a
// NotALockError saying what is there, List leaves them out, and none is
// changed or deleted.
func TestUserZnodesUntouched(t *testing.T) {
	root := fmt.Sprintf("/%s-%d", url.PathEscape(t.Name()), time.Now().UnixNano()) // fresh for every run
	s := dial(t, &zkstore.Options{Root: root}, shared.ZooKeeper(t).Addr)
	conn := s.Conn()
	ctx := bg(t)
	// A lock taken first creates the Store's directories.
	owner := "00000000-0000-4000-8000-000000000001:1"
	if g, err := s.Acquire(ctx, driver.Request{Name: "mine", Owner: owner, Lease: 10e9}); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	userDir := root + "/locks/app-data"
	userChild := root + "/locks/mine/settings"
	for _, p := range []string{userDir, userChild} {
		if _, err := conn.Create(p, []byte("user data"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	before := func(p string) *zk.Stat {
		_, st, err := conn.Get(p)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	stDir, stChild := before(userDir), before(userChild)
	for _, name := range []string{"app-data", "mine"} {
		other := driver.Request{Name: name, Owner: "00000000-0000-4000-8000-000000000002:1", Lease: 10e9}
		wantNotALock := func(what string, err error) {
			t.Helper()
			var nl *driver.NotALockError
			if !errors.As(err, &nl) || nl.Found == "" {
				t.Errorf("%s %q = %v, want a NotALockError saying what is there", what, name, err)
			} else {
				t.Logf("%s %q: %v", what, name, err)
			}
		}
		_, err := s.Acquire(ctx, other)
		wantNotALock("Acquire", err)
		err = s.Release(ctx, other)
		wantNotALock("Release", err)
		if !errors.Is(err, driver.ErrNotHeld) {
			t.Errorf("Release %q = %v, want ErrNotHeld too", name, err)
		}
		_, err = s.Inspect(ctx, name)
		wantNotALock("Inspect", err)
		_, err = s.ForceRelease(ctx, name)
		wantNotALock("ForceRelease", err)
		if res := s.Renew(ctx, []driver.Request{other}); res[0].Err != nil || res[0].Status != driver.RenewGone {
			t.Errorf("Renew %q = %+v, want RenewGone", name, res[0])
		}
	}
	names, err := s.List(ctx, "")
	if err != nil || slices.Contains(names, "app-data") || slices.Contains(names, "mine") {
		t.Errorf("List = %q, %v; want neither the application's znode nor the lock it wrote into", names, err)
	}
	if st := before(userDir); st.Mzxid != stDir.Mzxid || st.Cversion != stDir.Cversion {
		t.Errorf("the application's znode changed: %+v, was %+v", st, stDir)
	}
	if st := before(userChild); st.Mzxid != stChild.Mzxid {
		t.Errorf("the application's child znode changed: %+v, was %+v", st, stChild)
	}
}

// TestIdleSemaphoreStaysASemaphore: a semaphore's count is kept while no
// one holds a permit, as the other stores keep it: a Mutex, read or write
// lock on the name is refused with a NotALockError, and the count stays.
func TestIdleSemaphoreStaysASemaphore(t *testing.T) {
	s := sharedStore(t)
	ctx := bg(t)
	name := fmt.Sprintf("%s-%d", lockName(t), time.Now().UnixNano())
	if err := s.SetPermits(ctx, name, 5); err != nil {
		t.Fatal(err)
	}
	owner := "0a0b0c0d-0000-4000-8000-000000000001:1"
	for _, k := range []driver.Kind{driver.KindMutex, driver.KindRead, driver.KindWrite} {
		g, err := s.Acquire(ctx, driver.Request{Kind: k, Name: name, Owner: owner, Lease: 10 * time.Second})
		if !errors.Is(err, driver.ErrNotALock) || g.Acquired {
			t.Errorf("%v acquire on an idle semaphore of 5 = %+v, %v; want ErrNotALock", k, g, err)
		}
	}
	info, err := s.Inspect(ctx, name)
	if err != nil || info.Kind != driver.KindPermit || info.Permits != 5 {
		t.Errorf("Inspect after = kind %v, %d permits, %v; want a semaphore of 5", info.Kind, info.Permits, err)
	}
}

// TestUserZnodeAtRecordPath puts an application's znode where the Store
// keeps a client's holder record: PutClient and DeleteClient refuse it
// with a NotALockError, GetClient reports no record, and the znode is left
// as it is.
func TestUserZnodeAtRecordPath(t *testing.T) {
	root := fmt.Sprintf("/%s-%d", url.PathEscape(t.Name()), time.Now().UnixNano())
	s := dial(t, &zkstore.Options{Root: root}, shared.ZooKeeper(t).Addr)
	conn := s.Conn()
	ctx := bg(t)
	const id = "0a0b0c0d-0000-4000-8000-000000000002"
	// A record put first creates the Store's directories.
	if err := s.PutClient(ctx, driver.ClientRecord{ID: "0a0b0c0d-0000-4000-8000-000000000001", Host: "h", PID: 1}, time.Minute); err != nil {
		t.Fatal(err)
	}
	path := root + "/records/" + id
	if _, err := conn.Create(path, []byte("user data"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, before, err := conn.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutClient(ctx, driver.ClientRecord{ID: id, Host: "h", PID: 1}, time.Minute); !errors.Is(err, driver.ErrNotALock) {
		t.Errorf("PutClient over an application's znode = %v, want ErrNotALock", err)
	}
	if err := s.DeleteClient(ctx, id); !errors.Is(err, driver.ErrNotALock) {
		t.Errorf("DeleteClient of an application's znode = %v, want ErrNotALock", err)
	}
	if _, ok, err := s.GetClient(ctx, id); ok || err != nil {
		t.Errorf("GetClient of an application's znode = %v, %v; want no record", ok, err)
	}
	data, after, err := conn.Get(path)
	if err != nil || string(data) != "user data" || after.Version != before.Version {
		t.Errorf("znode %s after every method = %q (version %d), %v; want unchanged", path, data, after.Version, err)
	}
}
