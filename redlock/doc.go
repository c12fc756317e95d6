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
//     every member that granted it or whose answer was lost, so a partial
//     grant blocks no one. Contenders that split the members between them
//     try again after a random pause of a few milliseconds, asking one
//     member first and the others only if it grants, so that the next
//     round has a winner.
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
//     next renewal.
//   - Release releases on every member at once.
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
// # Fencing tokens: what a quorum of independent counters can promise
//
// Each member issues, per name, tokens that only grow (redisstore's are
// max(counter + 1, the server's time in µs), which keep growing across a
// restart that lost the counter). The quorum's token, [leash.Hold.Fence], is
// the largest token among the members that granted the lock. Independent
// counters cannot do better without consensus (Kleppmann): a later grant is
// only guaranteed to share one member with an earlier one, and that member
// need not be the one whose token was the largest. So the token of grant
// G2 exceeds that of an earlier grant G1 when
//
//   - the member that issued G1's token also granted G2 — always, when every
//     member grants every lock (no member down, cut off or slower than the
//     member timeout); or
//   - the members' tokens are clock readings (redisstore) and the members'
//     clocks disagree by less than the time between the two grants.
//
// It may be smaller otherwise: with counters 10 and 100 on members A and B
// (grant G1 on A and B, token 100), a grant G2 on A and C may get tokens 11
// and 50, token 50. A resource that rejects tokens below the highest it has
// seen would then reject G2's writes and still accept a late write by G1.
// If your resource's safety depends on fencing, use a store whose tokens come
// from one consensus log (etcdstore, zkstore) or one database (pgstore,
// mysqlstore), not a quorum of independent servers.
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
// minority of members (it waits for that many, and polls otherwise). It is
// safe for concurrent use.
package redlock
