package cli

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/schedule"
)

// crontabHelp defines the file format of leash cron, for its help.
const crontabHelp = `
The file. Each line is blank, a comment (its first non-blank character is
#), a zone setting, or a job:

  TZ=ZONE                a zone setting: cron expressions on the lines
                         after it that name no zone are read in ZONE (an
                         IANA name such as Europe/Berlin, or UTC; not
                         Local, which differs between hosts); before any
                         setting, UTC. CRON_TZ=ZONE on a line of its own is
                         the same.
  SCHEDULE NAME [OPTION=VALUE...] COMMAND LINE
                         a job.

SCHEDULE is one of:

  five fields            minute hour day-of-month month day-of-week
  six fields             second minute hour day-of-month month day-of-week
  @yearly @monthly @weekly @daily @hourly
  @every DURATION        every DURATION (such as 1s, 15m), at the multiples
                         of DURATION since the Unix epoch, so every host names
                         the same ticks

and a cron expression (not @every) may start with CRON_TZ=ZONE, its own
zone. The expression has six fields when its sixth word is a day-of-week
field (only digits, day names and * ? / , - L W #, such as 1-5 or
mon-fri/2); otherwise five, and the sixth word is NAME. Daylight-saving changes follow
the schedule library's rule: a wall time skipped by spring-forward runs once
(at the instant it names in the offset before the change), a wall time
repeated by fall-back runs once (its first occurrence).

NAME is the job's name: the name of its run lock and of its history in the
store ('leash jobs'), under the same rules as a lock name. It must not look
like a day-of-week field. Each NAME appears once in a file.

OPTIONs, each as key=value before the command, all optional:

  overlap=skip|queue|N   a tick that comes while the job's previous run
                         still runs (on any host) is skipped (default),
                         queued until its window ends (the next tick), or
                         run beside it while fewer than N runs run
  max-run=DURATION       the command gets SIGTERM (then SIGKILL after
                         --kill-after) when its run has lasted DURATION,
                         and the run is recorded cancelled (default: none)
  retries=N              a run that failed (non-zero exit) or was stopped
                         by max-run (whatever the command's exit status)
                         is run again by its host, up to N more times while
                         the tick's window lasts (default 0); one stopped by
                         its daemon's shutdown, by a host that claims the
                         tick after that; LEASH_ATTEMPT tells which
  retry-delay=DURATION   pause before a retry (default 1s)
  lateness=DURATION      how late, by the store's clock, a tick may still
                         start (default: until the next tick)
  misfire=skip|latest    latest: when the daemon starts (or the job is
                         added) and the job's latest tick ran nowhere, run
                         it once (default skip)
  lease=DURATION         the run lock's lease (default: --lease)

A word key=value whose key is not one of these starts the command
(FOO=bar ./x sets FOO for ./x, as the shell does).

COMMAND LINE is the rest of the line, run by /bin/sh -c, in its own process
group, with the daemon's standard output and error, and with these
variables in its environment:

  LEASH_NAME     the job's name
  LEASH_FENCE    the fencing token of the run: larger than that of every
                 earlier run of the job; pass it to what the command writes
  LEASH_TICK     the tick the run is for (RFC 3339, UTC, with nanoseconds):
                 the same on every host, whatever its clock says
  LEASH_ATTEMPT  1, or n for the nth run of a tick (retries)

Example:

  # every host runs: leash cron /etc/leash.cron
  TZ=Europe/Berlin
  0 30 2 * * *   nightly-report  max-run=1h retries=2  ./report.sh --day yesterday
  */5 * * * *    sync-orders     overlap=queue  sync-orders --fence "$LEASH_FENCE"
  @every 10s     heartbeat       curl -fsS https://example.com/ping
  CRON_TZ=America/New_York 0 9 * * mon-fri  standup  ./standup.sh`

// A cronJob is one job line of a crontab.
type cronJob struct {
	line    int    // line number in the file, from 1
	name    string // the job's name
	spec    string // its schedule, as schedule.Parse takes it
	loc     *time.Location
	sched   schedule.Schedule
	opts    schedule.JobOptions
	command string // the command line, for /bin/sh -c
}

// same reports whether a and b describe the same job, so that a reload
// leaves it running.
func (a *cronJob) same(b *cronJob) bool {
	ao, bo := a.opts, b.opts
	ao.Location, bo.Location = nil, nil // loaded anew on each read
	return a.name == b.name && a.spec == b.spec && a.loc.String() == b.loc.String() && ao == bo && a.command == b.command
}

// A crontabError is a bad line of a crontab.
type crontabError struct {
	file string
	line int
	msg  string
}

func (e *crontabError) Error() string { return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg) }

var (
	// dowField matches a day-of-week field of digits and cron's signs.
	dowField = regexp.MustCompile(`^[0-9*?/,LW#-]+$`)
	// dayName matches a day's name standing as a word of its own.
	dayName = regexp.MustCompile(`(?i)\b(sun|mon|tue|wed|thu|fri|sat)\b`)
)

// isDowField reports whether s is a day-of-week field: digits, day names
// and cron's signs, so that mon-fri/2 is one as 1-5/2 is (and monsun-backup
// is not).
func isDowField(s string) bool { return dowField.MatchString(dayName.ReplaceAllString(s, "0")) }

// parseCrontab reads a crontab. Its errors name the file and line; every
// job's schedule and options are checked, without any network call.
func parseCrontab(file string, r io.Reader) ([]*cronJob, error) {
	var (
		jobs  []*cronJob
		seen  = map[string]int{}
		loc   = time.UTC
		sc    = bufio.NewScanner(r)
		lineN = 0
	)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		lineN++
		bad := func(format string, a ...any) error {
			return &crontabError{file: file, line: lineN, msg: fmt.Sprintf(format, a...)}
		}
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		words := strings.Fields(text)
		if len(words) == 1 {
			if zone, ok := cutAny(words[0], "TZ=", "CRON_TZ="); ok {
				if zone == "Local" {
					// Hosts in different zones would name different ticks.
					return nil, bad("%s: name the zone (such as Europe/Berlin or UTC): the hosts' local zones may differ", words[0])
				}
				l, err := time.LoadLocation(zone)
				if err != nil || zone == "" {
					return nil, bad("unknown time zone %q", zone)
				}
				loc = l
				continue
			}
		}
		j, err := parseJobLine(words, loc)
		if err != nil {
			return nil, bad("%s", err)
		}
		if prev, ok := seen[j.name]; ok {
			return nil, bad("job %q is already on line %d", j.name, prev)
		}
		seen[j.name] = lineN
		j.line = lineN
		jobs = append(jobs, j)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return jobs, nil
}

func cutAny(s string, prefixes ...string) (string, bool) {
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return rest, true
		}
	}
	return "", false
}

// parseJobLine reads one job line, split into words.
func parseJobLine(words []string, loc *time.Location) (*cronJob, error) {
	var spec []string
	if _, ok := strings.CutPrefix(words[0], "CRON_TZ="); ok {
		spec, words = append(spec, words[0]), words[1:]
	} else if strings.HasPrefix(words[0], "TZ=") {
		return nil, fmt.Errorf("write CRON_TZ=ZONE before a job's schedule (TZ=ZONE stands on a line of its own)")
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("a zone and no schedule")
	}
	var n int
	switch {
	case words[0] == "@every":
		n = 2
	case strings.HasPrefix(words[0], "@"):
		n = 1
	case len(words) > 5 && isDowField(words[5]):
		n = 6
	default:
		n = 5
	}
	if len(words) < n+2 {
		return nil, fmt.Errorf("want SCHEDULE NAME COMMAND, got %q", strings.Join(words, " "))
	}
	spec, words = append(spec, words[:n]...), words[n:]
	j := &cronJob{name: words[0], spec: strings.Join(spec, " "), loc: loc}
	if err := leash.ValidateName(j.name); err != nil {
		return nil, fmt.Errorf("job name %q: %s", j.name, strings.TrimPrefix(err.Error(), "leash: invalid argument: "))
	}
	words = words[1:]
	for len(words) > 0 {
		key, value, ok := strings.Cut(words[0], "=")
		if !ok || !isJobOption(key) {
			break
		}
		if err := setJobOption(&j.opts, key, value); err != nil {
			return nil, fmt.Errorf("job %q: %s=%s: %s", j.name, key, value, err)
		}
		words = words[1:]
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("job %q has no command", j.name)
	}
	// The command line as written, from its first word on: the shell
	// reads it, quotes and all.
	j.command = strings.Join(words, " ")
	var err error
	if j.sched, err = schedule.Parse(j.spec, loc); err != nil {
		return nil, fmt.Errorf("job %q: %s", j.name, strings.TrimPrefix(err.Error(), "schedule: "))
	}
	if j.opts.Location = loc; j.opts.Overlap == schedule.OverlapLimit && j.opts.Limit < 1 {
		return nil, fmt.Errorf("job %q: overlap=%d: want at least 1", j.name, j.opts.Limit)
	}
	return j, nil
}

var jobOptionKeys = []string{"overlap", "max-run", "retries", "retry-delay", "lateness", "misfire", "lease"}

func isJobOption(key string) bool {
	for _, k := range jobOptionKeys {
		if k == key {
			return true
		}
	}
	return false
}

// setJobOption sets one key=value option.
func setJobOption(o *schedule.JobOptions, key, value string) error {
	dur := func(d *time.Duration) error {
		v, err := time.ParseDuration(value)
		switch {
		case err != nil:
			return fmt.Errorf("not a duration (write it like 30s, 5m or 1h)")
		case v <= 0:
			return fmt.Errorf("must be positive")
		}
		*d = v
		return nil
	}
	switch key {
	case "overlap":
		if p, ok := map[string]schedule.Overlap{"skip": schedule.OverlapSkip, "queue": schedule.OverlapQueue}[value]; ok {
			o.Overlap = p
			return nil
		}
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return fmt.Errorf("want skip, queue or a number of runs at least 1")
		}
		o.Overlap, o.Limit = schedule.OverlapLimit, n
	case "max-run":
		return dur(&o.MaxRun)
	case "retry-delay":
		return dur(&o.RetryDelay)
	case "lateness":
		return dur(&o.Lateness)
	case "lease":
		if err := dur(&o.Lease); err != nil {
			return err
		}
		if o.Lease < leash.MinLease || o.Lease > leash.MaxLease {
			return fmt.Errorf("must be between %v and %v", leash.MinLease, leash.MaxLease)
		}
	case "retries":
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return fmt.Errorf("want a number, 0 or more")
		}
		o.Retries = n
	case "misfire":
		p, ok := map[string]schedule.Misfire{"skip": schedule.MisfireSkip, "latest": schedule.MisfireRunLatest}[value]
		if !ok {
			return fmt.Errorf("want skip or latest")
		}
		o.Misfire = p
	}
	return nil
}
