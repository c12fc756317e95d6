package check

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/leash-go/leash/reliability/history"
)

const ms = int64(time.Millisecond)

// h builds store operations: times in milliseconds, lease 100ms.
func acq(owner string, call, ret int64, fence int64) history.Op {
	return history.Op{Kind: history.StoreAcquire, Lock: "L", Owner: owner, Lease: 100 * ms,
		Call: call * ms, Return: ret * ms, OK: true, Fence: fence}
}

func renew(owner string, call, ret int64, status string) history.Op {
	return history.Op{Kind: history.StoreRenew, Lock: "L", Owner: owner, Lease: 100 * ms,
		Call: call * ms, Return: ret * ms, OK: status == history.Renewed, Status: status}
}

func release(owner string, call, ret int64, status string) history.Op {
	return history.Op{Kind: history.StoreRelease, Lock: "L", Owner: owner, Lease: 100 * ms,
		Call: call * ms, Return: ret * ms, OK: status == history.Freed || status == history.FreedCopies, Status: status}
}

func ambiguous(op history.Op) history.Op {
	op.OK, op.Ambiguous, op.Status, op.Fence = false, true, "", 0
	return op
}

func TestGrantsModel(t *testing.T) {
	for name, tc := range map[string]struct {
		ops    []history.Op
		ok     bool
		double int
	}{
		"acquire, renew, release, next": {[]history.Op{
			acq("A", 0, 1, 10), renew("A", 30, 31, history.Renewed), release("A", 50, 51, history.Freed), acq("B", 52, 53, 11),
		}, true, 0},
		"grant inside the lease is a double grant": {[]history.Op{
			acq("A", 0, 1, 10), acq("B", 20, 21, 11),
		}, false, 1},
		"grant inside a renewed lease is a double grant": {[]history.Op{
			acq("A", 0, 1, 10), renew("A", 80, 81, history.Renewed), acq("B", 120, 121, 11), renew("A", 150, 151, history.Taken),
		}, false, 1},
		"takeover after the lease, then the old holder finds it taken": {[]history.Op{
			acq("A", 0, 1, 10), acq("B", 150, 151, 11), renew("A", 160, 161, history.Taken), release("A", 170, 171, history.NotHeld),
		}, true, 0},
		"token regression": {[]history.Op{
			acq("A", 0, 1, 10), release("A", 5, 6, history.Freed), acq("B", 10, 11, 9),
		}, false, 0},
		"renewal succeeds for a tenure that does not hold": {[]history.Op{
			acq("A", 0, 1, 10), acq("B", 150, 151, 11), renew("A", 160, 161, history.Renewed),
		}, false, 1}, // A held without a break until 160: B's grant overlapped it
		"ambiguous acquire may not have happened": {[]history.Op{
			ambiguous(acq("X", 0, 1, 0)), acq("B", 5, 6, 11), release("B", 10, 11, history.Freed),
		}, true, 0},
		"ambiguous acquire explains a taken renewal and a later cleanup": {[]history.Op{
			acq("A", 0, 1, 10), ambiguous(acq("X", 150, 151, 0)), renew("A", 160, 161, history.Taken), release("X", 170, 171, history.Freed),
		}, true, 0},
		"ambiguous release may have freed": {[]history.Op{
			acq("A", 0, 1, 10), ambiguous(release("A", 10, 11, "")), acq("B", 20, 21, 11),
		}, true, 0},
		"a restored snapshot brings back a released lock: the holder finds it taken": {[]history.Op{
			acq("A", 0, 1, 10), release("A", 10, 11, history.Freed), acq("B", 20, 21, 11), renew("B", 40, 41, history.Taken),
		}, true, 0},
		"released lock renewed": {[]history.Op{
			acq("A", 0, 1, 10), release("A", 10, 11, history.Freed), renew("A", 20, 21, history.Renewed),
		}, false, 0},
		// TestRedlockMinorityFaults, seed 1795527975035384009 (a 1s lease
		// there): A's release timed out on the master A's link to was
		// black-holed, after releasing on the other two; B took those two;
		// A's background release then reached the third and released the
		// copy left there. redlock's release succeeds when any member
		// released a copy, so B's grant stands.
		"a quorum store releases a copy a minority kept past the next grant": {[]history.Op{
			acq("A", 0, 1, 10), renew("A", 65, 66, history.Renewed), ambiguous(release("A", 73, 98, "")),
			acq("B", 74, 75, 11), release("A", 99, 100, history.FreedCopies), release("B", 120, 121, history.FreedCopies),
		}, true, 0},
		// The same on a single server: A's lock was still there at 99, so
		// B's grant at 74 made two holders.
		"a single server releases a lock past the next grant": {[]history.Op{
			acq("A", 0, 1, 10), renew("A", 65, 66, history.Renewed), ambiguous(release("A", 73, 98, "")),
			acq("B", 74, 75, 11), release("A", 99, 100, history.Freed),
		}, false, 0},
		"a quorum store's release does not excuse a grant inside the lease": {[]history.Op{
			acq("A", 0, 1, 10), acq("B", 20, 21, 11), release("A", 30, 31, history.FreedCopies),
		}, false, 1},
		"a quorum store's release by the holder frees the lock": {[]history.Op{
			acq("A", 0, 1, 10), release("A", 10, 11, history.FreedCopies), acq("B", 12, 13, 11),
		}, true, 0},
		"a lock released on a quorum store renewed": {[]history.Op{
			acq("A", 0, 1, 10), release("A", 10, 11, history.FreedCopies), renew("A", 20, 21, history.Renewed),
		}, false, 0},
	} {
		t.Run(name, func(t *testing.T) {
			res := Grants(tc.ops, 10*time.Second)
			if got := res.Verdict == porcupine.Ok; got != tc.ok {
				t.Errorf("verdict %v, want ok=%v", res.Verdict, tc.ok)
			}
			if len(res.DoubleGrants) != tc.double {
				t.Errorf("definite double grants %v, want %d", res.DoubleGrants, tc.double)
			}
		})
	}
}

func lock(owner string, call, ret, fence int64) history.Op {
	return history.Op{Kind: history.Lock, Lock: "L", Owner: owner, Call: call * ms, Return: ret * ms, OK: true, Fence: fence, Depth: 1}
}

func write(owner string, call int64, fence int64, seq int64) history.Op {
	return history.Op{Kind: history.Write, Lock: "L", Owner: owner, Call: call * ms, Return: call*ms + ms, OK: seq > 0, Fence: fence, Seq: seq}
}

func TestStaleWrites(t *testing.T) {
	fenced := []history.Op{lock("A", 0, 1, 10), write("A", 2, 10, 1), lock("B", 150, 151, 11), write("B", 152, 11, 2), write("A", 160, 10, 0)}
	res := StaleWrites(fenced)
	if len(res.StaleAccepted) != 0 || res.Superseded != 1 || res.Accepted != 2 {
		t.Errorf("fenced: %+v, want no stale accepted, 1 superseded, 2 accepted", res)
	}
	unfenced := append(fenced[:4:4], write("A", 160, 10, 3))
	if res := StaleWrites(unfenced); len(res.StaleAccepted) != 1 {
		t.Errorf("unfenced: stale accepted %v, want the old holder's write", res.StaleAccepted)
	}
	regress := []history.Op{lock("A", 0, 1, 10), lock("B", 150, 151, 9)}
	if res := StaleWrites(regress); len(res.TokenRegressions) != 1 {
		t.Errorf("token regressions %v, want B's grant", res.TokenRegressions)
	}
}

func TestNotificationsAndOverlap(t *testing.T) {
	told := func(owner string, at int64) history.Op {
		return history.Op{Kind: history.Told, Lock: "L", Owner: owner, Call: at * ms, Return: at * ms, Reason: "expired"}
	}
	ops := []history.Op{acq("A", 0, 1, 10), lock("A", 0, 1, 10), told("A", 90)}
	res := Notifications(ops)
	if len(res.Late) != 0 || len(res.Leads) != 1 || res.Leads[0].D <= 0 {
		t.Errorf("told at 90ms of a 100ms lease: %+v, want one positive lead", res)
	}
	ops = []history.Op{acq("A", 0, 1, 10), lock("A", 0, 1, 10), told("A", 150), acq("B", 120, 121, 11), lock("B", 120, 121, 11), told("B", 200)}
	if res := Notifications(ops); len(res.Late) != 1 || res.Late[0].Owner != "A" {
		t.Errorf("told at 150ms of a 100ms lease: late %+v, want A", res.Late)
	}
	// A Lock that returns after its hold's validity deadline hands over a
	// hold lost from its first moment: not a late holder, but listed. One
	// returned with validity left is judged as any other.
	lockAt := func(owner string, call, ret, validUntil int64) history.Op {
		l := lock(owner, call, ret, 10)
		l.ValidUntil = validUntil * ms
		return l
	}
	lost := []history.Op{acq("A", 0, 150, 10), lockAt("A", 0, 150, 80), told("A", 150)}
	if res := Notifications(lost); len(res.Late) != 0 || len(res.LostAtReturn) != 1 || res.LostAtReturn[0].By != 53*time.Millisecond {
		t.Errorf("a Lock returning at 150ms a hold valid until 80ms: %+v, want it lost at return, 53ms past the earliest expiry (97ms)", res)
	}
	valid := []history.Op{acq("A", 0, 50, 10), lockAt("A", 0, 50, 80), told("A", 150)}
	if res := Notifications(valid); len(res.Late) != 1 || len(res.LostAtReturn) != 0 {
		t.Errorf("a hold valid until 80ms, told at 150ms: %+v, want it late", res)
	}
	if o := Overlap(ops); o.Pairs != 1 || o.Max != 29*time.Millisecond {
		t.Errorf("overlap %+v, want one pair of 29ms", o)
	}
}
