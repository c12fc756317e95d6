package check

import (
	"cmp"
	"slices"
	"time"

	"github.com/leash-go/leash/reliability/history"
)

// A tenure, as its holder saw it.
type tenure struct {
	owner, proc, lock string
	lock1             history.Op // the Lock that started it
	fence             int64
	told              int64 // first Told, or Pending
	reason            string
	unlock            int64 // Call of the last Unlock, or Pending
	died              int64 // the holder process was killed, or Pending
}

// beliefEnd is when the holder stopped believing it held the lock, or
// Pending if it never did (a process killed while holding is gone: it
// believes nothing).
func (t *tenure) beliefEnd() int64 { return min(t.told, t.unlock, t.died) }

// tenures collects the tenures of ops by owner, in grant order.
func tenures(ops []history.Op) []*tenure {
	by := map[string]*tenure{}
	var out []*tenure
	died := map[string]int64{}
	for _, op := range ops {
		if op.Kind == history.Died {
			died[op.Proc] = min(op.Call, orPending(died, op.Proc))
		}
	}
	for _, op := range ops {
		if op.Kind == history.Lock && op.OK && by[op.Owner] == nil {
			t := &tenure{owner: op.Owner, proc: op.Proc, lock: op.Lock, lock1: op, fence: op.Fence,
				told: history.Pending, unlock: history.Pending, died: orPending(died, op.Proc)}
			by[op.Owner] = t
			out = append(out, t)
		}
	}
	for _, op := range ops {
		t := by[op.Owner]
		if t == nil {
			continue
		}
		switch op.Kind {
		case history.Told:
			if op.Call < t.told {
				t.told, t.reason = op.Call, op.Reason
			}
		case history.Unlock:
			if t.unlock == history.Pending || op.Call > t.unlock {
				t.unlock = op.Call
			}
		}
	}
	slices.SortFunc(out, func(a, b *tenure) int { return cmp.Compare(a.lock1.Call, b.lock1.Call) })
	return out
}

func orPending(m map[string]int64, k string) int64 {
	if v, ok := m[k]; ok {
		return v
	}
	return history.Pending
}

// newer reports whether b was certainly granted after a.
func newer(b, a *tenure) bool { return b.lock1.Call > a.lock1.Return }

// StaleResult is the outcome of StaleWrites.
type StaleResult struct {
	Writes   int // write attempts
	Accepted int
	// Superseded counts attempts made after a newer tenure of the lock had
	// been granted: writes a pause or a careless client made too late.
	Superseded int
	// StaleAccepted lists accepted writes from a tenure after the resource
	// had accepted one from a newer tenure. It must be empty.
	StaleAccepted []history.Op
	// TokenRegressions lists grants whose token is not above that of a
	// tenure granted before them. It must be empty.
	TokenRegressions []history.Op
}

// StaleWrites checks the fenced resource's view of ops: accepted writes, in
// the resource's order, never go back from a newer tenure to an older one.
func StaleWrites(ops []history.Op) StaleResult {
	var res StaleResult
	ts := tenures(ops)
	by := map[string]*tenure{}
	for _, t := range ts {
		by[t.owner] = t
	}
	for i, b := range ts {
		for _, a := range ts[:i] {
			if a.lock == b.lock && newer(b, a) && b.fence <= a.fence {
				res.TokenRegressions = append(res.TokenRegressions, b.lock1)
				break
			}
		}
	}
	var accepted []history.Op
	for _, op := range ops {
		if op.Kind != history.Write {
			continue
		}
		res.Writes++
		w := by[op.Owner]
		if w != nil {
			for _, b := range ts {
				if b.lock == w.lock && newer(b, w) && b.lock1.Return < op.Call {
					res.Superseded++
					break
				}
			}
		}
		if op.OK {
			res.Accepted++
			accepted = append(accepted, op)
		}
	}
	slices.SortFunc(accepted, func(a, b history.Op) int { return cmp.Compare(a.Seq, b.Seq) })
	newest := map[string]*tenure{} // per lock: the newest tenure that has written
	for _, op := range accepted {
		w := by[op.Owner]
		if w == nil {
			continue
		}
		if n := newest[w.lock]; n != nil && newer(n, w) {
			res.StaleAccepted = append(res.StaleAccepted, op)
			continue
		}
		if n := newest[w.lock]; n == nil || newer(w, n) {
			newest[w.lock] = w
		}
	}
	return res
}

// Late is a holder that believed it held the lock past the earliest moment
// the server could have given it to someone else.
type Late struct {
	Lock, Owner, Proc string
	// At is that moment, on the history's clock.
	At int64
	// By is how long past that moment it stopped believing.
	By time.Duration
	// Reason is why it stopped: a loss reason, "unlock", or "".
	Reason string
}

// Lead is how long before the server could free its lock a holder was told.
type Lead struct {
	Proc string
	D    time.Duration
}

// NotifyResult is the outcome of Notifications.
type NotifyResult struct {
	// Leads are, for each holder told of a loss by its validity deadline
	// (reasons expired and store unreachable), how long before the server
	// could free the lock it was told.
	Leads []Lead
	// Late lists holders that believed too long. Each must be explained
	// (a paused process) or it is a violation.
	Late []Late
	// LostAtReturn lists holds whose Lock returned after the hold's own
	// validity deadline (an acquire round trip longer than the lease, as
	// when the server is paused and the store's client has no read
	// timeout): the hold was lost from its first moment (its Err and Lost
	// say so), so its holder never believed it held. Each is listed with
	// how long past the earliest server expiry its Lock returned. A hold
	// returned with any validity left is judged as every other.
	LostAtReturn []Late
}

// Notifications checks that every holder stopped believing it held the
// lock — by being told, or by unlocking — no later than the earliest
// expiry of its lease on the server: the last successful acquire or
// renewal's call plus the lease, less the drift allowance.
func Notifications(ops []history.Op) NotifyResult {
	var res NotifyResult
	expiry := map[string][]history.Op{}
	for _, op := range ops {
		if (op.Kind == history.StoreAcquire || op.Kind == history.StoreRenew) && op.OK && !op.Ambiguous {
			expiry[op.Owner] = append(expiry[op.Owner], op)
		}
	}
	for _, t := range tenures(ops) {
		end := t.beliefEnd()
		if end == history.Pending {
			continue
		}
		e := int64(-1)
		for _, op := range expiry[t.owner] {
			if op.Call < end {
				e = max(e, earliestExpiry(op.Call, op.Lease))
			}
		}
		if e < 0 {
			continue
		}
		if vu := t.lock1.ValidUntil; vu != 0 && vu <= t.lock1.Return {
			res.LostAtReturn = append(res.LostAtReturn, Late{Lock: t.lock, Owner: t.owner, Proc: t.proc, At: e, By: time.Duration(t.lock1.Return - e), Reason: t.reason})
			continue
		}
		reason := t.reason
		if t.told == history.Pending || t.unlock < t.told {
			reason = "unlock"
		}
		if t.told == end && (t.reason == "expired" || t.reason == "store unreachable") {
			res.Leads = append(res.Leads, Lead{t.proc, time.Duration(e - end)})
		}
		if end > e {
			res.Late = append(res.Late, Late{Lock: t.lock, Owner: t.owner, Proc: t.proc, At: e, By: time.Duration(end - e), Reason: reason})
		}
	}
	return res
}

// OverlapResult is the outcome of Overlap.
type OverlapResult struct {
	// Pairs counts pairs of tenures of one lock whose holders believed they
	// held it at the same time; Total sums those times, Max is the longest.
	Pairs      int
	Total, Max time.Duration
}

// Overlap measures believed-holder overlap: each holder believes from its
// Lock's return until it is told, unlocks, or dies.
func Overlap(ops []history.Op) OverlapResult {
	var res OverlapResult
	ts := tenures(ops)
	for i, a := range ts {
		for _, b := range ts[i+1:] {
			if a.lock != b.lock {
				continue
			}
			from := max(a.lock1.Return, b.lock1.Return)
			to := min(a.beliefEnd(), b.beliefEnd())
			if to == history.Pending || to <= from {
				continue
			}
			d := time.Duration(to - from)
			res.Pairs++
			res.Total += d
			res.Max = max(res.Max, d)
		}
	}
	return res
}
