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
