// Package storetest is the conformance suite of the [driver] contract. Every
// store, leash's own and any user's, proves it keeps the contract by passing
// Run:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) driver.Store { return mystore.New(...) })
//	}
//
// The suite has one section per part of the contract, each a subtest group:
//
//   - required: the core every store implements ([driver.Store]: Acquire,
//     Renew, Release of KindMutex). Its tests call nothing else: they see a
//     lock's state only as other owners' acquires and renewals see it.
//   - watch: release notifications ([driver.Watcher]).
//   - fair, rw, semaphore: the lock kinds a [driver.KindStore] lists
//     (KindFair; KindRead and KindWrite; KindPermit), with [driver.Withdrawer]
//     and [driver.PermitSetter].
//   - starvation: the Mutex's starving waiters' marks
//     ([driver.StarvationStore]).
//   - handoff: a release that grants the lock to the first waiter and
//     tells it in the wake-up ([driver.HandoffStore]).
//   - multi: several names in one step ([driver.MultiStore]).
//   - admin: Inspect, List and ForceRelease ([driver.Admin]), and the
//     data-safety rules the suite can check through them.
//   - revoke: revocation ([driver.Revoker]): a force release that tells
//     the holder at once and grants the name to no one else first.
//   - records: holder records ([driver.ClientRecorder]).
//   - session: session renewal ([driver.SessionStore]).
//   - jobs: scheduled jobs' tick claims and run records ([driver.JobStore]),
//     judged by the store's clock.
//   - fence: fence floors ([driver.FenceRaiser]): a raised counter lifts
//     every later token above the floor, and is never lowered.
//
// Run runs the required section and every section whose capability the
// store has, and logs each section it leaves out and the capability the
// store lacks: that is the store's declared shape, not a failure. A test
// that also needs a second capability (a fair queue's wake-ups need a
// Watcher too) is left out, and logged, the same way.
//
// A store that implements only the required core is in the leash
// repository's minimal_test.go: a map and a mutex, about a hundred lines,
// passing the required section.
//
// The suite uses real time (leases of a few hundred milliseconds), because a
// server-backed store measures leases by the server's clock.
//
// The suite checks the not-a-lock rule (leash.ErrNotALock) where it can reach
// it through the contract: a semaphore where a lock is asked for, and the
// reverse. A store that shares its server with other data (a Redis keyspace,
// a database) must also test, with its own tests, that every method refuses
// that data and leaves it unchanged, since the suite cannot write it.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// NewStore returns the store under test. It is called once per test, and
// once more by Run to learn the store's capabilities; it may return the same
// store each time, since every test uses its own lock names.
type NewStore func(t *testing.T) driver.Store

const (
	long  = 30 * time.Second
	short = 300 * time.Millisecond
	// wakeWait bounds how long a release notification, or a lease's end,
	// may take to be seen.
	wakeWait = 5 * time.Second
)

// LeaseSlack is implemented by a store whose server may keep a lease longer
// than asked (whole-second TTLs, a server's minimum TTL, expiry by a
// periodic check, as etcd does), by at most LeaseSlack(lease). Where the
// suite sleeps until a lease has run out, it sleeps that much longer; a
// store without it is expected to end a lease within 50 ms of its end.
type LeaseSlack interface {
	LeaseSlack(lease time.Duration) time.Duration
}

// outlived returns how long after a grant of lease on s it has surely run
// out.
func outlived(s driver.Store, lease time.Duration) time.Duration {
	d := lease + 50*time.Millisecond
	if ls, ok := s.(LeaseSlack); ok {
		d += ls.LeaseSlack(lease)
	}
	return d
}

// A capability is an optional part of the contract a store may have.
type capability struct {
	name string // what the store lacks, in a log line
	has  func(driver.Store) bool
}

func implements[T any](s driver.Store) bool {
	_, ok := s.(T)
	return ok
}

var (
	capWatch    = capability{"release notifications (driver.Watcher)", implements[driver.Watcher]}
	capFair     = capability{"fair locks (driver.KindStore listing KindFair)", kinds(driver.KindFair)}
	capRW       = capability{"read-write locks (driver.KindStore listing KindRead and KindWrite)", kinds(driver.KindRead, driver.KindWrite)}
	capPermit   = capability{"semaphores (driver.KindStore listing KindPermit)", kinds(driver.KindPermit)}
	capResize   = capability{"semaphore resizing (driver.PermitSetter)", implements[driver.PermitSetter]}
	capMulti    = capability{"multi-name acquires (driver.MultiStore)", implements[driver.MultiStore]}
	capAdmin    = capability{"administration (driver.Admin)", implements[driver.Admin]}
	capRecords  = capability{"holder records (driver.ClientRecorder)", implements[driver.ClientRecorder]}
	capSessions = capability{"session renewal (driver.SessionStore)", implements[driver.SessionStore]}
	capJobs     = capability{"scheduled jobs' claims and records (driver.JobStore)", implements[driver.JobStore]}
	capFence    = capability{"fence floors (driver.FenceRaiser)", implements[driver.FenceRaiser]}
	// capExtends is the renewal of the required core: Renew extends each
	// lock. A SessionStore's Renew only checks; its keep-alive extends.
	capExtends = capability{"renewal that extends each lock (it is a driver.SessionStore, whose keep-alive does)",
		func(s driver.Store) bool { _, ok := s.(driver.SessionStore); return !ok }}
)

func kinds(ks ...driver.Kind) func(driver.Store) bool {
	return func(s driver.Store) bool {
		for _, k := range ks {
			if !driver.Supports(s, k) {
				return false
			}
		}
		return true
	}
}

// A section is the tests of one part of the contract, run when the store has
// every capability in needs (none, for the required core).
type section struct {
	name  string
	needs []capability
	tests []test
}

// A test is one behaviour, run when the store also has every capability in
// needs, beyond its section's.
type test struct {
	name  string
	needs []capability
	fn    func(t *testing.T, s driver.Store, n *namer)
}

// sections is the suite, one section per part of the contract.
var sections = []section{
	{"required", nil, requiredTests},
	{"watch", []capability{capWatch}, watchTests},
	{"fair", []capability{capFair}, fairTests},
	{"starvation", []capability{capStarve}, starveTests},
	{"handoff", []capability{capHandoff, capFair}, handoffTests},
	{"rw", []capability{capRW}, rwTests},
	{"semaphore", []capability{capPermit}, semaphoreTests},
	{"multi", []capability{capMulti}, multiTests},
	{"admin", []capability{capAdmin}, adminTests},
	{"revoke", []capability{capAdmin, capRevoke}, revokeTests},
	{"records", []capability{capRecords}, recordTests},
	{"session", []capability{capSessions}, sessionTests},
	{"jobs", []capability{capJobs}, jobTests},
	{"fence", []capability{capFence}, fenceTests},
}

// Run runs the conformance suite against the stores newStore returns: the
// capabilities check, the required section, and every section whose
// capability the store has. It logs each section and test it leaves out, and
// the capability the store lacks for it.
func Run(t *testing.T, newStore NewStore) {
	shape := newStore(t)
	t.Run("capabilities", func(t *testing.T) { testShape(t, shape) })
	for _, sec := range sections {
		if lack := lacking(shape, sec.needs); lack != "" {
			t.Logf("section %s not run: %s has no %s", sec.name, driver.Describe(shape), lack)
			continue
		}
		t.Run(sec.name, func(t *testing.T) {
			for _, tc := range sec.tests {
				if lack := lacking(shape, tc.needs); lack != "" {
					t.Logf("%q not run: %s has no %s", tc.name, driver.Describe(shape), lack)
					continue
				}
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t), newNamer(t)) })
			}
		})
	}
}

// lacking returns the first capability in needs that s lacks, or "".
func lacking(s driver.Store, needs []capability) string {
	for _, c := range needs {
		if !c.has(s) {
			return c.name
		}
	}
	return ""
}

// testShape checks that the capabilities the store declares hold together,
// as the core requires before it uses them.
func testShape(t *testing.T, s driver.Store) {
	ks, ok := s.(driver.KindStore)
	if !ok {
		return
	}
	listed := map[driver.Kind]bool{}
	for _, k := range ks.Kinds() {
		if k > driver.KindPermit {
			t.Errorf("Kinds() lists %v, which is not a lock kind", k)
		}
		listed[k] = true
	}
	for _, k := range []driver.Kind{driver.KindFair, driver.KindWrite} {
		if listed[k] && !implements[driver.Withdrawer](s) {
			t.Errorf("Kinds() lists %v but the store is not a driver.Withdrawer: waiters' places could not be removed", k)
		}
	}
	if listed[driver.KindRead] != listed[driver.KindWrite] {
		t.Errorf("Kinds() lists one of KindRead and KindWrite (read %v, write %v): an RWMutex needs both",
			listed[driver.KindRead], listed[driver.KindWrite])
	}
}

// namer makes lock names and owners unique to one test run.
type namer struct {
	prefix string
	seq    atomic.Int64
}

func newNamer(t *testing.T) *namer {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &namer{prefix: "storetest/" + hex.EncodeToString(b[:]) + "/" + t.Name()}
}

func (n *namer) name() string { return fmt.Sprintf("%s/%d", n.prefix, n.seq.Add(1)) }

// owner returns a fresh owner in the shape the core gives (see driver.Request):
// a client id in UUID form, a colon and a number.
func (n *namer) owner() string {
	seq := n.seq.Add(1)
	return fmt.Sprintf("%s:%d", n.client(seq), seq)
}

// client is the client id in UUID form numbered seq.
func (n *namer) client(seq int64) string {
	return fmt.Sprintf("%s-0000-4000-8000-%012d", n.prefix[10:18], seq)
}

// clientOwners returns a fresh client id and k fresh owners of it, as one
// Client's tenures are: "<client>:<n>". A driver.ClientWatcher sends the
// wake-ups of a queue head to its client's WatchClient (see watchHeads).
func (n *namer) clientOwners(k int) (string, []string) {
	client := n.client(n.seq.Add(1))
	owners := make([]string, k)
	for i := range owners {
		owners[i] = fmt.Sprintf("%s:%d", client, n.seq.Add(1))
	}
	return client, owners
}

// quoteGlob quotes s for a driver.Glob pattern (and for Redis's, whose
// character classes it also quotes).
func quoteGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?\[]`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func req(name, owner string, lease time.Duration) driver.Request {
	return driver.Request{Name: name, Owner: owner, Lease: lease}
}

func kreq(kind driver.Kind, name, owner string, lease time.Duration) driver.Request {
	return driver.Request{Kind: kind, Name: name, Owner: owner, Lease: lease}
}

func waiting(r driver.Request, wait time.Duration) driver.Request {
	r.Wait = wait
	return r
}

func mustAcquire(t *testing.T, s driver.Store, r driver.Request) driver.Grant {
	t.Helper()
	g, err := s.Acquire(ctx(t), r)
	if err != nil {
		t.Fatalf("Acquire(%v %q, %q) error: %v", r.Kind, r.Name, r.Owner, err)
	}
	if !g.Acquired {
		t.Fatalf("Acquire(%v %q, %q) = not acquired (remaining %v), want acquired", r.Kind, r.Name, r.Owner, g.Remaining)
	}
	return g
}

func mustNotAcquire(t *testing.T, s driver.Store, r driver.Request) driver.Grant {
	t.Helper()
	g, err := s.Acquire(ctx(t), r)
	if err != nil {
		t.Fatalf("Acquire(%v %q, %q) error: %v", r.Kind, r.Name, r.Owner, err)
	}
	if g.Acquired {
		t.Fatalf("Acquire(%v %q, %q) = acquired (fence %d), want not acquired", r.Kind, r.Name, r.Owner, g.Fence)
	}
	return g
}

func mustRelease(t *testing.T, s driver.Store, r driver.Request) {
	t.Helper()
	if err := s.Release(ctx(t), r); err != nil {
		t.Fatalf("Release(%v %q, %q): %v", r.Kind, r.Name, r.Owner, err)
	}
}

func wantReleaseNotHeld(t *testing.T, s driver.Store, r driver.Request, what string) {
	t.Helper()
	if err := s.Release(ctx(t), r); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release %s = %v, want ErrNotHeld", what, err)
	}
}

func mustWithdraw(t *testing.T, s driver.Store, r driver.Request) {
	t.Helper()
	if err := s.(driver.Withdrawer).Withdraw(ctx(t), r); err != nil {
		t.Fatalf("Withdraw(%v %q, %q): %v", r.Kind, r.Name, r.Owner, err)
	}
}

func renewOne(t *testing.T, s driver.Store, r driver.Request) driver.RenewStatus {
	t.Helper()
	res := s.Renew(ctx(t), []driver.Request{r})
	if len(res) != 1 {
		t.Fatalf("Renew(1 request) returned %d results", len(res))
	}
	if res[0].Err != nil {
		t.Fatalf("Renew(%v %q, %q) error: %v", r.Kind, r.Name, r.Owner, res[0].Err)
	}
	return res[0].Status
}

func wantRenew(t *testing.T, s driver.Store, r driver.Request, want driver.RenewStatus, what string) {
	t.Helper()
	if got := renewOne(t, s, r); got != want {
		t.Errorf("Renew %s = status %d, want %d", what, got, want)
	}
}

// busy checks that a fresh owner is refused r's lock (r.Owner is replaced),
// with a remaining lease in (0, most], and returns that remaining lease.
func busy(t *testing.T, s driver.Store, n *namer, r driver.Request, most time.Duration) time.Duration {
	t.Helper()
	r.Owner = n.owner()
	g := mustNotAcquire(t, s, r)
	if g.Remaining <= 0 || g.Remaining > most {
		t.Errorf("Acquire(%v %q) refused with Remaining %v, want in (0, %v]", r.Kind, r.Name, g.Remaining, most)
	}
	return g.Remaining
}

// wantHeldBy checks, with the required core only, that r.Owner holds r.Name
// under fencing token fence: a fresh owner is refused, and r retried is
// granted with the same token (which refreshes the lease to r.Lease).
func wantHeldBy(t *testing.T, s driver.Store, n *namer, r driver.Request, fence int64) {
	t.Helper()
	busy(t, s, n, r, max(r.Lease, long))
	if g := mustAcquire(t, s, r); g.Fence != fence {
		t.Errorf("retried Acquire(%q, %q) = fence %d, want the tenure's %d", r.Name, r.Owner, g.Fence, fence)
	}
}

// wantFree checks that a fresh owner is granted name's lock of kind at once,
// releases it, and returns the grant.
func wantFree(t *testing.T, s driver.Store, n *namer, kind driver.Kind, name string) driver.Grant {
	t.Helper()
	r := kreq(kind, name, n.owner(), long)
	r.Permits = 1
	g := mustAcquire(t, s, r)
	mustRelease(t, s, r)
	return g
}

// acquireWithin retries r until it is granted, for at most d, and returns
// the grant. It is for a lease that must run out: the sleeps between tries
// are what the test waits for.
func acquireWithin(t *testing.T, s driver.Store, r driver.Request, d time.Duration) driver.Grant {
	t.Helper()
	return grantedAfter(t, s, r, d, func() {})
}
