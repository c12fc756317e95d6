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

// TestUserZnodesUntouchedByJobs puts an application's znodes where a job's
// node and a job's run records live, and one where Root/jobs lives: every
// job operation refuses them with an error saying what is there (a
// NotALockError for a job's), and none is changed or deleted.
func TestUserZnodesUntouchedByJobs(t *testing.T) {
	root := fmt.Sprintf("/%s-%d", url.PathEscape(t.Name()), time.Now().UnixNano()) // fresh for every run
	s := dial(t, &zkstore.Options{Root: root}, shared.ZooKeeper(t).Addr)
	conn := s.Conn()
	ctx := bg(t)
	tick := time.UnixMilli(time.Now().Add(-time.Second).UnixMilli())
	claim := func(job string) driver.TickClaim {
		return driver.TickClaim{Job: job, Tick: tick, Attempt: 1, Run: driver.RunRecord{Client: "00000000-0000-4000-8000-000000000001"}}
	}
	// A claim first creates Root/jobs and a job of leash's, into which the
	// application then writes a child.
	if r, err := s.ClaimTick(ctx, claim("mine")); err != nil || r.Status != driver.ClaimGranted {
		t.Fatalf("ClaimTick = %+v, %v", r, err)
	}
	userJob, userChild := root+"/jobs/app-data", root+"/jobs/mine/settings"
	for _, p := range []string{userJob, userChild} {
		if _, err := conn.Create(p, []byte("user data"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	stat := func(p string) *zk.Stat {
		_, st, err := conn.Get(p)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	stJob, stChild := stat(userJob), stat(userChild)
	for _, job := range []string{"app-data", "mine"} {
		wantNotALock := func(what string, err error) {
			t.Helper()
			var nl *driver.NotALockError
			if !errors.As(err, &nl) || nl.Found == "" {
				t.Errorf("%s %q = %v, want a NotALockError saying what is there", what, job, err)
			}
		}
		c := claim(job)
		c.Tick = tick.Add(time.Second)
		_, err := s.ClaimTick(ctx, c)
		wantNotALock("ClaimTick", err)
		wantNotALock("EndRun", s.EndRun(ctx, driver.RunEnd{Job: job, Tick: tick, Attempt: 1, Client: c.Run.Client, Outcome: driver.OutcomeOK}))
		wantNotALock("AddRuns", s.AddRuns(ctx, job, []driver.RunRecord{{Tick: tick, Outcome: driver.OutcomeMissed}}, 0))
		_, err = s.History(ctx, job, 0)
		wantNotALock("History", err)
	}
	if st := stat(userJob); st.Mzxid != stJob.Mzxid || st.Cversion != stJob.Cversion {
		t.Errorf("the application's znode changed: %+v, was %+v", st, stJob)
	}
	if st := stat(userChild); st.Mzxid != stChild.Mzxid {
		t.Errorf("the application's child znode changed: %+v, was %+v", st, stChild)
	}

	// An application's Root/jobs: refused, and left as it is.
	other := fmt.Sprintf("/%s-other-%d", url.PathEscape(t.Name()), time.Now().UnixNano())
	if _, err := conn.Create(other, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(other+"/jobs", []byte("app config"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	s2 := dial(t, &zkstore.Options{Root: other}, shared.ZooKeeper(t).Addr)
	if _, err := s2.ClaimTick(ctx, claim("x")); err == nil {
		t.Errorf("ClaimTick under an application's %s/jobs succeeded", other)
	}
	if _, err := s2.Jobs(ctx, ""); err == nil {
		t.Errorf("Jobs under an application's %s/jobs succeeded", other)
	}
	if children, _, err := conn.Children(other + "/jobs"); err != nil || len(children) != 0 {
		t.Errorf("the application's %s/jobs got children %q (%v)", other, children, err)
	}
}

// TestAddRunsMoveKeepsAnEnd: AddRuns moves the records of later ticks up
// to put a missed tick below them (a delete and a create of what it read).
// An end recorded meanwhile on a moved record that is not the job's latest
// claim (so the job's node is not written) makes the move fail, and
// AddRuns, started over, keeps the end; the same operation with its
// deletes at any version (the negative control) loses it.
func TestAddRunsMoveKeepsAnEnd(t *testing.T) {
	for _, control := range []bool{false, true} {
		t.Run(fmt.Sprintf("any version %v", control), func(t *testing.T) {
			s := sharedStore(t)
			ctx := bg(t)
			job := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
			base := time.UnixMilli(time.Now().Add(-time.Minute).UnixMilli())
			a := "00000000-0000-4000-8000-000000000001"
			for i := 1; i <= 2; i++ {
				c := driver.TickClaim{Job: job, Tick: base.Add(time.Duration(i) * time.Second), Attempt: 1, Run: driver.RunRecord{Client: a}}
				if r, err := s.ClaimTick(ctx, c); err != nil || r.Status != driver.ClaimGranted {
					t.Fatalf("ClaimTick = %+v, %v", r, err)
				}
			}
			missed := []driver.RunRecord{{Tick: base, Outcome: driver.OutcomeMissed}}
			ops, err := s.AddRunsOps(ctx, job, missed, 0)
			if err != nil || ops == nil {
				t.Fatalf("AddRunsOps = %v, %v", ops, err)
			}
			// The first tick's run ends between AddRuns's reads and its write.
			first := driver.RunEnd{Job: job, Tick: base.Add(time.Second), Attempt: 1, Client: a, Outcome: driver.OutcomeOK}
			if err := s.EndRun(ctx, first); err != nil {
				t.Fatal(err)
			}
			if control {
				if err := s.Multi(ctx, zkstore.AnyVersion(ops)); err != nil {
					t.Fatalf("the operation at any version: %v", err)
				}
			} else {
				if err := s.Multi(ctx, ops); !errors.Is(err, zk.ErrBadVersion) {
					t.Fatalf("the operation read before the end = %v, want ErrBadVersion", err)
				}
				if err := s.AddRuns(ctx, job, missed, 0); err != nil {
					t.Fatal(err)
				}
			}
			st, err := s.History(ctx, job, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range st.Runs {
				got = append(got, fmt.Sprintf("%v %v", r.Tick.Sub(base), r.Outcome))
			}
			want := []string{"2s lost", "1s ok", "0s missed"}
			if control {
				want[1] = "1s lost" // the end is gone: what the check prevents
			}
			if !slices.Equal(got, want) {
				t.Errorf("history = %q, want %q", got, want)
			}
		})
	}
}
