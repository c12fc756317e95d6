// Package check decides whether a recorded history (package history) is
// safe. It has four checkers and one metric:
//
//   - Grants: grant safety. A linearizability check (porcupine) of the
//     store-level history against a fenced-lease model: a fresh grant is
//     legal only when the lock is free or its holder's lease may have run
//     out, and its token exceeds every earlier one; a renewal succeeds only
//     for the holder; an ambiguous operation (a timeout) may or may not have
//     taken effect; a release succeeds only for the holder, except a
//     quorum store's (history.FreedCopies), which may release a copy left
//     on a minority of its members. It also counts definite double grants.
//   - StaleWrites: a fenced resource never accepts a write from a tenure
//     after it accepted one from a newer tenure.
//   - Notifications: no holder believes it holds past the earliest moment
//     the server could hand the lock to someone else; the lead time by
//     which it was told is the metric.
//   - Overlap: how long two holders of one lock believed they held it at
//     once. Zero without process pauses; with them it is reported, because
//     no lease lock can prevent it (only fencing makes it harmless).
//   - Ticks: scheduled jobs. No tick of a job ran more than once, none
//     expected (a tick that came while an instance was up) went unclaimed,
//     and none started earlier than a tolerance before its instant.
package check

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/leash-go/leash/reliability/history"
)

// Clock-rate allowance between the server's expiry clock and the test's
// clock, as in Redlock: 1% of the lease plus 2ms.
const (
	driftFactor = 0.01
	driftConst  = 2 * time.Millisecond
)

// earliestExpiry is the first moment a lease that started no earlier than
// start could have run out.
func earliestExpiry(start, lease int64) int64 {
	return start + lease - int64(driftFactor*float64(lease)) - int64(driftConst)
}

// AmbiguousHorizon bounds, in leases after its call, when an operation
// whose outcome is unknown may still take effect on the server. It is an
// assumption about the fault model (no request delayed in flight for longer
// than this), which keeps the search small.
const AmbiguousHorizon = 4

// leaseState is the model's state of one lock.
type leaseState struct {
	holder   string // owner, "" when free
	fence    int64  // the holder's token, 0 when unknown (an ambiguous grant)
	start    int64  // lower bound on when the holder's current lease began
	lease    int64
	maxFence int64 // highest token granted so far
}

func (s leaseState) mayHaveExpired(at int64) bool {
	return s.holder == "" || at >= earliestExpiry(s.start, s.lease)
}

func (s leaseState) free() leaseState { return leaseState{maxFence: s.maxFence} }

type input struct {
	kind      history.Kind
	owner     string
	lease     int64
	call, ret int64
}

type output struct {
	ok, ambiguous bool
	status        string
	fence         int64
}

// step is the fenced-lease model. It returns every state the lock may be in
// after the operation, or none if the operation's result is impossible.
func step(s leaseState, in input, out output) []leaseState {
	if out.status == history.Failed {
		return []leaseState{s} // refused by the server without running
	}
	switch in.kind {
	case history.StoreAcquire:
		switch {
		case out.ambiguous:
			// Not applied, or applied: the owner holds from some time after
			// both its call and the moment the old lease could have ended.
			if s.holder == in.owner {
				return []leaseState{s}
			}
			start := in.call
			if s.holder != "" {
				start = max(start, earliestExpiry(s.start, s.lease))
			}
			return []leaseState{s, {holder: in.owner, start: start, lease: in.lease, maxFence: s.maxFence}}
		case !out.ok:
			return []leaseState{s} // busy: not checked (a lease may end at any time after its earliest expiry)
		case s.holder == in.owner && s.fence != 0 && out.fence == s.fence:
			// The owner's own grant again (a transport retry reaching the
			// server twice): the same tenure and token, its lease refreshed.
			s.start = max(s.start, in.call)
			return []leaseState{s}
		default:
			if !(s.holder == in.owner || s.mayHaveExpired(in.ret)) || out.fence <= s.maxFence {
				return nil
			}
			return []leaseState{{holder: in.owner, fence: out.fence, start: in.call, lease: in.lease, maxFence: out.fence}}
		}
	case history.StoreRenew:
		switch {
		case out.ambiguous:
			return []leaseState{s} // an applied renewal only delays expiry: never more permissive
		case out.ok:
			if s.holder != in.owner {
				return nil
			}
			s.start, s.lease = max(s.start, in.call), in.lease
			return []leaseState{s}
		case out.status == history.Taken:
			if s.holder == in.owner {
				// Only a server that lost writes answers so: restarted from a
				// snapshot, it brought back an older lock of another owner
				// (who released it since). That is no double grant: the
				// server refuses fresh grants while it stands, and the
				// holder is told now. A real takeover was judged at its
				// grant.
				return []leaseState{s.free()}
			}
			return []leaseState{s}
		default: // gone
			switch {
			case s.holder == in.owner:
				return []leaseState{s.free()} // the holder is told now
			case s.holder != "" && (s.fence == 0 || s.mayHaveExpired(in.ret)):
				return []leaseState{s, s.free()}
			}
			return []leaseState{s}
		}
	case history.StoreRelease:
		switch {
		case out.ambiguous:
			if s.holder == in.owner {
				return []leaseState{s, s.free()}
			}
			return []leaseState{s}
		case out.ok:
			switch {
			case s.holder == in.owner && (out.status == history.Freed || out.status == history.FreedCopies):
				return []leaseState{s.free()}
			case s.holder == in.owner:
				return []leaseState{s}
			case out.status == history.FreedCopies:
				// A quorum store released copies of a lock the owner does
				// not hold: one left on a minority of members, which
				// missed the owner's earlier release while the majority
				// granted the lock to the holder. The holder's copies are
				// another owner's, which the release leaves alone.
				return []leaseState{s}
			}
			// A single server found the owner's lock while another
			// owner's grant stood: two holders.
			return nil
		default: // not held: the holder knows from now on
			if s.holder == in.owner {
				return []leaseState{s.free()}
			}
			return []leaseState{s}
		}
	}
	return []leaseState{s}
}

// leaseStates is the model's state for porcupine: every state the lock may
// be in, in a canonical order (see canonical), so that two sets are equal
// when their slices are.
type leaseStates []leaseState

// canonical sorts ss and keeps, of the states that differ only in when
// their lease began, the one whose lease began first: it allows everything
// the others allow (a lease that began earlier may have run out earlier;
// step uses start only through earliestExpiry, a renewal's max and an
// ambiguous grant's max, all monotone in it), so the others cannot change
// the verdict. Without it, ambiguous grants and their orders multiply
// states that differ only in start, and the set grows with the history.
func canonical(ss leaseStates) leaseStates {
	slices.SortFunc(ss, func(a, b leaseState) int {
		return cmp.Or(strings.Compare(a.holder, b.holder), cmp.Compare(a.fence, b.fence),
			cmp.Compare(a.maxFence, b.maxFence), cmp.Compare(a.lease, b.lease), cmp.Compare(a.start, b.start))
	})
	return slices.CompactFunc(ss, func(a, b leaseState) bool {
		return a.holder == b.holder && a.fence == b.fence && a.maxFence == b.maxFence && a.lease == b.lease
	})
}

// leaseModel is porcupine's model of one lock: a set of leaseStates, which
// an operation maps through step (the power-set construction of a
// nondeterministic model, with canonical's pruning).
var leaseModel = porcupine.Model{
	Init: func() any { return leaseStates{{}} },
	Step: func(st, in, out any) (bool, any) {
		var next leaseStates
		for _, s := range st.(leaseStates) {
			next = append(next, step(s, in.(input), out.(output))...)
		}
		return len(next) > 0, canonical(next)
	},
	Equal: func(a, b any) bool { return slices.Equal(a.(leaseStates), b.(leaseStates)) },
	Hash: func(st any) uint64 {
		h := fnv.New64a()
		for _, s := range st.(leaseStates) {
			h.Write([]byte(s.holder))
			for _, v := range [...]int64{s.fence, s.start, s.lease, s.maxFence} {
				h.Write(binary.LittleEndian.AppendUint64(nil, uint64(v)))
			}
		}
		return h.Sum64()
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		res := fmt.Sprintf("ok=%v", o.ok)
		switch {
		case o.ambiguous:
			res = "ambiguous"
		case o.status != "":
			res = o.status
		}
		return fmt.Sprintf("%s %s → %s fence=%d", i.kind, short(i.owner), res, o.fence)
	},
	DescribeState: func(st any) string {
		var ds []string
		for _, s := range st.(leaseStates) {
			if s.holder == "" {
				ds = append(ds, fmt.Sprintf("free (max fence %d)", s.maxFence))
			} else {
				ds = append(ds, fmt.Sprintf("%s fence=%d (max %d)", short(s.holder), s.fence, s.maxFence))
			}
		}
		return strings.Join(ds, " | ")
	},
}

func short(owner string) string {
	if len(owner) > 12 {
		return owner[len(owner)-12:]
	}
	return owner
}

// GrantResult is the outcome of Grants.
type GrantResult struct {
	// Verdict is porcupine's: Ok, Illegal, or Unknown (the check timed out,
	// which a test must treat as a failure).
	Verdict porcupine.CheckResult
	// Grants counts fresh grants (store acquires that started a tenure).
	Grants int
	// Ambiguous counts store operations whose outcome is unknown.
	Ambiguous int
	// Searched counts the operations porcupine searched: the store
	// operations less those that reduce showed cannot change the verdict.
	Searched int
	// DoubleGrants lists grants made while another tenure's lease definitely
	// still ran on the server: certain violations, found without porcupine.
	DoubleGrants []DoubleGrant

	model porcupine.Model
	info  porcupine.LinearizationInfo
}

// DoubleGrant is a grant to Second while First definitely held the lock.
type DoubleGrant struct {
	Lock          string
	First, Second string // owners
	At            int64  // Second's grant returned
}

// OK reports whether the history is safe.
func (r GrantResult) OK() bool { return r.Verdict == porcupine.Ok && len(r.DoubleGrants) == 0 }

// Visualize writes porcupine's HTML view of the check to path.
func (r GrantResult) Visualize(path string) error {
	return porcupine.VisualizePath(r.model, r.info, path)
}

// GrantCount is the number of definite grants in ops (GrantResult.Grants):
// store acquires that returned granted, their outcome known. It costs no
// search, so a scenario can tell from it whether a run is worth checking.
func GrantCount(ops []history.Op) int {
	n := 0
	for _, op := range ops {
		if op.Kind == history.StoreAcquire && op.OK && !op.Ambiguous {
			n++
		}
	}
	return n
}

// Grants checks the store-level operations of ops for grant safety. timeout
// bounds porcupine's search.
func Grants(ops []history.Op, timeout time.Duration) GrantResult {
	res := GrantResult{Grants: GrantCount(ops)}
	store := storeOps(ops)
	for _, c := range store {
		if c.op.Ambiguous {
			res.Ambiguous++
		}
	}
	pops := operations(reduce(store))
	res.Searched = len(pops)
	m := leaseModel
	m.Partition = func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var names []string
		for _, o := range h {
			n := o.Metadata.(string)
			if _, ok := by[n]; !ok {
				names = append(names, n)
			}
			by[n] = append(by[n], o)
		}
		sort.Strings(names)
		out := make([][]porcupine.Operation, len(names))
		for i, n := range names {
			out[i] = by[n]
		}
		return out
	}
	res.model = m
	res.Verdict, res.info = porcupine.CheckOperationsVerbose(res.model, pops, timeout)
	res.DoubleGrants = definiteDoubleGrants(ops)
	return res
}

// definiteDoubleGrants finds grants made inside another tenure's definite
// lease: from its grant's return until the earliest of its first release or
// loss observation and the earliest expiry of its last successful renewal.
func definiteDoubleGrants(ops []history.Op) []DoubleGrant {
	type tenure struct {
		lock        string
		grant       history.Op
		expiry, end int64
	}
	ts := map[string]*tenure{}
	var order []*tenure
	for _, op := range ops {
		if op.Kind == history.StoreAcquire && op.OK && !op.Ambiguous {
			if _, ok := ts[op.Owner]; !ok {
				t := &tenure{lock: op.Lock, grant: op, expiry: earliestExpiry(op.Call, op.Lease), end: history.Pending}
				ts[op.Owner] = t
				order = append(order, t)
			}
		}
	}
	for _, op := range ops {
		t := ts[op.Owner]
		if t == nil || op.Call < t.grant.Return {
			continue
		}
		switch {
		case op.Kind == history.StoreRenew && op.OK:
			t.expiry = max(t.expiry, earliestExpiry(op.Call, op.Lease))
		case op.Kind == history.StoreRelease, op.Kind == history.StoreRenew && !op.Ambiguous:
			t.end = min(t.end, op.Call) // released, or the server said gone/taken
		}
	}
	var out []DoubleGrant
	for _, a := range order {
		end := min(a.end, a.expiry)
		for _, b := range order {
			if b != a && b.lock == a.lock && b.grant.Call >= a.grant.Return && b.grant.Return <= end {
				out = append(out, DoubleGrant{Lock: a.lock, First: a.grant.Owner, Second: b.grant.Owner, At: b.grant.Return})
			}
		}
	}
	return out
}

// storeOps returns the store operations of ops, each with the end of its
// window.
func storeOps(ops []history.Op) []checked {
	var store []checked
	for _, op := range ops {
		switch op.Kind {
		case history.StoreAcquire, history.StoreRenew, history.StoreRelease:
		default:
			continue
		}
		end := op.Return
		if op.Ambiguous {
			// It may take effect after its client gave up: a request can wait
			// in a paused server's socket or a slow link. The faults of the
			// suite delay none by more than AmbiguousHorizon leases.
			end = min(op.Return, op.Call) + AmbiguousHorizon*op.Lease
		}
		store = append(store, checked{op: op, end: end})
	}
	return store
}

// operations converts cs to porcupine's operations, one client per process.
func operations(cs []checked) []porcupine.Operation {
	procs := map[string]int{}
	pops := make([]porcupine.Operation, 0, len(cs))
	for _, c := range cs {
		op := c.op
		id, ok := procs[op.Proc]
		if !ok {
			id = len(procs)
			procs[op.Proc] = id
		}
		pops = append(pops, porcupine.Operation{
			ClientId: id,
			Input:    input{kind: op.Kind, owner: op.Owner, lease: op.Lease, call: op.Call, ret: op.Return},
			Call:     op.Call,
			Output:   output{ok: op.OK, ambiguous: op.Ambiguous, status: op.Status, fence: op.Fence},
			Return:   c.end,
			Metadata: op.Lock,
		})
	}
	return pops
}

// checked is a store operation as porcupine sees it: end is its Return, or
// for an operation whose outcome is unknown, the last moment it may take
// effect.
type checked struct {
	op  history.Op
	end int64
}

// reduce returns ops without the operations that cannot change the model's
// verdict, and with runs of equivalent ones merged. Porcupine's search grows
// with the number of operations that overlap in time, and a client cut off
// from its server piles them up: every background release of a lock whose
// acquire went unanswered is retried ten times a lease, and each retry is
// ambiguous or answered "not held", and may take effect AmbiguousHorizon
// leases later. Each rule is exact, so the verdict is the one of the whole
// history:
//
//   - An operation the server refused without running it (Failed), an
//     acquire definitely refused as busy, and an ambiguous renewal leave the
//     model's state as it is whatever it is (see step): no linearization
//     needs them, and any linearization of the rest takes them anywhere.
//   - A release that is ambiguous or answered "not held" changes the state
//     only when its owner holds the lock, and only an acquire of that owner
//     that was granted or is ambiguous can make it the holder: without one,
//     it is a no-op too.
//   - When one acquire at most can make the owner the holder, its tenure
//     holds at most once, from that acquire's effect until the first release
//     or loss that ends it; ambiguous releases of that owner serve only to
//     let it end at some moment inside one of their windows. A run of them
//     whose windows overlap or touch, one after another, offers exactly the
//     moments of the union of their windows, which is one window: one
//     ambiguous release over it is the same choice.
func reduce(ops []checked) []checked {
	type tenure struct{ lock, owner string }
	grants := map[tenure]int{} // acquires that may have granted
	for _, c := range ops {
		if c.op.Kind == history.StoreAcquire && (c.op.OK || c.op.Ambiguous) {
			grants[tenure{c.op.Lock, c.op.Owner}]++
		}
	}
	out := make([]checked, 0, len(ops))
	merging := map[tenure]int{} // the index in out of the tenure's ambiguous release being extended
	for _, c := range ops {
		op := c.op
		tn := tenure{op.Lock, op.Owner}
		switch {
		case op.Status == history.Failed,
			op.Kind == history.StoreAcquire && !op.OK && !op.Ambiguous,
			op.Kind == history.StoreRenew && op.Ambiguous,
			op.Kind == history.StoreRelease && (op.Ambiguous || op.Status == history.NotHeld) && grants[tn] == 0:
			continue
		case op.Kind == history.StoreRelease && op.Ambiguous && grants[tn] == 1:
			if i, ok := merging[tn]; ok && op.Call <= out[i].end {
				out[i].end = max(out[i].end, c.end)
				continue
			}
			merging[tn] = len(out)
		}
		out = append(out, c)
	}
	return out
}
