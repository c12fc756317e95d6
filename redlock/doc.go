// Package redlock is a quorum lock over independent stores: antirez's
// Redlock, run by leash's watchdog. A [Store] made of N members (N odd, at
// least 3: N redisstore Stores on N independent redis-servers, or any
// driver.Store) holds a lock when a majority of its members hold it, so the
// lock survives ⌊N/2⌋ members that are down, paused, cut off or restarted.
// It is a driver.Store, so every leash Mutex works on it:
//
//	q, err := redlock.New([]driver.Store{
//		redisstore.New(redis.NewClient(&redis.Options{Addr: "redis-a:6379"}), nil),
//		redisstore.New(redis.NewClient(&redis.Options{Addr: "redis-b:6379"}), nil),
//		redisstore.New(redis.NewClient(&redis.Options{Addr: "redis-c:6379"}), nil),
//	}, nil)
//	c, err := leash.New(q, nil) // Close closes q, and q its members
//
// # The algorithm
//
//   - Acquire sends the request to every member at once and waits for their
//     answers, each for at most the member timeout (Options.MemberTimeout);
//     a member that does not answer in time counts as a refusal. The lock is
//     granted when a majority granted it and the time spent is less than the
//     validity budget: lease − drift allowance. Otherwise it is released on
//     every member that granted it or whose answer was lost, so that a
//     partial grant blocks no one. A copy whose give-back fails stays until
//     its lease ends: on an unreachable member, or on one where the
//     give-back overtook a late acquire it answered ErrNotHeld to. Such a
//     copy, alone on a minority, keeps no majority from another owner, but
//     while it lasts the name needs every other member to be granted.
//     Before a grant is returned, a majority's fencing counters are raised
//     to its token (see Fencing tokens).
//   - Contenders that split the members between them try again after a
//     random pause of a few milliseconds, asking one member first and the
//     others only if it grants, so that the next round has a winner. A name
//     refused in the last second (held by another, or split) is hot: every
//     acquire of it asks one member first, the name's leader (a hash of the
//     name over the members, the same in every client that lists the
//     members in the same order; a member that failed to answer in the last
//     second is passed over), so that the waiters a release wakes cost the
//     losers one round trip to one member, and do not split the members. A
//     refusal by the leader alone says to try again within a second, and
//     that try asks every member (a contender that crashed may have left
//     its partial grant there).
//   - The drift allowance is DriftFactor × lease + DriftFixed (1% + 2 ms by
//     default, antirez's figures): how much sooner than the lease a member
//     whose clock runs fast may let the lock go, by the client's clock. The
//     Store is a driver.Drifter, so a leash Client keeps each hold's
//     validity deadline at send time + lease − max(SafetyMargin, drift
//     allowance), measured from when the request was sent: that is
//     lease − elapsed − drift counted from the answer, as Redlock says.
//   - Renew sends one Renew call per member for the whole batch the
//     watchdog hands it, to all members at once. A lock renewed by a
//     majority is renewed; one the members report gone or taken on more
//     than a minority is lost (taken over, or released elsewhere); any other
//     shortfall is an unknown outcome, and the Client tells the holder the
//     lock is lost (store unreachable) when its validity deadline passes
//     without a renewal reaching a majority — before any member can free it.
//     A member that lost a lock the majority still holds (it was paused or
//     cut off past the lease, or restarted) is asked to take it again at the
//     next renewal, unless a release of the lock has begun: a renewal in
//     flight when the holder unlocks never takes the lock again on a member
//     the release freed.
//   - Release releases on every member at once. It succeeds when every
//     member answered and a majority released the lock (so with a member
//     down, each release's outcome is unknown, and a leash Client goes on
//     releasing in the background until the lease would have ended); when
//     every member answered but fewer released it,
//     it reports the lock not held, and a leash Client tells the holder it
//     lost the lock (released elsewhere), as on a single store; when a
//     member did not answer, the outcome is unknown.
//
// # Restarted members
//
// A member that restarts without persistence forgets the locks it granted;
// if it granted the lock again at once, the old holder (still on the rest
// of its majority) and a new one could both hold a majority (Kleppmann's
// counter-example). The quorum relies on each member to refuse this:
// redisstore's restart grace (redisstore.Options.RestartGrace, on by
// default) grants nothing until a restarted server has been up for a lease,
// by which time every lease it forgot has ended; the refusal counts as one,
// and a quorum refused for that reason reports leash.ErrRestartGrace. A
// member store without such a grace (or one turned off, or a server declared
// fresh after a restart that lost data) brings the double grant back; so
// does a member whose server loses acknowledged writes in other ways.
//
// # What the lock assumes
//
// Mutual exclusion holds while every member's clock runs at most DriftFactor
// faster than the client's, no member's clock is stepped forward, members
// do not forget grants (see above), and the holder checks its hold
// (Hold.Err, Hold.Context) before it acts. A process pause or network delay
// between that check and the action is not covered by any lease: that is
// what fencing tokens are for.
//
// # Fencing tokens
//
// Each member issues, per name, tokens that only grow (redisstore's are
// max(counter + 1, the server's time in µs)). The quorum's token,
// [leash.Hold.Fence], is T, the largest token among the members that
// granted the lock. A later grant need only share one member with an
// earlier one, and that member need not be the one that issued T; so when
// every member is a [driver.FenceRaiser] (memstore and redisstore are;
// [Store.Floors] tells), Acquire, once a majority granted, raises to T the
// fencing counters of as many other granting members as a majority needs
// (one more for each raise that fails, while there is one; never a member
// that refused, which may have issued a smaller token to a contender just
// before), and returns the grant only when a majority have a counter of at
// least T (the members that issued T and those whose raise succeeded) and
// the validity budget is still not spent: one round trip more, to one
// member of three. When the raise reaches no majority, it releases the lock
// everywhere it may have been granted and returns the error; past the
// budget, it releases it and refuses. No grant is handed out whose token a
// later majority might not exceed. A member whose answer to the acquire was
// lost is not counted: it may hold a smaller counter, and need not be part
// of the majority.
//
// What is promised then: the grants of a name carry strictly increasing
// tokens in the order the quorum grants them, whichever majorities make
// them, as long as mutual exclusion holds (see above) and members keep their
// counters. A grant G1 is returned only once a majority R of members that
// granted it have counters of at least its token T; each of them held G1
// while its counter was raised, so it grants anyone again only after that,
// above T; and a later grant G2 is made by a majority, which includes a
// member of R, so G2's token, the largest of its members', is above T. (A
// member of R held G1 while it was raised because the raise ended within
// the validity budget, under the drift assumption above.) A member that
// loses its counter (restart without persistence, failover to a replica the
// raise had not reached, the counter key deleted) breaks this unless its
// tokens come from a clock: a redisstore member
// grants nothing for a lease after a restart (the restart grace), and then
// issues its server's time in µs, larger than T as long as its clock is
// behind no other member's by more than a lease and no clock is stepped
// back (T itself is a member's clock reading, or the counter above one,
// raised by at most one per grant). So with redisstore members, persistence
// off and the restart grace on, tokens keep growing under those clock
// assumptions; with persistence (appendfsync always) they keep growing
// without them.
//
// What is not promised: tokens are not consecutive and not comparable
// across names; a retried acquire of a hold's own lock on a member (the
// renewal that takes back a member that lost the lock) reports the member's
// counter, not the hold's token, which does not change for the hold's life.
// Mutual exclusion itself is what the quorum's leases give (see above):
// fencing only protects a resource from a holder whose lease ran out while
// it was paused, and only a resource that rejects tokens below the highest
// it has seen. Redisstore's tokens are exact below 2^53 (Lua's numbers).
//
// When some member is not a FenceRaiser, the quorum's token is only the
// largest of the granting members', and may go backwards: with counters 10
// and 100 on members A and B, a grant G1 on A and B gets tokens 11 and 101
// (token 101), and a later grant G2 on A and C tokens 12 and 1 (token 12). A
// resource that rejects tokens below the highest it has seen would then
// reject G2's writes and still accept a late write by G1. Without fence
// floors the token of a grant G2 exceeds that of an earlier grant G1 only
// when the member that issued G1's token also granted G2 (always when every
// member grants every lock), or when the members' tokens are clock readings
// that disagree by less than the time between the two grants.
//
// # Capabilities
//
// The Store grants Mutex locks (KindMutex) only: no fair queue, read-write
// locks, semaphores or multi-name acquires. It offers administration
// (driver.Admin: Client.Inspect and Client.ForceUnlock) when every member
// does: a name is held by the owner a majority of members record, List
// lists names a majority lists, and ForceRelease frees the name on every
// member. It is a
// driver.Watcher when enough members are (redisstore is): it wakes waiters
// on any member's release notification, and needs watches on all but a
// minority of members (it waits for that many, and polls otherwise). A
// release notifies on every member that held the lock: the notifications
// are passed on 1–2 ms after the first (a random delay, which also staggers
// the clients a release wakes), and those that arrive meanwhile are merged
// into it, so that a waiter is woken once per release, not once per member,
// and never misses one. It is safe for concurrent use.
package redlock
