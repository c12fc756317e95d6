package history_test

import (
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	_ "github.com/leash-go/leash/etcdstore" // registers etcd://
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/reliability/history"
)

// TestWrapSessionStore: a recorded session store (etcdstore on a real etcd)
// keeps its KeepAlive and Watch, and records each lock its Renew found held
// as a renewal that began when the client's last successful keep-alive was
// sent, not when the check was: the check extends nothing.
func TestWrapSessionStore(t *testing.T) {
	srv := testserver.NewEtcd(t, testserver.EtcdOptions{})
	st, err := driver.Open(t.Context(), "etcd://"+srv.Addr()+"/")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := history.NewRecorder("p", nil)
	w := history.Wrap(st, rec)
	ss, ok := w.(driver.SessionStore)
	if !ok {
		t.Fatalf("the recorded %s is not a driver.SessionStore", driver.Describe(st))
	}
	if _, ok := w.(driver.Watcher); !ok {
		t.Fatalf("the recorded %s is not a driver.Watcher", driver.Describe(st))
	}
	const client = "0b6c1f5e-3f5a-4c1e-9d2a-7a1c2e3f4a5b"
	req := driver.Request{Kind: driver.KindMutex, Name: t.Name(), Owner: client + ":1", Lease: time.Second}
	if g, err := w.Acquire(t.Context(), req); err != nil || !g.Acquired {
		t.Fatalf("acquire: %+v, %v", g, err)
	}
	before := history.Now()
	if err := ss.KeepAlive(t.Context(), client); err != nil {
		t.Fatal(err)
	}
	kept := history.Now()
	if res := w.Renew(t.Context(), []driver.Request{req}); len(res) != 1 || res[0].Err != nil || res[0].Status != driver.Renewed {
		t.Fatalf("renew: %+v", res)
	}
	var renew history.Op
	for _, op := range rec.Ops() {
		if op.Kind == history.StoreRenew {
			renew = op
		}
	}
	if !renew.OK || renew.Call < before || renew.Call > kept {
		t.Errorf("the renewal was recorded from %d, OK %v; want OK, from the keep-alive's send, in [%d, %d]", renew.Call, renew.OK, before, kept)
	}
	if err := w.Release(t.Context(), req); err != nil {
		t.Fatal(err)
	}
}
