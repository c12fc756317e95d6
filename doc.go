// Package leash provides distributed locks that are held exactly as long as
// their holder is alive and working, and that tell the holder the moment
// they stop holding.
//
// # Lifecycle
//
// Create one [Client] per process on a store (redisstore for Redis,
// memstore in process), take locks by name, release them, and close the
// Client on shutdown:
//
//	c, err := leash.New(redisstore.New(rdb, nil), nil) // nil: default options
//	defer c.Close()                                     // releases what is still held
//
//	hold, err := c.Mutex("orders:42").Lock(ctx) // waits; ctx bounds the wait only
//	defer hold.Unlock(ctx)                      // safe with a cancelled ctx
//	doWork(hold.Context())                      // cancelled the moment the lock is lost
//	write(row, hold.Fence())                    // the resource rejects stale tokens
//
// # What a hold guarantees
//
// A lock is a lease: the store frees it Lease after the last renewal, by the
// server's clock. While the lock is held, the Client's watchdog renews it
// every RenewInterval (Lease/3 by default), so a holder that is alive keeps
// it for as long as it works, and a holder that crashes loses it within one
// lease. A fixed lease ([NoRenewal]) is never renewed unless the holder calls
// [Hold.Renew].
//
// It is NOT safe to assume that the lock is still held because Lock once
// succeeded. A process pause (GC, SIGSTOP, an overloaded host) or a network
// partition longer than the lease lets the store give the lock to someone
// else while the old holder still runs. leash answers this in two ways:
//
//   - The holder is told. Each hold has a local validity deadline — the send
//     time of its last successful acquire or renewal, plus the lease, minus a
//     safety margin — measured on the client's monotonic clock. When it
//     passes without a renewal, or the store reports the lock gone or taken,
//     or MaxHold is reached, or the Client closes, the hold's [Hold.Context]
//     is cancelled, [Hold.Lost] is closed and [Hold.Err] returns a
//     [*LostError] with the [Reason] — before the store can grant the lock to
//     anyone else. Hold.Err checks the deadline itself, so a process resuming
//     from a pause sees the loss on its first look. Check it right before
//     each protected write.
//   - Every grant carries a fencing token ([Hold.Fence]) strictly greater than
//     every earlier grant of the same name. A resource that remembers the
//     highest token it has accepted, and rejects lower ones, is safe even
//     against a holder that was paused between its check and its write. This
//     is the only end-to-end guarantee a lease lock can give.
//
// # Re-entry and owners
//
// Locks are owned by tenures, never by goroutines. Calling Lock with a held
// lock's Context (or a context derived from it) re-enters the lock at once;
// only the last Unlock releases it. A context from [WithOwner] names a
// logical owner, such as a job id, whose holds on one Client are shared by
// every goroutine that carries it. Anything else waits like any other client.
// Each tenure, from first Lock to last Unlock, has a store owner of its own
// ([Hold.Owner]), with or without an explicit owner.
//
// # Names that hold something else
//
// A store is often shared with an application's own data. A name that holds
// anything but a lock of the kind asked for (a user's key, or a semaphore
// where a Mutex is asked for) is refused at once with an error matching
// [ErrNotALock], a [*NotALockError] saying what is there: Lock does not wait
// for a "holder", and no operation — acquire, renewal, release,
// ForceUnlock, Inspect — ever deletes, alters or extends it. A hold whose
// lock is replaced by other data is lost (released elsewhere).
//
// # Force unlock
//
// An operator who must take a lock from a stuck holder calls
// [Client.ForceUnlock] (leash unlock --force). On a store that revokes (a
// driver.Revoker: Redis, memstore) the holder is told at once — its hold is
// lost with ReasonRevoked, errors.Is(err, ErrRevoked) — and the name is
// granted to no one else until the holder's Client has acknowledged, a few
// round trips later, or until the holder's lease runs out: a paused or
// cut-off holder never overlaps the next. [Client.ForceUnlockNow] frees the
// name at once, for a holder known to be dead.
//
// # Waiting
//
// Waiters do not poll on a store that notifies (a driver.Watcher: Redis,
// memstore). A release wakes one waiter per client through the store's
// notifications (pub/sub on Redis); a fallback timer set to the holder's
// remaining lease covers a lost notification or an expiry. A Client keeps
// a name's watch for a second after a Lock that waited for the name got it
// or gave up, so that a name contended again and again is not subscribed
// to anew each time. On a store without notifications, waiters try again
// when the holder's lease runs out, and at least every second.
//
// # Stores
//
// A store is anything that implements package driver's contract: an
// exclusive, leased, fenced lock in three methods, plus optional
// capabilities the Client discovers — the other lock kinds, notifications,
// several names in one step, administration, session renewal, holder
// records. Every Mutex and MultiLock works on every store; a FairMutex,
// RWMutex or Semaphore on a store without that kind, or Inspect and
// ForceUnlock on one without administration, fail before any round trip
// with an error matching ErrUnsupported that names the store and what it
// lacks. driver.Open opens a store from a URL ("redis://…", "mem://") by
// the scheme its module registered.
//
// # Cost
//
// A Client runs one renewal goroutine whatever the number of held locks, and
// renews all the locks that are due together in one store call, which the
// store splits into batches (one Lua script per 500 locks on Redis).
//
// # Watching it
//
// Options.Logger receives leash's logs (log/slog); Options.Observer receives
// every lock event (acquired, not acquired, released, lost with its reason,
// each renewal round), from which the prom module keeps Prometheus metrics.
// With a store that keeps holder records ([driver.ClientRecorder]; the Redis store
// does), each Client publishes who it is (host, process id, Options.Label,
// Options.Command) and when it took each lock it holds for a while, apart
// from the locks, so that an operator (leash ls, leash show) can tell who
// holds a lock before forcing it free.
package leash
