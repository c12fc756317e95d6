// Package history records what the processes of a reliability test did to a
// lock: every store round trip (acquire, renew, release) and every step a
// holder took (Lock, the moment it was told of a loss, fenced writes,
// Unlock), each with its invocation and completion time on one clock shared
// by all processes of the test (CLOCK_MONOTONIC), its result, token and
// validity deadline. Package check decides whether a history is safe.
//
// An operation whose outcome is unknown — a store error such as a timeout,
// or a process killed before the answer — is recorded as Ambiguous: the
// checkers treat it as possibly done.
package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Pending is the Return of an operation that never completed: it may take
// effect at any later time.
const Pending int64 = math.MaxInt64

// Now returns CLOCK_MONOTONIC in nanoseconds. Every process on the machine
// reads the same kernel clock, so the histories of a test's processes merge
// without drift (Go's own monotonic readings are per process).
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("history: clock_gettime(CLOCK_MONOTONIC): %v", err))
	}
	return ts.Nano()
}

// At converts a time.Time taken in this process (such as Hold.ValidUntil)
// to the shared clock.
func At(t time.Time) int64 { return Now() + int64(time.Until(t)) }

// Kind is what an operation was.
type Kind string

// Operation kinds. Store kinds are recorded by [Wrap] at the Store
// boundary, one per lock for a batched renewal; the others by the holder.
const (
	StoreAcquire Kind = "store.acquire"
	StoreRenew   Kind = "store.renew"
	StoreRelease Kind = "store.release"
	Lock         Kind = "lock"   // Mutex.Lock returned (OK: a hold)
	Unlock       Kind = "unlock" // Hold.Unlock
	Told         Kind = "told"   // the holder learnt the lock was lost (an instant)
	Write        Kind = "write"  // a write to the fenced resource
	Paused       Kind = "paused" // a process was stopped (SIGSTOP) from Call to Return
	Died         Kind = "died"   // a process was killed at Call
	// Stalled: the recording process did not run from Call to Return, as
	// its own monitor saw (see [Recorder.WatchStalls]).
	Stalled Kind = "stalled"
)

// Renewal and release statuses.
const (
	Renewed = "renewed"
	Gone    = "gone"
	Taken   = "taken"
	Freed   = "freed"
	// FreedCopies: a quorum store's release succeeded (see [Wrap]): every
	// member answered, none holds the lock for the owner any more, and a
	// majority released it. The checker reads it as a release that may come
	// from a non-holder, as it had to when a quorum store reported success
	// for any member's copy (Redlock before its release needed a
	// majority); a release that freed only a minority's copies — left on a
	// member that missed the owner's earlier release while the majority
	// granted the lock to another owner — now reports not held (NotHeld).
	FreedCopies = "freed-copies"
	NotHeld     = "not-held"
	// Failed: the server refused the command without running it (BUSY
	// while a script runs, LOADING, NOSCRIPT), or it was never sent (no
	// connection could be made): a definite no-op.
	Failed = "failed"
)

// Op is one operation.
type Op struct {
	ID     int64  `json:"id"`
	Proc   string `json:"proc"` // the process or client that ran it
	Kind   Kind   `json:"kind"`
	Lock   string `json:"lock,omitempty"`
	Owner  string `json:"owner,omitempty"` // store owner: one per tenure
	Lease  int64  `json:"lease,omitempty"` // ns
	Call   int64  `json:"call"`            // shared clock, ns
	Return int64  `json:"return"`          // Pending if it never completed

	OK         bool   `json:"ok,omitempty"`        // granted, renewed, released, accepted, no error
	Ambiguous  bool   `json:"ambiguous,omitempty"` // the outcome is unknown
	Status     string `json:"status,omitempty"`    // renewal and release status
	Fence      int64  `json:"fence,omitempty"`
	Depth      int    `json:"depth,omitempty"`       // lock: 1 for a new tenure, more for a re-entry
	ValidUntil int64  `json:"valid_until,omitempty"` // lock: the hold's validity deadline
	Reason     string `json:"reason,omitempty"`      // told: why
	Seq        int64  `json:"seq,omitempty"`         // write: the resource's order of accepted writes
	Err        string `json:"err,omitempty"`
}

// Recorder collects operations. It is safe for concurrent use. With a sink,
// each operation is also written as a JSON line when it starts and again
// when it completes, so that a process killed mid-operation leaves it
// recorded as pending.
type Recorder struct {
	proc string
	mu   sync.Mutex
	ops  []Op
	idx  map[int64]int
	next int64
	sink io.Writer
	err  error
}

// NewRecorder returns a Recorder whose operations carry proc. sink may be nil.
func NewRecorder(proc string, sink io.Writer) *Recorder {
	return &Recorder{proc: proc, idx: make(map[int64]int), sink: sink}
}

// Begin records the start of op (its Call is set now unless already set)
// and returns its id for End.
func (r *Recorder) Begin(op Op) int64 {
	if op.Call == 0 {
		op.Call = Now()
	}
	op.Return = Pending
	return r.add(op)
}

// End completes the operation id: fill sets its results, and its Return is
// set now.
func (r *Recorder) End(id int64, fill func(*Op)) {
	ret := Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	op := &r.ops[r.idx[id]]
	if fill != nil {
		fill(op)
	}
	op.Return = ret
	r.writeLocked(*op)
}

// Instant records an operation that takes no time, such as Told.
func (r *Recorder) Instant(op Op) {
	op.Call = Now()
	op.Return = op.Call
	r.add(op)
}

// WatchStalls records, until stop is closed, each stall of this process:
// a tick of every that came more than gap after the one before (nothing of
// the process, the monitor included, ran meanwhile: a starved machine, a
// long pause of the runtime) is a Stalled operation from the earlier tick
// to the late one. A checker can then tell a holder told late because its
// process did not run from a watchdog that was late in a running process.
func (r *Recorder) WatchStalls(stop <-chan struct{}, every, gap time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	last := Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := Now()
		if time.Duration(now-last) > gap {
			r.add(Op{Kind: Stalled, Call: last, Return: now, OK: true})
		}
		last = now
	}
}

func (r *Recorder) add(op Op) int64 {
	op.Proc = r.proc
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	op.ID = r.next
	r.idx[op.ID] = len(r.ops)
	r.ops = append(r.ops, op)
	r.writeLocked(op)
	return op.ID
}

func (r *Recorder) writeLocked(op Op) {
	if r.sink == nil || r.err != nil {
		return
	}
	b, err := json.Marshal(op)
	if err == nil {
		_, err = r.sink.Write(append(b, '\n')) // one write: a kill leaves whole lines
	}
	r.err = err
}

// Err returns the first error writing to the sink.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Ops returns a copy of the operations recorded so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Op, len(r.ops))
	copy(out, r.ops)
	for i := range out {
		if out[i].Return == Pending {
			out[i].Ambiguous = true
		}
	}
	return out
}

// Load reads the JSON lines a Recorder wrote to a file. The last line of an
// operation wins; an operation that never completed is Ambiguous, with
// Return Pending. A torn last line (the writer was killed) is ignored.
func Load(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type key struct {
		proc string
		id   int64
	}
	byID := map[key]int{}
	var ops []Op
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			continue
		}
		k := key{op.Proc, op.ID}
		if i, ok := byID[k]; ok {
			ops[i] = op
		} else {
			byID[k] = len(ops)
			ops = append(ops, op)
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("history: read %s: %w", path, err)
	}
	for i := range ops {
		if ops[i].Return == Pending {
			ops[i].Ambiguous = true
		}
	}
	return ops, nil
}

// Sort orders ops by Call, then Return.
func Sort(ops []Op) {
	sort.SliceStable(ops, func(i, j int) bool {
		if ops[i].Call != ops[j].Call {
			return ops[i].Call < ops[j].Call
		}
		return ops[i].Return < ops[j].Return
	})
}

// WriteFile writes ops as indented JSON, for a failing test to leave behind.
func WriteFile(path string, ops []Op) error {
	b, err := json.MarshalIndent(ops, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
