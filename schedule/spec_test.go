package schedule_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/schedule"
)

func TestParseRejectsBadSpecs(t *testing.T) {
	for _, spec := range []string{"", "@every", "@every 0s", "@every 1ms", "@every 100100us", "@every 1.5s250us", "@every -5s", "@every soon", "* * *",
		"61 * * * *", "CRON_TZ=Mars/Olympus 0 * * * *", "TZ=UTC 0 * * * *", "@fortnightly"} {
		if _, err := schedule.Parse(spec, nil); !errors.Is(err, schedule.ErrBadSpec) {
			t.Errorf("Parse(%q) = %v, want ErrBadSpec", spec, err)
		}
	}
}

func TestEveryTicksAtMultiplesOfTheEpoch(t *testing.T) {
	s, err := schedule.Parse("@every 15s", nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 24, 10, 0, 7, 0, time.UTC)
	if got, want := s.Next(at), at.Add(8*time.Second); !got.Equal(want) {
		t.Errorf("Next(%v) = %v, want %v", at, got, want)
	}
	if got, want := s.Prev(at), at.Add(-7*time.Second); !got.Equal(want) {
		t.Errorf("Prev(%v) = %v, want %v", at, got, want)
	}
	on := at.Add(8 * time.Second)
	if got := s.Next(on); !got.Equal(on.Add(15 * time.Second)) {
		t.Errorf("Next of a tick = %v, want the one after", got)
	}
	if got := s.Prev(on); !got.Equal(on) {
		t.Errorf("Prev of a tick = %v, want the tick itself", got)
	}
	// Instances in other zones name the same instants.
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if got := s.Next(at.In(berlin)); !got.Equal(at.Add(8 * time.Second)) {
		t.Errorf("Next in another zone = %v, want the same instant", got)
	}
}

func TestCronSecondsAndZones(t *testing.T) {
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	at := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		spec string
		loc  *time.Location
		want time.Time
	}{
		{"*/10 * * * * *", nil, at.Add(10 * time.Second)},
		{"30 2 * * *", nil, at.Add(2*time.Hour + 30*time.Minute)},
		{"30 2 * * *", tokyo, time.Date(2026, 11, 24, 2, 30, 0, 0, tokyo).Add(24 * time.Hour)},
		{"CRON_TZ=Asia/Tokyo 30 2 * * *", nil, time.Date(2026, 11, 25, 2, 30, 0, 0, tokyo)},
		{"CRON_TZ=Asia/Tokyo 0 30 2 * * *", time.UTC, time.Date(2026, 11, 25, 2, 30, 0, 0, tokyo)},
		{"@hourly", nil, at.Add(time.Hour)},
	} {
		s, err := schedule.Parse(tc.spec, tc.loc)
		if err != nil {
			t.Errorf("Parse(%q) error: %v", tc.spec, err)
			continue
		}
		if got := s.Next(at); !got.Equal(tc.want) {
			t.Errorf("Parse(%q, %v).Next(%v) = %v, want %v", tc.spec, tc.loc, at, got, tc.want)
		}
	}
}

// TestDaylightSavingRule checks the rule Parse documents, for a job at
// 02:30 every day in Europe/Berlin, on both of 2026's transition days: on
// 29 March (02:00 → 03:00) it runs once, at 03:30 summer time (the instant
// 02:30 standard time names); on 25 October (03:00 → 02:00) it runs once,
// at the first 02:30 (summer time), not again at the second. The same from
// Prev's side, and for an instance that starts inside the repeated hour.
func TestDaylightSavingRule(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no tz database:", err)
	}
	s, err := schedule.Parse("CRON_TZ=Europe/Berlin 0 30 2 * * *", nil)
	if err != nil {
		t.Fatal(err)
	}
	utc := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, time.UTC) }
	for _, tc := range []struct {
		day  string
		from time.Time
		want []time.Time // UTC
	}{
		{"spring forward", time.Date(2026, 3, 27, 12, 0, 0, 0, berlin),
			[]time.Time{utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 30), utc(2026, 3, 30, 0, 30)}},
		{"fall back", time.Date(2026, 10, 23, 12, 0, 0, 0, berlin),
			[]time.Time{utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)}},
	} {
		t.Run(tc.day, func(t *testing.T) {
			tick := tc.from
			for i, want := range tc.want {
				tick = s.Next(tick)
				if !tick.Equal(want) {
					t.Fatalf("tick %d = %v (%v), want %v", i, tick, tick.UTC(), want)
				}
			}
			for i := len(tc.want) - 1; i > 0; i-- {
				if got := s.Prev(tc.want[i].Add(-time.Second)); !got.Equal(tc.want[i-1]) {
					t.Errorf("Prev(just before %v) = %v, want %v", tc.want[i], got.UTC(), tc.want[i-1])
				}
			}
		})
	}
	// An instance that starts in the repeated hour (02:10 standard time, on
	// 25 October) must not name the second 02:30 a tick either, or it would
	// claim a tick the instances that ran the first one never claimed.
	inRepeat := utc(2026, 10, 25, 1, 10)
	if got, want := s.Next(inRepeat), utc(2026, 10, 26, 1, 30); !got.Equal(want) {
		t.Errorf("Next(02:10 CET, in the repeated hour) = %v, want %v", got.UTC(), want)
	}
	// A zone whose clocks go back half an hour (Lord Howe Island, 5 April
	// 2026, 02:00 → 01:30): 01:45 runs once, at its first occurrence.
	s, err = schedule.Parse("CRON_TZ=Australia/Lord_Howe 0 45 1 * * *", nil)
	if err != nil {
		t.Fatal(err)
	}
	tick := s.Next(utc(2026, 4, 4, 12, 0)) // 23:00 on the 4th, local
	if want := utc(2026, 4, 4, 14, 45); !tick.Equal(want) {
		t.Errorf("Lord Howe 01:45 on 5 April = %v, want %v (its first occurrence, +11)", tick.UTC(), want)
	}
	if next, want := s.Next(tick), utc(2026, 4, 5, 15, 15); !next.Equal(want) {
		t.Errorf("Lord Howe 01:45 after 5 April = %v, want %v (6 April, +1030): the repeat is not a tick", next.UTC(), want)
	}
	// A half-hourly cron job pauses for the repeated hour; @every does not.
	half, _ := schedule.Parse("CRON_TZ=Europe/Berlin 0 */30 * * * *", nil)
	var got []time.Time
	for tick := utc(2026, 10, 24, 23, 50); len(got) < 4; {
		tick = half.Next(tick)
		got = append(got, tick.UTC())
	}
	want := []time.Time{utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 2, 0), utc(2026, 10, 25, 2, 30)}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Errorf("half-hourly ticks across the fall back = %v, want %v", got, want)
			break
		}
	}
}

// TestHistoryKeepsTheSpec: the store keeps each job's schedule with its
// claims, with the zone it is read in, so that an operator's tool computes
// the same next tick with Parse(spec, nil).
func TestHistoryKeepsTheSpec(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip("no tz database:", err)
	}
	in := newInstance(t, memstore.New(), nil, nil)
	log := newRunLog()
	specs := map[string]string{"every": "@every 50ms", "zoned": "* * * * * *"}
	want := map[string]string{"every": "@every 50ms", "zoned": "CRON_TZ=Asia/Tokyo * * * * * *"}
	for name, spec := range specs {
		if err := in.Add(name, spec, log.fn(name, nil), &schedule.JobOptions{Location: tokyo}); err != nil {
			t.Fatal(err)
		}
	}
	in.run(t)
	log.await(t, 30*time.Second, "a run of each job", func(r []ran) bool {
		seen := map[string]bool{}
		for _, x := range r {
			seen[x.who] = true
		}
		return len(seen) == 2
	})
	in.stop(t)
	for name := range specs {
		st, err := in.History(context.Background(), name, 1)
		if err != nil || st.Spec != want[name] {
			t.Errorf("History(%q).Spec = %q, %v; want %q", name, st.Spec, err, want[name])
		}
	}
}

// TestParseRefusesLocalZone: CRON_TZ=Local, or a cron expression read in
// time.Local, names no zone every instance shares (go-cron would read it as
// the zone Parse was given, silently).
func TestParseRefusesLocalZone(t *testing.T) {
	if _, err := schedule.Parse("CRON_TZ=Local 0 30 2 * * *", time.UTC); !errors.Is(err, schedule.ErrBadSpec) {
		t.Errorf("CRON_TZ=Local: error %v, want ErrBadSpec", err)
	}
	if _, err := schedule.Parse("0 30 2 * * *", time.Local); !errors.Is(err, schedule.ErrBadSpec) {
		t.Errorf("a cron expression read in time.Local: error %v, want ErrBadSpec", err)
	}
	if _, err := schedule.Parse("@every 1m", time.Local); err != nil {
		t.Errorf("@every in time.Local: %v, want no error (zones do not matter to it)", err)
	}
}

// TestSpecText: the text kept for a spec reads, without a zone, as the spec
// read in its zone.
func TestSpecText(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip("no tz database:", err)
	}
	for _, tc := range []struct {
		spec string
		loc  *time.Location
		want string
	}{
		{"0 30 2 * * *", tokyo, "CRON_TZ=Asia/Tokyo 0 30 2 * * *"},
		{"  0 30 2 * * *  ", tokyo, "CRON_TZ=Asia/Tokyo 0 30 2 * * *"},
		{"0 30 2 * * *", time.UTC, "0 30 2 * * *"},
		{"0 30 2 * * *", nil, "0 30 2 * * *"},
		{"CRON_TZ=Europe/Berlin 0 30 2 * * *", tokyo, "CRON_TZ=Europe/Berlin 0 30 2 * * *"},
		{" @every 90s", tokyo, "@every 90s"},
	} {
		got := schedule.SpecText(tc.spec, tc.loc)
		if got != tc.want {
			t.Errorf("SpecText(%q, %v) = %q, want %q", tc.spec, tc.loc, got, tc.want)
			continue
		}
		in, err1 := schedule.Parse(tc.spec, tc.loc)
		out, err2 := schedule.Parse(got, nil)
		if err1 != nil || err2 != nil {
			t.Fatalf("Parse: %v, %v", err1, err2)
		}
		from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		if a, b := in.Next(from), out.Next(from); !a.Equal(b) {
			t.Errorf("Parse(%q, %v).Next = %v, Parse(%q, nil).Next = %v", tc.spec, tc.loc, a, got, b)
		}
	}
}
