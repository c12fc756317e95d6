package driver

import (
	"time"
	"unicode/utf8"
)

// KeepRuns resolves TickClaim.Keep and AddRuns's keep for a [JobStore]:
// DefaultKeepRuns for n <= 0, at most MaxKeepRuns.
func KeepRuns(n int) int {
	if n <= 0 {
		return DefaultKeepRuns
	}
	return min(n, MaxKeepRuns)
}

// ReportedRun is rec as [JobStore.History] (and a taken claim's Last)
// reports it: a record still OutcomeRunning is OutcomeLost unless its
// claimer holds a lock or permit on the job's name (mine), or it may still
// be waiting for one (waiting: see [ReportedRuns]; the job's latest claim
// always may) and someone holds one (held).
func ReportedRun(rec RunRecord, mine, held, waiting bool) RunRecord {
	if rec.Outcome == OutcomeRunning && !mine && !(waiting && held) {
		rec.Outcome = OutcomeLost
	}
	return rec
}

// ReportedRuns rewrites a job's records, newest first, as
// [JobStore.History] reports them (see [ReportedRun]). A run that waits for
// the job's lock (queued behind a run still running, or a retry) waits at
// most until its tick's window ends, when it records itself skipped; so a
// record still running may be waiting for as long as no newer record has
// ended, even once later ticks were claimed (they queue behind it). Below a
// record that ended, a running record whose claimer holds nothing is lost.
// holds says, for recs[i] still running, whether its claimer holds a lock or
// permit on the job's name (mine) and whether anyone does (held).
func ReportedRuns(recs []RunRecord, holds func(i int) (mine, held bool)) {
	waiting := true
	for i, rec := range recs {
		if rec.Outcome != OutcomeRunning {
			waiting = false
			continue
		}
		mine, held := holds(i)
		recs[i] = ReportedRun(rec, mine, held, waiting)
	}
}

// UnixMilliOrZero is the time ms milliseconds after the Unix epoch, and
// the zero time for 0: how a store that keeps times as Unix ms reads
// "none".
func UnixMilliOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// MilliOrZero is t in Unix ms, and 0 for the zero time; see
// [UnixMilliOrZero].
func MilliOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// ClaimVerdict is the [TickResult] of a claim judged status (a
// ClaimStatus's String) at now (Unix ms), with n the status's number: for
// "granted" the previous tick (Unix ms, 0 for none: Prev), for "early" the
// milliseconds to wait (Wait); a taken claim's Last is the caller's to
// set. ok is false for a status no claim has.
func ClaimVerdict(status string, now, n int64) (res TickResult, ok bool) {
	res.Now = time.UnixMilli(now)
	for s, t := range claimText {
		if t != "" && t == status {
			res.Status = ClaimStatus(s)
		}
	}
	switch res.Status {
	case ClaimGranted:
		res.Prev = UnixMilliOrZero(n)
	case ClaimEarly:
		res.Wait = time.Duration(n) * time.Millisecond
	}
	return res, res.Status != 0
}

// UntilMilli is a TickClaim.Until in Unix ms as a store takes it: 0 for
// none (the zero time), and at least 1 otherwise.
func UntilMilli(until time.Time) int64 {
	if until.IsZero() {
		return 0
	}
	return max(until.UnixMilli(), 1)
}

// TruncateRunError keeps a run's error text within MaxRunError bytes: a
// longer text is cut on a UTF-8 boundary (never inside a rune) and ends in
// "…". Every caller that records a run's error (RunEnd.Error,
// RunRecord.Error) passes it through this first.
func TruncateRunError(s string) string {
	if len(s) <= MaxRunError {
		return s
	}
	cut := MaxRunError - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
