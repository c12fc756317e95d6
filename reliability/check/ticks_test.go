package check

import (
	"testing"
	"time"
)

func TestTicks(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	expected := []time.Time{sec(1), sec(2), sec(3), sec(4)}
	good := []TickRun{
		{Tick: sec(1), Attempt: 1, Outcome: "ok", Started: sec(1), Where: "a"},
		{Tick: sec(2), Attempt: 1, Outcome: "failed", Started: sec(2), Where: "b"},
		{Tick: sec(2), Attempt: 2, Outcome: "ok", Started: sec(2).Add(time.Millisecond), Where: "a"},
		{Tick: sec(3), Attempt: 1, Outcome: "skipped", Started: sec(3), Where: "c"},
		{Tick: sec(4), Attempt: 1, Outcome: "lost", Started: sec(4).Add(-5 * time.Millisecond), Where: "c"},
		{Tick: sec(0), Outcome: "missed"},
	}
	if r := Ticks(good, expected, 10*time.Millisecond); !r.OK() || r.Ticks != 4 {
		t.Fatalf("a clean history was judged bad: %v", r)
	}
	bad := append([]TickRun{
		{Tick: sec(1), Attempt: 1, Outcome: "ok", Started: sec(1).Add(300 * time.Millisecond), Where: "late host"},
		{Tick: sec(5), Attempt: 0, Started: sec(5).Add(-20 * time.Millisecond), Where: "early host"},
	}, good[1:]...)
	bad = append(bad, TickRun{Tick: sec(1), Outcome: "missed"})
	r := Ticks(bad, append(expected, sec(6)), 10*time.Millisecond)
	if len(r.Duplicates) != 0 {
		t.Errorf("duplicates in a history without: %v", r)
	}
	if len(r.Missed) != 1 || !r.Missed[0].Equal(sec(6)) {
		t.Errorf("missed = %v, want [tick 6]", r.Missed)
	}
	if len(r.Early) != 1 {
		t.Errorf("early = %v, want the early host's run", r.Early)
	}
	dup := append(good, TickRun{Tick: sec(1), Attempt: 1, Outcome: "ok", Where: "late host"})
	if r := Ticks(dup, expected, 10*time.Millisecond); len(r.Duplicates) != 1 || r.OK() {
		t.Errorf("a tick run twice was not caught: %v", r)
	}
}

// TestTicksAttemptAfterSuccess: a tick run again after an attempt of it
// ended ok or lost (a lost run may have done its work) was run twice, as a
// retry or not: a retry follows only a failed or cancelled attempt.
func TestTicksAttemptAfterSuccess(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	for _, first := range []string{"ok", "lost"} {
		runs := []TickRun{
			{Tick: t0, Attempt: 1, Outcome: first, Started: t0, Where: "a"},
			{Tick: t0, Attempt: 2, Outcome: "ok", Started: t0.Add(time.Second), Where: "b"},
		}
		if r := Ticks(runs, []time.Time{t0}, 10*time.Millisecond); len(r.Duplicates) != 1 || r.OK() {
			t.Errorf("attempt 2 after attempt 1 ended %s was not caught: %v", first, r)
		}
	}
}
