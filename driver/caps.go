package driver

import (
	"context"
	"strings"
	"time"
)

// KindStore is implemented by a store that grants lock kinds beyond
// KindMutex. Kinds lists them (KindMutex may be listed or not); Acquire,
// Renew and Release then take requests of those kinds:
//
//   - KindFair: exclusive, one lock with KindMutex, granted only to the
//     head of the name's queue (or to anyone when the queue is empty). A
//     caller that is not granted is queued, or its place refreshed, for
//     req.Wait; a request with Wait == 0 takes no place.
//   - KindWrite: exclusive, one lock with KindMutex, not granted while
//     readers hold; a caller that is not granted is marked as a waiting
//     writer for req.Wait, which keeps new readers out.
//   - KindRead: shared with other readers, not granted while a writer holds
//     the lock or waits for it, except when req.Parent holds the write lock
//     (a downgrade: the writer's own read lease, under an owner of its own,
//     which outlives the write lock's release). An owner holding a read
//     lease asking for the write lock gets an error matching ErrUpgrade.
//   - KindPermit: one of the name's permits, leased to req.Owner; a name
//     holding a semaphore is not a mutex and the reverse (ErrNotALock).
//     req.Permits sets the permit count if the semaphore does not exist.
//
// KindRead and KindWrite are listed together or not at all. A retry of a
// granted KindRead or KindPermit acquire (the same owner again) refreshes
// that lease and grants nothing more. A store that lists KindFair or
// KindWrite must be a [Withdrawer].
type KindStore interface {
	Kinds() []Kind
}

// Withdrawer removes the waiting places that KindFair and KindWrite
// acquires leave: the core calls Withdraw when a waiter stops waiting.
type Withdrawer interface {
	// Withdraw removes req.Owner's place in req.Name's fair queue, or its
	// waiting-writer mark. It is not an error when there is none.
	Withdraw(ctx context.Context, req Request) error
}

// PermitSetter is implemented by a store that can change a semaphore's
// permit count while it is in use.
type PermitSetter interface {
	// SetPermits sets the permit count of semaphore name to n, creating the
	// semaphore if there is none, and wakes its waiters. Permits already held stay held, even above n. A name that
	// holds something other than a semaphore (a lock, another application's
	// data) is refused with ErrNotALock and left unchanged.
	SetPermits(ctx context.Context, name string, n int) error
}

// MultiStore is implemented by a store that can take several exclusive locks
// in one atomic step. Without it, MultiLock takes the names one at a time in
// a global order.
type MultiStore interface {
	// Partition groups names into sets that AcquireMany can take together
	// (on Redis Cluster, one set per hash slot), in the order MultiLock must
	// take them. Every name appears in exactly one set.
	Partition(names []string) [][]string
	// AcquireMany takes every request's lock (all KindMutex, one owner) in
	// one atomic step, or none. Each granted lock is as after Acquire; when
	// not granted, Remaining is the shortest remaining lease among the
	// blocking holders.
	AcquireMany(ctx context.Context, reqs []Request) (MultiGrant, error)
}

// MultiGrant is the result of an AcquireMany.
type MultiGrant struct {
	// Acquired reports whether the caller now holds every lock.
	Acquired bool
	// Fences are the locks' fencing tokens, in request order, when Acquired.
	Fences []int64
	// Remaining is, when not Acquired, the shortest remaining lease among
	// the blocking holders; negative when the store cannot tell.
	Remaining time.Duration
	// Grace reports, when not Acquired, a refusal in the store's restart
	// grace, as Grant.Grace does.
	Grace bool
}

// Admin is implemented by a store that operators can look into: the leash
// CLI's show, ls and unlock need it. Every method refuses a name that holds
// something other than a lock with ErrNotALock and leaves it untouched.
type Admin interface {
	// Inspect reports the state of name as the server sees it, whatever the
	// kind of lock held on it.
	Inspect(ctx context.Context, name string) (Info, error)
	// List returns, sorted, the names of the locks whose names match
	// pattern, a glob in which '*' matches any run of characters, '?' any
	// one character, and '\' quotes the next (see [Glob]; a store may
	// accept more, such as Redis's character classes); "" matches every
	// name. A name is listed while someone holds it (a lock, a read lease,
	// a permit); one with only waiting places may or may not be. Names that
	// hold something other than a lock are left out.
	List(ctx context.Context, pattern string) ([]string, error)
	// ForceRelease deletes every lock, lease, permit and queue place on name
	// whoever holds them, and wakes every waiter. It reports whether there
	// was anything to delete. Holders learn of it at their next renewal at
	// the latest (at once on a [Revoker], which can also take a lock from a
	// live holder safely).
	ForceRelease(ctx context.Context, name string) (bool, error)
}

// Info describes a name as the server sees it.
type Info struct {
	// Name is the lock name.
	Name string
	// Kind is the kind of lock held on the name: KindMutex for an exclusive
	// hold (Mutex, FairMutex or Redisson), KindWrite or KindRead for an
	// RWMutex, KindPermit for a Semaphore.
	Kind Kind
	// Held reports whether anyone holds the lock (or a permit).
	Held bool
	// Owners lists the owners and their hold counts: one for an exclusive
	// lock, every reader for a read lock, every permit for a semaphore.
	Owners []OwnerHolds
	// Remaining is the remaining lease (the longest, for readers and
	// permits); negative when not held or no expiry.
	Remaining time.Duration
	// Fence is the last fencing token granted for the name (0 if none).
	Fence int64
	// Permits is a semaphore's permit count (0 for other kinds).
	Permits int
	// Queued is the number of waiters with a place in a fair queue (a
	// starving Mutex waiter's mark is one) or a waiting-writer mark.
	Queued int
	// Waiters is the number of clients watching for a release, or -1 when
	// the store cannot tell. A client may be counted once per watch it
	// keeps: a starving Mutex waiter's client watches both the Mutex's
	// release and the fair queue's.
	Waiters int
	// Revoked lists the owners whose lock on the name was revoked and who
	// have not acknowledged it yet (see [Revoker]): while it is not empty,
	// Held is false and the name is granted to no one until Remaining runs
	// out or the last of them acknowledges.
	Revoked []string
}

// OwnerHolds is one owner of a lock and its hold count.
type OwnerHolds struct {
	// Owner is the owner string, "<client-id>:<n>" for a leash tenure.
	Owner string
	// Holds is the store's hold count: 1 for a leash holder, which counts
	// re-entries in the client, however deep it has re-entered; a Redisson
	// holder's own count on Redis.
	Holds int
	// Kind is the owner's kind of hold (KindRead for a reader on an RWMutex).
	Kind Kind
	// Remaining is this owner's remaining lease when the store tracks one
	// per owner (readers, permits); otherwise negative.
	Remaining time.Duration
}

// SessionStore is implemented by a store whose server keeps every lock of a
// client alive with one keep-alive: an etcd lease, a ZooKeeper session. The
// core's watchdog then sends, each renewal round, one KeepAlive for the
// Client's session instead of extending each lock, followed by one Renew
// call that, for a SessionStore, checks each lock without extending it, so
// that a lock lost alone (forced free, say) is reported on its own hold.
// Every hold keeps its own validity deadline: the send time of the last
// successful keep-alive plus the lock's lease, minus the safety margin.
// A lock kept by a session cannot outlive it, so Hold.UnlockAfter (leave
// the lock to expire later) is refused with ErrUnsupported; and since the
// session would keep alive a lock whose hold the core gave up (its deadline,
// MaxHold or liveness passed), the core releases such a lock, and retries a
// release whose outcome is unknown until the store answers.
type SessionStore interface {
	// KeepAlive renews, in one step, every lock the store holds for client
	// (the client id that starts every owner, see OwnerClient), each for at
	// least the lease it was granted with (its Request.Lease), from now by
	// the server's clock. A server whose session time to live is fixed per
	// session keeps it at least the longest lease it was asked for (an etcd
	// store may keep one lease per duration; a ZooKeeper session's
	// negotiated timeout must cover every lease, and Acquire refuses a
	// longer one).
	// An error matching ErrNotHeld means the session has ended and every
	// lock it kept is lost; any other error is an unknown outcome.
	KeepAlive(ctx context.Context, client string) error
}

// NameChecker is implemented by a store that accepts fewer names than
// leash.ValidateName does (for example because of key-length or hash-slot
// rules). The core calls CheckName before any round trip and wraps a
// non-nil error with leash.ErrInvalidName.
type NameChecker interface {
	CheckName(name string) error
}

// Validator is implemented by a store that can report a construction error,
// such as a nil driver client. leash.New calls Validate and refuses the store
// if it returns an error.
type Validator interface {
	Validate() error
}

// ClientRecorder is implemented by a store that keeps, beside the locks, a
// record of each client that holds them, so that an operator deciding whether
// a force unlock is safe can tell who holds a lock: its host, process,
// label and command, when it took the lock, and whether the lock is still
// worked under or only left to expire. The records live apart from the
// locks, which keep their layout (on Redis, Redisson's: the lock hash holds
// owner fields only). A record is for people: the core never reads it, and
// its loss changes nothing about any lock.
type ClientRecorder interface {
	// PutClient replaces the record of the client rec.ID with rec, to
	// expire ttl later by the server's clock.
	PutClient(ctx context.Context, rec ClientRecord, ttl time.Duration) error
	// DeleteClient deletes the record of the client id; it is not an error
	// when there is none.
	DeleteClient(ctx context.Context, id string) error
	// GetClient returns the record of the client id, and false when there
	// is none (never written, deleted or expired).
	GetClient(ctx context.Context, id string) (ClientRecord, bool, error)
}

// MaxRecordLocks is the most locks one [ClientRecord] lists.
const MaxRecordLocks = 64

// ClientRecord describes a leash Client for operators; see [ClientRecorder].
type ClientRecord struct {
	// ID is the Client's id, the first part of every owner it records
	// (see [OwnerClient]).
	ID string
	// Host is the host name of the Client's process.
	Host string
	// PID is the process id of the Client's process.
	PID int
	// Label is the Client's Options.Label.
	Label string
	// Command is the Client's Options.Command: the leash CLI records the
	// command that leash run runs.
	Command string
	// Started is when the Client was created.
	Started time.Time
	// Locks are the locks the Client held, or had left to expire, when it
	// last published the record: at most MaxRecordLocks of them. A lock
	// taken since then is missing until the next publication, at the
	// latest when the lock is first renewed.
	Locks []LockRecord
}

// LockRecord is one lock of a [ClientRecord].
type LockRecord struct {
	// Owner is the tenure's store owner, as [Info] lists it.
	Owner string
	// Acquired is when the Client sent the request that was granted.
	Acquired time.Time
	// TailSince is zero while the lock is held; once the holder left it to
	// expire (Hold.UnlockAfter, leash run's --at-least), it is when it did
	// so: the work under the lock has ended, and the lock is kept only
	// until its lease runs out.
	TailSince time.Time
}

// Lock returns the record of owner's lock, and false when the record does
// not list it.
func (r ClientRecord) Lock(owner string) (LockRecord, bool) {
	for _, l := range r.Locks {
		if l.Owner == owner {
			return l, true
		}
	}
	return LockRecord{}, false
}

// OwnerClient returns the id of the client an owner string belongs to: the
// part before the first ':' of "<client-id>:<n>[@owner]", the id under which
// a ClientRecorder keeps its record and a SessionStore its session. A
// Redisson owner "<uuid>:<thread>" gives its uuid, for which no record exists.
func OwnerClient(owner string) string {
	id, _, _ := strings.Cut(owner, ":")
	return id
}

// Drifter is implemented by a store whose locks may end, by the client's
// clock, sooner after the request was sent than the lease asked for: a
// quorum of independent servers, whose clocks each run at their own rate
// (package redlock), or a ZooKeeper ensemble, whose leader may count a
// session's timeout from before the request (package zkstore). The core
// keeps every hold's validity deadline at least Drift(lease) before the
// lease would end: the safety margin of a lock on such a store is the
// larger of its SafetyMargin and Drift(lease).
type Drifter interface {
	// Drift returns the drift allowance for a lock of this lease; it must
	// be shorter than the lease.
	Drift(lease time.Duration) time.Duration
}
