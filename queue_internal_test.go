package leash

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestHeapKeepsOrderAndPositions pushes, moves, removes and pops entries at
// random and checks, after every step, that the heap pops in key order and
// that every entry knows where it is.
func TestHeapKeepsOrderAndPositions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q queue
	q.init()
	h := &q.byTime
	var in []*entry
	check := func(step int) {
		t.Helper()
		if h.len() != len(in) {
			t.Fatalf("step %d: len = %d, want %d", step, h.len(), len(in))
		}
		for i, n := range h.ns {
			if int(n.e.pos) != i {
				t.Fatalf("step %d: entry at %d has pos %d", step, i, n.e.pos)
			}
			if n.key != n.e.at {
				t.Fatalf("step %d: node at %d has key %d, its entry %d", step, i, n.key, n.e.at)
			}
			if i > 0 && h.ns[(i-1)/2].key > n.key {
				t.Fatalf("step %d: heap order broken at %d", step, i)
			}
		}
	}
	for step := range 5000 {
		switch op := rng.IntN(4); {
		case op == 0 || len(in) == 0:
			e := &entry{at: rng.Int64N(100), pos: -1, epos: -1}
			h.push(e)
			in = append(in, e)
		case op == 1:
			e := in[rng.IntN(len(in))]
			e.at = rng.Int64N(100)
			h.fix(e)
		case op == 2:
			i := rng.IntN(len(in))
			h.remove(in[i])
			if in[i].pos != -1 {
				t.Fatalf("step %d: removed entry has pos %d", step, in[i].pos)
			}
			in = slices.Delete(in, i, i+1)
		default:
			want := slices.MinFunc(in, func(a, b *entry) int { return int(a.at - b.at) }).at
			e := h.pop()
			if e.at != want {
				t.Fatalf("step %d: pop = %d, want %d", step, e.at, want)
			}
			in = slices.DeleteFunc(in, func(x *entry) bool { return x == e })
		}
		check(step)
	}
}
