package driver

import "time"

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
// claimer holds a lock or permit on the job's name (mine), or it is the
// job's latest claim (latest) and someone holds one (held: the run may be
// waiting for the lock).
func ReportedRun(rec RunRecord, mine, held, latest bool) RunRecord {
	if rec.Outcome == OutcomeRunning && !mine && !(latest && held) {
		rec.Outcome = OutcomeLost
	}
	return rec
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
