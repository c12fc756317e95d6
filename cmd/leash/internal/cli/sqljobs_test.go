package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leash-go/leash/internal/testserver"
)

// TestCronJobsPostgres: leash cron runs its jobs on a postgres:// store,
// whose tables keep the claims and records, and leash jobs reads them back.
func TestCronJobsPostgres(t *testing.T) { testCronJobs(t, postgresStore(t)) }

// TestCronJobsMySQL: the same on a mysql:// store.
func TestCronJobsMySQL(t *testing.T) { testCronJobs(t, mysqlStore(t)) }

// testCronJobs runs leash cron with a job that succeeds and one that fails
// on st until each has a run recorded, stops it, and checks what leash
// jobs says: the schedule, the outcomes, the failing run's exit status,
// and the fencing token of the run's lock.
func testCronJobs(t *testing.T, st testStore) {
	dir := t.TempDir()
	tab, out := filepath.Join(dir, "crontab"), filepath.Join(dir, "out")
	prefix := fmt.Sprintf("test/%s/%d/", t.Name(), time.Now().UnixNano()) // new jobs on every run (-count)
	line := "@every 1s " + prefix + "ok  echo \"$LEASH_FENCE\" >> " + out + "\n@every 1s " + prefix + "fail  exit 3\n"
	if err := os.WriteFile(tab, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startLeash(t, st.url, "cron", tab)
	jobsJSON := func() []jobJSON {
		code, stdout, stderr := run(t, "jobs", "--store", st.url, "--json", "-n", "0", "--file", tab, prefix+"*")
		if code != exitOK {
			t.Fatalf("leash jobs on %s: %d %s", st.name, code, stderr)
		}
		var jobs []jobJSON
		if err := json.Unmarshal([]byte(stdout), &jobs); err != nil {
			t.Fatalf("leash jobs --json: %v\n%s", err, stdout)
		}
		return jobs
	}
	ended := func(j jobJSON, outcome string) bool {
		for _, r := range j.Runs {
			if r.Outcome == outcome {
				return true
			}
		}
		return false
	}
	eventually(t, time.Minute, "a run of each job recorded", func() bool {
		jobs := jobsJSON()
		return len(jobs) == 2 && ended(jobs[0], "failed") && ended(jobs[1], "ok")
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, time.Minute); code != exitOK {
		t.Errorf("leash cron on %s exited %d after SIGTERM: %s", st.name, code, p.stderr.String())
	}
	jobs := jobsJSON()
	if len(jobs) != 2 || jobs[0].Job != prefix+"fail" || jobs[1].Job != prefix+"ok" {
		t.Fatalf("leash jobs = %+v, want %sfail and %sok", jobs, prefix, prefix)
	}
	for _, j := range jobs {
		if j.Schedule != "@every 1s" || j.LatestTick == "" || j.Next == "" {
			t.Errorf("job %s: schedule %q, latest tick %q, next %q; want @every 1s and both ticks", j.Job, j.Schedule, j.LatestTick, j.Next)
		}
	}
	fences := strings.Fields(readFile(t, out))
	for _, r := range jobs[1].Runs {
		if r.Outcome == "ok" && (r.Fence == 0 || !strings.Contains(" "+strings.Join(fences, " ")+" ", fmt.Sprintf(" %d ", r.Fence))) {
			t.Errorf("run %+v: its fence is not one the command was given (%q)", r, fences)
		}
		if r.Outcome == "running" || r.Outcome == "lost" {
			t.Errorf("after leash cron stopped: run %+v", r)
		}
	}
	for _, r := range jobs[0].Runs {
		if r.Outcome == "failed" && !strings.Contains(r.Error, "3") {
			t.Errorf("failed run %+v: want its exit status 3 in the error", r)
		}
	}
	code, stdout, _ := run(t, "jobs", "--store", st.url, prefix+"fail")
	if code != exitOK || !strings.Contains(stdout, prefix+"fail") || !strings.Contains(stdout, "failed") {
		t.Errorf("leash jobs %sfail: %d\n%s", prefix, code, stdout)
	}
}

// TestCronJobsZooKeeper: the same on a zk:// store.
func TestCronJobsZooKeeper(t *testing.T) {
	url := "zk://" + testserver.NewZooKeeper(t).Addr + "/cli-jobs"
	testCronJobs(t, testStore{name: "zk", url: url})
}
