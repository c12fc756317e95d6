package history_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/leash-go/leash/driver"
	_ "github.com/leash-go/leash/etcdstore" // registers etcd://
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/redlock"
	"github.com/leash-go/leash/reliability/check"
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

// cutRelease is a member whose link drops releases while cut: the release
// may or may not have reached it (an unknown outcome).
type cutRelease struct {
	driver.Store
	cut atomic.Bool
}

var errCut = errors.New("test: link black-holed")

func (c *cutRelease) Release(ctx context.Context, req driver.Request) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Store.Release(ctx, req)
}

// TestWrapQuorumRelease replays, on a redlock.Store over three memstores,
// what TestRedlockMinorityFaults (seed 1795527975035384009) recorded: A's
// release misses member 2 (its link black-holed) after releasing on 0 and
// 1, so its outcome is unknown; B takes members 0 and 1; A's background
// release then frees the copy left on member 2. A Redlock release succeeds
// only when a majority released the lock, so that one reports not held (A
// held a minority when B was granted), and the checker finds the history
// safe. Had it reported success, as Redlock's release did before it needed
// a majority, and been recorded as a single server's release (Freed), the
// history would read as a double grant: the checker says so.
func TestWrapQuorumRelease(t *testing.T) {
	m2 := &cutRelease{Store: memstore.New()}
	q, err := redlock.New([]driver.Store{memstore.New(), memstore.New(), m2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := history.NewRecorder("p", nil)
	w := history.Wrap(q, rec)
	ctx := t.Context()
	a := driver.Request{Kind: driver.KindMutex, Name: t.Name(), Owner: "a:1", Lease: 10 * time.Second}
	b := a
	b.Owner = "b:1"
	if g, err := w.Acquire(ctx, a); err != nil || !g.Acquired {
		t.Fatalf("A's acquire: %+v, %v", g, err)
	}
	m2.cut.Store(true)
	if err := w.Release(ctx, a); err == nil {
		t.Fatal("A's release with member 2 cut off succeeded; want an unknown outcome")
	}
	m2.cut.Store(false)
	if g, err := w.Acquire(ctx, b); err != nil || !g.Acquired {
		t.Fatalf("B's acquire on members 0 and 1: %+v, %v", g, err)
	}
	if err := w.Release(ctx, a); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("A's release of the copy on member 2: %v, want ErrNotHeld (a minority)", err)
	}
	if info, err := m2.Store.(driver.Admin).Inspect(ctx, t.Name()); err != nil || info.Held {
		t.Errorf("member 2 after A's release: %+v, %v; want its copy freed", info, err)
	}
	if err := w.Release(ctx, b); err != nil {
		t.Fatal(err)
	}

	ops := rec.Ops()
	var statuses []string
	for _, op := range ops {
		if op.Kind == history.StoreRelease {
			statuses = append(statuses, op.Status)
		}
	}
	if want := []string{"", history.NotHeld, history.FreedCopies}; !slices.Equal(statuses, want) {
		t.Fatalf("release statuses %q, want %q", statuses, want)
	}
	if res := check.Grants(ops, 10*time.Second); !res.OK() {
		t.Errorf("the quorum history: verdict %v, double grants %v; want safe", res.Verdict, res.DoubleGrants)
	}
	single := slices.Clone(ops)
	for i := range single {
		switch {
		case single[i].Status == history.FreedCopies:
			single[i].Status = history.Freed
		case single[i].Kind == history.StoreRelease && single[i].Status == history.NotHeld:
			single[i].OK, single[i].Status = true, history.Freed
		}
	}
	if res := check.Grants(single, 10*time.Second); res.Verdict != porcupine.Illegal {
		t.Errorf("the same history from a single server: verdict %v; want Illegal", res.Verdict)
	}
}
