package redisstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/redisstore"
)

// TestJobKeysUserDataIsNeverTouched puts each kind of application data at a
// job's state key and at its runs key, and calls every JobStore method: each
// is refused with a *NotALockError that names the key and what it holds,
// and the key keeps its type, contents and TTL.
func TestJobKeysUserDataIsNeverTouched(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	s := redisstore.New(newRDB(t, srv.Addr), nil)
	t.Cleanup(func() { s.Close() })
	for _, at := range []struct{ what, prefix string }{{"state", "leash_job"}, {"runs", "leash_job_runs"}} {
		for _, ud := range userDataKinds {
			t.Run(at.what+" "+ud.name, func(t *testing.T) {
				ctx := bg(t)
				job := lockName(t)
				key := at.prefix + ":{" + job + "}"
				if err := ud.write(ctx, rdb, key); err != nil {
					t.Fatal(err)
				}
				rdb.PExpire(ctx, key, time.Hour)
				before := stateOf(t, rdb, key)
				tick := time.UnixMilli(time.Now().UnixMilli())
				calls := map[string]func() error{
					"ClaimTick": func() error {
						_, err := s.ClaimTick(ctx, driver.TickClaim{Job: job, Tick: tick, Attempt: 1, Run: driver.RunRecord{Client: "c"}})
						return err
					},
					"EndRun": func() error {
						return s.EndRun(ctx, driver.RunEnd{Job: job, Tick: tick, Attempt: 1, Client: "c", Outcome: driver.OutcomeOK})
					},
					"AddRuns": func() error {
						return s.AddRuns(ctx, job, []driver.RunRecord{{Tick: tick, Outcome: driver.OutcomeMissed}}, 0)
					},
					"History": func() error { _, err := s.History(ctx, job, 0); return err },
				}
				for name, call := range calls {
					err := call()
					var nal *leash.NotALockError
					if !errors.As(err, &nal) || !strings.Contains(nal.Found, key) {
						t.Errorf("%s with a %s at %s = %v, want a *NotALockError naming the key", name, ud.name, key, err)
					}
				}
				checkUnchanged(t, rdb, key, before)
				if names, err := s.Jobs(ctx, job); err != nil || len(names) != 0 {
					t.Errorf("Jobs(%q) = %q, %v; want none: the key is not a job's", job, names, err)
				}
			})
		}
	}
}

// TestJobNamesCheckedLikeLockNames: a job name that could not be a lock's
// (a companion prefix, a broken hash tag) is refused before any round trip.
func TestJobNamesCheckedLikeLockNames(t *testing.T) {
	s := redisstore.New(newRDB(t, "127.0.0.1:1"), nil)
	t.Cleanup(func() { s.Close() })
	for _, name := range []string{"", "leash_job:{x}", "leash_job_runs:x", "a{b"} {
		_, err := s.ClaimTick(bg(t), driver.TickClaim{Job: name, Tick: time.Now(), Attempt: 1})
		if !errors.Is(err, leash.ErrInvalidName) {
			t.Errorf("ClaimTick(job %q) = %v, want ErrInvalidName", name, err)
		}
	}
}
