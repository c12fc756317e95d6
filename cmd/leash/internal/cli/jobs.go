package cli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/schedule"
)

func cmdJobs() *command {
	return &command{
		name:  "jobs",
		usage: "jobs [--json] [-n N] [--file FILE] [store flags] [PATTERN]",
		short: "show scheduled jobs' last runs: where, when, how they ended",
		long: `
Jobs shows the scheduled jobs whose names match PATTERN (a glob as 'leash
ls' takes; default: every job) that the store has records of, as 'leash
cron' and the schedule library keep them: for each job its latest claimed
tick, and its last N runs, newest first, with

  TICK      the scheduled instant the run was for
  ATTEMPT   1, or n for the nth run of the tick (retries)
  OUTCOME   running (or queued for the job's lock: overlap=queue, a
            retry), ok, failed, skipped (the previous run still held the
            job's lock), missed (no host claimed the tick in time),
            cancelled (max-run passed, or the host shut down), lost (the
            run lost its lock, or its host stopped without saying how it
            ended: killed, or cut off past its lease)
  WHERE     the host and pid that ran it
  STARTED   when the tick was claimed, by the store's clock
  TOOK      how long the run took, by the store's clock
  FENCE     the fencing token of the run's lock
  ERROR     the run's error: for leash cron, "exit status N" or why the
            command was stopped

Each job's schedule, as its latest claim gave it to the store, and its next
tick after the store's now head its runs. With --file FILE (a crontab of
'leash cron'), the schedules come from the file instead, and the file's jobs
that have no record yet are listed too. Jobs needs a store that keeps job
records (every store but etcd://); on one without, it exits 64 before any
round trip.

  --json       print a JSON array of jobs: {"job", "schedule", "next",
               "latest_tick", "latest_attempt", "runs": [{"tick",
               "attempt", "outcome", "host", "pid", "client", "started",
               "ended", "duration_ms", "fence", "error"}]}; times are RFC
               3339 in UTC
  -n N         runs shown per job (default 5; 0: every run kept)
  --file FILE  the crontab whose schedules give each job's next tick
` + storeHelp + `

Exit status: 0, also when no job matches; 64 for a bad command line, FILE
or URL, or a store that keeps no job records; 69 when the store cannot be
reached; 77 when it refuses the credentials.

Example:

  $ leash jobs --file /etc/leash.cron 'billing/*'
  billing/nightly  (CRON_TZ=Europe/Berlin 0 30 2 * * *)  next 2026-11-25T01:30:00Z
    TICK                  ATTEMPT  OUTCOME  WHERE        STARTED                   TOOK    FENCE  ERROR
    2026-11-24T01:30:00Z  2        ok       cron-2:5120  2026-11-24T01:30:03.012Z  41.2s   88
    2026-11-24T01:30:00Z  1        failed   cron-1:4411  2026-11-24T01:30:00.004Z  1.9s    87     exit status 3`,
		run: runJobs,
	}
}

// jobJSON is one job as leash jobs --json prints it.
type jobJSON struct {
	Job           string    `json:"job"`
	Schedule      string    `json:"schedule,omitempty"`
	Next          string    `json:"next,omitempty"`
	LatestTick    string    `json:"latest_tick,omitempty"`
	LatestAttempt int       `json:"latest_attempt,omitempty"`
	Runs          []runJSON `json:"runs"`
}

// runJSON is one run in a jobJSON.
type runJSON struct {
	Tick       string `json:"tick"`
	Attempt    int    `json:"attempt"`
	Outcome    string `json:"outcome"`
	Host       string `json:"host,omitempty"`
	PID        int    `json:"pid,omitempty"`
	Client     string `json:"client,omitempty"`
	Started    string `json:"started,omitempty"`
	Ended      string `json:"ended,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	Fence      int64  `json:"fence,omitempty"`
	Error      string `json:"error,omitempty"`
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func runJobs(e *env, argv []string) int {
	c := cmdJobs()
	var (
		asJSON bool
		n      int
		file   string
	)
	sf, operands, err := parseOperator(e, c, argv, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
		fs.IntVar(&n, "n", 5, "runs shown per job (0: all kept)")
		fs.StringVar(&file, "file", "", "crontab `file` whose schedules give the next ticks")
	})
	if err != nil {
		return exitParse(err)
	}
	switch {
	case len(operands) > 1:
		return e.fail("jobs", usageErrorf("jobs takes at most one pattern, got %d (quote a pattern, or the shell expands it): leash %s", len(operands), c.usage))
	case n < 0:
		return e.fail("jobs", usageErrorf("-n %d: must be 0 (every run kept) or more", n))
	}
	pattern := ""
	if len(operands) == 1 {
		pattern = operands[0]
	}
	if _, err := driver.Glob(pattern); err != nil {
		return e.fail("jobs", usageErrorf("pattern %q: %v", pattern, err))
	}
	var tab map[string]*cronJob
	if file != "" {
		jobs, err := readCrontab(file)
		if err != nil {
			return e.fail("jobs", withStatus(exitUsage, err))
		}
		tab = map[string]*cronJob{}
		for _, j := range jobs {
			tab[j.name] = j
		}
	}
	ctx := context.Background()
	var js driver.JobStore
	conn, err := openStore(ctx, sf, func(c *conn) error {
		var ok bool
		if js, ok = c.store.(driver.JobStore); !ok {
			return c.lacks("jobs", "job records (driver.JobStore)")
		}
		return nil
	})
	if err != nil {
		return e.fail("jobs", err)
	}
	defer conn.Close()
	names, err := js.Jobs(ctx, pattern)
	if err != nil {
		return e.fail("jobs", conn.fail(err))
	}
	if tab != nil {
		glob, err := driver.Glob(cmp.Or(pattern, "*"))
		if err != nil {
			return e.fail("jobs", withStatus(exitUsage, err))
		}
		for name := range tab {
			if glob.MatchString(name) && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	out := []jobJSON{}
	for _, name := range names {
		st, err := js.History(ctx, name, n)
		if err != nil {
			return e.fail("jobs", conn.fail(err))
		}
		j := jobJSON{Job: name, LatestTick: stamp(st.Tick), LatestAttempt: st.Attempt, Runs: []runJSON{}}
		now := st.Now
		if now.IsZero() {
			now = time.Now()
		}
		if cj := tab[name]; cj != nil {
			j.Schedule = schedule.SpecText(cj.spec, cj.loc)
			j.Next = stamp(cj.sched.Next(now))
		} else if st.Spec != "" {
			j.Schedule = st.Spec
			if sched, err := schedule.Parse(st.Spec, nil); err == nil {
				j.Next = stamp(sched.Next(now))
			}
		}
		for _, r := range st.Runs {
			j.Runs = append(j.Runs, runJSON{Tick: stamp(r.Tick), Attempt: r.Attempt, Outcome: r.Outcome.String(), Host: r.Host,
				PID: r.PID, Client: r.Client, Started: stamp(r.Started), Ended: stamp(r.Ended),
				DurationMS: r.Duration().Milliseconds(), Fence: r.Fence, Error: r.Error})
		}
		out = append(out, j)
	}
	if asJSON {
		if err := writeJSON(e.stdout, out); err != nil {
			return e.fail("jobs", err)
		}
		return exitOK
	}
	if len(out) == 0 {
		fmt.Fprintf(e.stderr, "leash: jobs: no job matches %q\n", pattern)
		return exitOK
	}
	printJobs(e.stdout, out)
	return exitOK
}

// printJobs prints jobs as a table per job.
func printJobs(w io.Writer, jobs []jobJSON) {
	for i, j := range jobs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		head := j.Job
		if j.Schedule != "" {
			head += "  (" + j.Schedule + ")"
		}
		if j.Next != "" {
			head += "  next " + j.Next
		}
		fmt.Fprintln(w, head)
		if len(j.Runs) == 0 {
			fmt.Fprintln(w, "  no runs recorded")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  TICK\tATTEMPT\tOUTCOME\tWHERE\tSTARTED\tTOOK\tFENCE\tERROR")
		for _, r := range j.Runs {
			where, took, fence := "", "", ""
			if r.Host != "" || r.PID != 0 {
				where = r.Host + ":" + strconv.Itoa(r.PID)
			}
			if r.Ended != "" && r.Started != "" {
				took = (time.Duration(r.DurationMS) * time.Millisecond).String()
			}
			if r.Fence != 0 {
				fence = strconv.FormatInt(r.Fence, 10)
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Tick, r.Attempt, r.Outcome, where, r.Started, took, fence, oneLine(r.Error))
		}
		tw.Flush()
	}
}
