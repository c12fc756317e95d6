package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	cron "github.com/netresearch/go-cron"
)

// ErrBadSpec is matched (errors.Is) by the error of a schedule that cannot
// be parsed: a bad cron expression, an unknown time zone, an interval that
// is not a positive duration.
var ErrBadSpec = errors.New("schedule: bad schedule")

// A Schedule names the ticks of a job: the instants it is due.
type Schedule interface {
	// Next returns the job's first tick strictly after t.
	Next(t time.Time) time.Time
	// Prev returns the job's last tick at or before t.
	Prev(t time.Time) time.Time
}

// MinInterval is the shortest "@every" interval accepted.
const MinInterval = 10 * time.Millisecond

// Parse parses a schedule:
//
//   - "@every <duration>", such as "@every 1s" or "@every 15m": a fixed
//     interval, ticking at the multiples of the duration since the Unix
//     epoch, so every instance names the same ticks whenever it started;
//     time zones do not matter to it. At least MinInterval, and a whole
//     number of milliseconds: stores keep ticks to the millisecond.
//   - a cron expression of five fields (minute hour day-of-month month
//     day-of-week) or six (a seconds field first), or a descriptor
//     (@yearly, @monthly, @weekly, @daily, @hourly), optionally preceded by
//     "CRON_TZ=<zone> " (an IANA zone name such as Europe/Berlin; not
//     Local, which differs between hosts); without it, the expression is
//     read in loc (nil means UTC; time.Local is refused, as CRON_TZ=Local
//     is). A day-of-month
//     and a day-of-week given together must both match (AND), as
//     netresearch/go-cron reads them.
//
// Daylight-saving changes, for cron expressions in a zone that has them:
//
//   - spring forward: a wall time that does not exist that day (02:30 when
//     clocks go from 02:00 to 03:00) runs once, at the instant it names in
//     the offset before the change (02:30 standard time, 03:30 summer
//     time);
//   - fall back: a wall time that occurs twice (02:30 when clocks go from
//     03:00 back to 02:00) runs once, at its first occurrence; the repeated
//     wall times of the second pass are not ticks, so an hourly or more
//     frequent cron job pauses for the repeated hour. Use "@every" for work
//     that must keep its pace through the change.
func Parse(spec string, loc *time.Location) (Schedule, error) {
	spec = strings.TrimSpace(spec)
	if rest, ok := strings.CutPrefix(spec, "@every"); ok && (rest == "" || rest[0] == ' ') {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("%w %q: %w", ErrBadSpec, spec, err)
		}
		if d < MinInterval {
			return nil, fmt.Errorf("%w %q: the interval must be at least %v", ErrBadSpec, spec, MinInterval)
		}
		if d%time.Millisecond != 0 {
			// A tick the store keeps truncated would not name the tick it
			// was: claims, retries and missed ticks would not match.
			return nil, fmt.Errorf("%w %q: the interval must be a whole number of milliseconds (stores keep ticks to the millisecond)", ErrBadSpec, spec)
		}
		return Every(d), nil
	}
	if loc == nil {
		loc = time.UTC
	}
	if strings.HasPrefix(spec, "TZ=") {
		return nil, fmt.Errorf("%w %q: write CRON_TZ=, not TZ=", ErrBadSpec, spec)
	}
	if loc == time.Local && !strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, fmt.Errorf("%w %q: read in time.Local: name the zone (such as Europe/Berlin or UTC): the instances' local zones may differ", ErrBadSpec, spec)
	}
	if zone, _, _ := strings.Cut(strings.TrimPrefix(spec, "CRON_TZ="), " "); strings.HasPrefix(spec, "CRON_TZ=") && zone == "Local" {
		// Instances in different zones would name different ticks.
		return nil, fmt.Errorf("%w %q: name the zone (such as Europe/Berlin or UTC): the instances' local zones may differ", ErrBadSpec, spec)
	}
	s, err := parser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrBadSpec, spec, err)
	}
	ps, ok := s.(cron.ScheduleWithPrev)
	if !ok {
		return nil, fmt.Errorf("%w %q: not a cron expression leash can step back through", ErrBadSpec, spec)
	}
	if cs, ok := s.(*cron.SpecSchedule); ok && cs.Location != time.Local {
		loc = cs.Location
	}
	return &cronSchedule{s: ps, loc: loc}, nil
}

// SpecText returns spec as it reads without loc: a cron expression that
// names no zone (no CRON_TZ=) gets "CRON_TZ=<loc> " in front when loc is
// neither nil nor UTC, so that Parse(SpecText(spec, loc), nil) gives the
// same ticks as Parse(spec, loc). "@every" specs and specs that name their
// zone are returned as they are, trimmed. It is the text a Scheduler keeps
// in the store with each claim (driver.TickClaim.Spec) for operators, and
// what the CLI shows; time.Local, which names no zone another host could
// read the same, is left out too.
func SpecText(spec string, loc *time.Location) string {
	spec = strings.TrimSpace(spec)
	if loc == nil || loc == time.UTC || loc == time.Local || strings.HasPrefix(spec, "@every") || strings.HasPrefix(spec, "CRON_TZ=") {
		return spec
	}
	return "CRON_TZ=" + loc.String() + " " + spec
}

// parser reads five or six fields (seconds optional), descriptors and
// CRON_TZ. Nothing else in the package writes it.
var parser = cron.MustNewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Every returns the schedule that ticks every d, at the multiples of d since
// the Unix epoch. d must be positive and a whole number of milliseconds;
// Parse checks both for "@every".
func Every(d time.Duration) Schedule { return every(d) }

type every time.Duration

func (e every) Next(t time.Time) time.Time {
	d := int64(e)
	ns := t.UnixNano()
	n := ns - mod(ns, d) + d
	return time.Unix(0, n).In(t.Location())
}

func (e every) Prev(t time.Time) time.Time {
	ns := t.UnixNano()
	return time.Unix(0, ns-mod(ns, int64(e))).In(t.Location())
}

// mod is a modulo that is never negative, for times before the epoch.
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

func (e every) String() string { return "@every " + time.Duration(e).String() }

// A cronSchedule is a cron expression read in loc, with the fall-back rule
// of Parse: a tick whose wall time already occurred is skipped.
type cronSchedule struct {
	s   cron.ScheduleWithPrev
	loc *time.Location
}

// maxSkips bounds the repeated wall times Next and Prev step over: a
// second-by-second job in a repeated hour skips 3600 of them.
const maxSkips = 2 * 3600 * 2

func (c *cronSchedule) Next(t time.Time) time.Time {
	n := c.s.Next(t.In(c.loc))
	for i := 0; i < maxSkips && !n.IsZero() && repeated(n); i++ {
		n = c.s.Next(n)
	}
	return n
}

func (c *cronSchedule) Prev(t time.Time) time.Time {
	// The cron Prev is strictly before its argument, and does not always
	// agree with Next across a DST change (it misses a spring-forward
	// tick). So step back twice with it, to a time surely before the last
	// tick, and walk forward with Next, whose rule is the one that counts.
	lb := c.s.Prev(t.In(c.loc).Add(time.Nanosecond))
	if lb.IsZero() {
		return lb
	}
	if b := c.s.Prev(lb); !b.IsZero() {
		lb = b
	}
	p := time.Time{}
	for n := c.Next(lb.Add(-time.Nanosecond)); !n.IsZero() && !n.After(t); n = c.Next(n) {
		p = n
	}
	return p
}

// repeated reports whether the wall time of t occurred earlier too: t is
// in the second pass of a fall-back change, that is within d of the start
// of its zone period, where the offset before it was d greater.
func repeated(t time.Time) bool {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, now := t.Zone()
	_, before := start.Add(-time.Nanosecond).Zone()
	return before > now && t.Sub(start) < time.Duration(before-now)*time.Second
}
