package check

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/leash-go/leash/reliability/history"
)

// referenceModel is the fenced-lease model as a plain power-set
// construction: every state step returns, nothing pruned.
var referenceModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{leaseState{}} },
	Step: func(st, in, out any) []any {
		var next []any
		for _, n := range step(st.(leaseState), in.(input), out.(output)) {
			next = append(next, n)
		}
		return next
	},
}).ToModel()

// TestReductionIsExact checks, on random histories, that the search Grants
// runs (reduce's operations, canonical's pruned state sets) reaches the
// verdict of the plain model over every store operation.
func TestReductionIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	verdicts := map[bool]int{}
	for i := range 5000 {
		ops := simulate(rng)
		store := storeOps(ops)
		want := porcupine.CheckOperations(referenceModel, operations(store))
		got := porcupine.CheckOperations(leaseModel, operations(reduce(store)))
		if got != want {
			t.Fatalf("history %d: linearizable %v after the reduction, %v without it:\n%s", i, got, want, describe(ops))
		}
		verdicts[want]++
	}
	// A comparison proves little unless both verdicts are common.
	if verdicts[true] < 500 || verdicts[false] < 500 {
		t.Fatalf("the generator made %d linearizable and %d other histories; want at least 500 of each", verdicts[true], verdicts[false])
	}
}

// TestReduceMergesPersistentReleases: the background releases that follow an
// unanswered acquire (many, ambiguous or answered "not held") shrink to
// what can change the verdict.
func TestReduceMergesPersistentReleases(t *testing.T) {
	ops := []history.Op{
		acq("A", 0, 1, 10),
		ambiguous(acq("X", 5, 6, 0)),
		{Kind: history.StoreAcquire, Lock: "L", Owner: "Y", Lease: 100 * ms, Call: 7 * ms, Return: 8 * ms}, // busy
		ambiguous(release("Y", 9, 10, "")), // Y was never granted: a no-op
	}
	for c := int64(10); c < 100; c += 10 {
		ops = append(ops, ambiguous(release("X", c, c+1, "")))
	}
	ops = append(ops, release("X", 120, 121, history.NotHeld), release("A", 150, 151, history.Freed))
	got := reduce(storeOps(ops))
	var kinds []string
	for _, c := range got {
		kinds = append(kinds, string(c.op.Kind)+" "+c.op.Owner)
	}
	want := []string{"store.acquire A", "store.acquire X", "store.release X", "store.release X", "store.release A"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("reduced to %q, want %q", kinds, want)
	}
	if end := got[2].end; end != 90*ms+AmbiguousHorizon*100*ms {
		t.Errorf("the merged release's window ends at %dms, want the last one's end, %dms", end/ms, 90+AmbiguousHorizon*100)
	}
	if r := Grants(ops, 0); r.Verdict != porcupine.Ok || r.Searched != len(want) || r.Ambiguous != 11 {
		t.Errorf("Grants: %s, %d searched, %d ambiguous; want Ok, %d, 11", r.Verdict, r.Searched, r.Ambiguous, len(want))
	}
}

// simulate runs three or four owners against a simulated lock server and
// returns the store operations they saw: each tries to acquire until granted
// (or gives up), renews, and releases; an answer may be lost (ambiguous),
// in which case its effect may or may not happen, as late as the
// AmbiguousHorizon allows, and an unanswered acquire is followed by
// releases in the background, as the client makes them. Two thirds of the
// histories then get one or two answers changed, which often makes them
// impossible.
func simulate(rng *rand.Rand) []history.Op {
	const lease = 100 * ms
	type event struct {
		at  int64 // when the operation takes effect on the server
		idx int   // in ops
		do  bool  // it takes effect
	}
	var ops []history.Op
	var events []event
	add := func(kind history.Kind, owner string, call int64) (int64, *history.Op) {
		d := (1 + rng.Int64N(15)) * ms
		ops = append(ops, history.Op{Kind: kind, Lock: "L", Owner: owner, Proc: owner, Lease: lease, Call: call, Return: call + d})
		i := len(ops) - 1
		at := call + rng.Int64N(d+1)
		amb := rng.IntN(6) == 0
		do := true
		if amb {
			ops[i].Ambiguous = true
			do = rng.IntN(2) == 0
			at = call + rng.Int64N(2*lease) // may land after its client gave up
		}
		events = append(events, event{at: at, idx: i, do: do})
		return call + d, &ops[i]
	}
	owners := 3 + rng.IntN(2)
	for o := range owners {
		owner := string(rune('A' + o))
		t := rng.Int64N(3*lease) + int64(o)
		granted := false
		for try := 0; try < 1+rng.IntN(3) && !granted; try++ {
			var op *history.Op
			t, op = add(history.StoreAcquire, owner, t)
			t += rng.Int64N(lease / 2)
			if op.Ambiguous {
				// The client gives the unanswered acquire back in the
				// background, several times.
				for range 1 + rng.IntN(5) {
					t, _ = add(history.StoreRelease, owner, t)
					t += rng.Int64N(lease / 4)
					if rng.IntN(4) == 0 {
						t += AmbiguousHorizon * lease // a pause: windows that do not touch
					}
				}
				break
			}
			granted = true // decided by the server below; renewals of a refused acquire are harmless
		}
		if granted {
			for range rng.IntN(3) {
				t, _ = add(history.StoreRenew, owner, t+rng.Int64N(lease/2))
			}
			add(history.StoreRelease, owner, t+rng.Int64N(lease/2))
		}
	}
	// The server: apply the effects in time order and fill in the answers.
	slices.SortFunc(events, func(a, b event) int { return int(a.at - b.at) })
	var holder string
	var expiry, fence, counter int64
	for _, e := range events {
		op := &ops[e.idx]
		held := holder != "" && e.at < expiry
		var ok bool
		var status string
		var f int64
		switch op.Kind {
		case history.StoreAcquire:
			switch {
			case held && holder == op.Owner:
				ok, f = true, fence
				if e.do {
					expiry = e.at + lease
				}
			case !held:
				counter++
				ok, f = true, counter
				if e.do {
					holder, fence, expiry = op.Owner, counter, e.at+lease
				}
			}
		case history.StoreRenew:
			switch {
			case held && holder == op.Owner:
				ok, status = true, history.Renewed
				if e.do {
					expiry = e.at + lease
				}
			case held:
				status = history.Taken
			default:
				status = history.Gone
			}
		case history.StoreRelease:
			if held && holder == op.Owner {
				ok, status = true, history.Freed
				if e.do {
					holder = ""
				}
			} else {
				status = history.NotHeld
			}
		}
		if op.Ambiguous {
			continue
		}
		op.OK, op.Status, op.Fence = ok, status, f
	}
	for range rng.IntN(3) {
		op := &ops[rng.IntN(len(ops))]
		switch rng.IntN(4) {
		case 0:
			op.OK, op.Ambiguous, op.Status = !op.OK, false, map[bool]string{true: history.Freed, false: history.NotHeld}[!op.OK]
			if op.Kind != history.StoreRelease {
				op.Status = map[bool]string{true: history.Renewed, false: history.Gone}[op.OK]
			}
			if op.Kind == history.StoreAcquire {
				op.Status, op.Fence = "", 1+rng.Int64N(4)
			}
		case 1:
			op.Fence = max(0, op.Fence-1)
		case 2:
			op.Status = history.Failed
		case 3:
			op.Ambiguous, op.OK, op.Status = true, false, ""
		}
	}
	history.Sort(ops)
	return ops
}

// describe lists ops, one per line, for a failure message.
func describe(ops []history.Op) string {
	var b []byte
	for _, op := range ops {
		b = append(b, leaseModel.DescribeOperation(input{kind: op.Kind, owner: op.Owner}, output{ok: op.OK, ambiguous: op.Ambiguous, status: op.Status, fence: op.Fence})...)
		b = append(b, " ["...)
		b = append(b, []byte(formatMS(op.Call)+", "+formatMS(op.Return))...)
		b = append(b, "]\n"...)
	}
	return string(b)
}

func formatMS(ns int64) string {
	return time.Duration(ns).String()
}
