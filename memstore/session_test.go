package memstore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
)

// client is the client id of every owner in these tests.
const client = "0c0ffee0-0000-4000-8000-000000000001"

// TestSessionKeepAlive checks the choices memstore makes where
// driver.SessionStore leaves a store free, on a faked clock.
func TestSessionKeepAlive(t *testing.T) {
	for name, fn := range map[string]func(t *testing.T, s *memstore.Sessions){
		"a client that never held a lock has no session": func(t *testing.T, s *memstore.Sessions) {
			wantKeepAlive(t, s, driver.ErrNotHeld)
		},
		"a session outlives its released and forced-free locks until its time to live passes": func(t *testing.T, s *memstore.Sessions) {
			released, forced := lock(t, s, "released", 1, 10*time.Second), lock(t, s, "forced", 2, 10*time.Second)
			if err := s.Release(t.Context(), released); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if _, err := s.ForceRelease(t.Context(), forced.Name); err != nil {
				t.Fatalf("ForceRelease: %v", err)
			}
			wantKeepAlive(t, s, nil) // as an etcd lease lives on without keys
			time.Sleep(10 * time.Second)
			wantKeepAlive(t, s, driver.ErrNotHeld)
		},
		"each lock is kept for its own lease": func(t *testing.T, s *memstore.Sessions) {
			brief, lasting := lock(t, s, "brief", 1, time.Second), lock(t, s, "lasting", 2, 10*time.Second)
			time.Sleep(500 * time.Millisecond)
			wantKeepAlive(t, s, nil) // brief until 1.5s, lasting until 10.5s
			time.Sleep(time.Second)
			res := s.Renew(t.Context(), []driver.Request{brief, lasting})
			if res[0].Status != driver.RenewGone || res[1].Status != driver.Renewed {
				t.Errorf("Renew(brief, lasting) a lease after a keep-alive = %+v, want gone, renewed", res)
			}
			wantKeepAlive(t, s, nil) // the session lives while lasting does
		},
		"renew extends nothing, and keeps the lease a lock was granted with": func(t *testing.T, s *memstore.Sessions) {
			r := lock(t, s, "renewed", 1, time.Second)
			r.Lease = time.Hour
			if res := s.Renew(t.Context(), []driver.Request{r}); res[0].Status != driver.Renewed {
				t.Fatalf("Renew by the holder = %+v, want renewed", res)
			}
			wantKeepAlive(t, s, nil)
			time.Sleep(time.Second)
			if res := s.Renew(t.Context(), []driver.Request{r}); res[0].Status != driver.RenewGone {
				t.Errorf("Renew a lease after a keep-alive = %+v, want gone: kept for its own 1s lease", res)
			}
			wantKeepAlive(t, s, driver.ErrNotHeld)
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { fn(t, memstore.NewSessions()) })
		})
	}
}

// lock takes the mutex name for tenure n of client, leased for lease.
func lock(t *testing.T, s *memstore.Sessions, name string, n int, lease time.Duration) driver.Request {
	t.Helper()
	r := driver.Request{Name: name, Owner: client + ":" + strconv.Itoa(n), Lease: lease}
	if g, err := s.Acquire(t.Context(), r); err != nil || !g.Acquired {
		t.Fatalf("Acquire(%q) = %+v, %v; want acquired", name, g, err)
	}
	return r
}

func wantKeepAlive(t *testing.T, s driver.SessionStore, want error) {
	t.Helper()
	err := s.KeepAlive(context.Background(), client)
	if (want == nil) != (err == nil) || !errors.Is(err, want) {
		t.Errorf("KeepAlive(%q) = %v, want %v", client, err, want)
	}
}
