// Package zkstore is a leash store on ZooKeeper, through
// github.com/go-zookeeper/zk: every lock kind (Mutex, FairMutex, RWMutex,
// Semaphore), MultiLock, release notifications, administration (the leash
// CLI's show, ls and unlock), holder records, scheduled jobs' claims and
// run records ([driver.JobStore], for package schedule and leash cron), and
// session renewal — each
// Client's locks are ephemeral nodes of a ZooKeeper session of its own,
// and one keep-alive per Client renews all of them.
//
//	s, err := zkstore.Dial([]string{"zk1:2181", "zk2:2181", "zk3:2181"}, nil)
//	if err != nil { … }
//	c, err := leash.New(s, nil) // Close the Client, then the Store
//
// New takes a connection of your own (zk.Connect) for reads, watches and
// administration, and the servers to open each Client's session on
// (Options.Servers).
//
// # Layout
//
// Everything lives under a root znode, Options.Root (default "/leash"):
//
//	/leash/locks/<name>                 persistent: one directory per lock name;
//	                                    data "leash lock v1", or "leash semaphore v1 <permits>"
//	/leash/locks/<name>/lock-<e>-<owner>-<seq>    ephemeral sequential: a Mutex or FairMutex hold
//	/leash/locks/<name>/write-…  read-…  permit-… an RWMutex writer, a reader, a semaphore permit;
//	                                    data "leash lock node v1 <lease in ms>"
//	/leash/locks/<name>/queue-…  waitw-…          a FairMutex waiter's place, a waiting writer's
//	                                    mark; data "leash place v1 <wait in ms>"
//	/leash/clients                      written by every keep-alive
//	/leash/clock                        written to read the server's clock (places, records)
//	/leash/records/<client id>          ephemeral: the Client's holder record (JSON)
//	/leash/jobs                         data "leash jobs v1"
//	/leash/jobs/<job>                   persistent: a scheduled job's latest claim;
//	                                    data "leash job v1 " and JSON
//	/leash/jobs/<job>/run-<seq>         persistent: one of its last run records;
//	                                    data "leash run v1 " and JSON
//
// A lock name, an owner and a client id each become one znode name by
// url.PathEscape ("/" is "%2F", "." and ".." are "%2E" and "%2E%2E"; in a
// node's name an owner's final "-" is "%2D"), so every name leash accepts
// maps onto one directory. <e> is the id of the ZooKeeper session that
// created the node (16 hex digits), <seq> ZooKeeper's sequence number,
// which past 2^31 changes of a directory is negative ("-2147483648"): the
// Store accepts it, and orders nodes by their creation zxid.
//
// The Store recognises its znodes by these names and data, and refuses
// anything else with a *driver.NotALockError saying what is there: a
// directory without leash's data, a child that is not a leash node. It never
// deletes or changes such a znode (Release, Withdraw and ForceRelease read
// a node's data before deleting it, at the version read), and List leaves
// it out. The Store never deletes a lock directory, so there is one
// persistent znode per name ever locked; everything below them is
// ephemeral and goes with its session. An operator may delete an empty
// directory (ZooKeeper refuses to delete one that is not) of a name no one
// uses: fencing tokens are zxids, which keep growing whatever happens to
// the directory.
//
// # The session is the lease
//
// Each leash Client (each client id, see driver.OwnerClient) has a
// ZooKeeper session of its own, which the Store opens on the Client's first
// Acquire, on a connection of its own; the Store's own session (Conn) only
// reads, watches and administers. Every hold, place and mark of the Client
// is an ephemeral node of its session, and a lock is held exactly while its
// node exists. No decision about a lock reads a time the server wrote: a
// hold ends only when its node is deleted (Release, ForceRelease) or its
// session ends, and ZooKeeper's leader expires a session by its monotonic
// clock, one session timeout T after it last heard of the client (a
// failover only extends that). So the Store assumes nothing about the
// servers' wall clocks.
//
// The leader hears of a request to a follower only when it next pings that
// follower (every half tick), not when the follower forwards a write: a
// keep-alive that a follower commits does not tell when the leader will
// expire the session, and if that follower is cut off from the leader
// together with its client just after it, the leader counts T from an
// earlier request. So a keep-alive or a grant counts only when an earlier
// request of the session (a keep-alive, a grant, a heartbeat read that
// each session makes every half of the validity below, or the session's
// creation, which the leader makes) was sent within (T + TickTime)/2
// before it and answered a tick (Options.TickTime, the servers' tickTime)
// before it was sent: the leader heard of that one, and keeps the session
// T after it. Each hold is then valid (T − TickTime)/2 after the keep-alive
// or grant that proved it: the Store is a driver.Drifter whose allowance
// raises the Client's safety margin to lease − (T − TickTime)/2 (11.5 s of
// the default 30 s lease, for the default 40 s timeout and 3 s tick). A
// keep-alive with no such request before it (the Client's process
// stalled) fails, outcome unknown, and extends nothing; the Client tries
// again within an eighth of its renewal interval, and the first keep-alive
// a tick or more after the failed one counts. An acquire on such a session writes on it and waits a
// tick before its grant. The rule assumes the leader pings each follower
// within a tick (its loop pings every half tick); a TickTime longer than
// the servers' allows for the leader's own pauses.
//
// The Store is a [driver.SessionStore]: the Client's watchdog calls
// KeepAlive once per renewal round, one write on the Client's own session
// (it sets /leash/clients to the data it has), which the leader accepts
// only while the session lives. A session ends:
//
//   - when the Store closes it: Close, or one longest lease of the Client
//     (the longest lease it was granted) after its last successful
//     keep-alive or grant, timed by the local monotonic clock (one timer per
//     Client, not per lock). So a Client that stops keeping alive (a stuck
//     watchdog) loses its locks after a lease, while its process still runs,
//     as on every other store; every node goes at once and every waiter is
//     woken. A single lock whose hold the Client gave up while it keeps
//     others is released by the Client (a lock does not expire on its own
//     while its session lives, so leash refuses UnlockAfter here).
//   - when the server expires it: the Client's process is frozen, crashed
//     or cut off for longer than T. Acquire refuses a lease longer than T,
//     and the holder's watchdog counts each hold valid (T − TickTime)/2
//     from the send time of the last keep-alive that proved it (above), so
//     it has told every holder before the leader can expire the session:
//     no lock is granted twice.
//
// KeepAlive fails at once, outcome unknown, while the Client's session is
// not connected; it returns an error matching driver.ErrNotHeld once the
// session ended (and for a client with no session here), and the Client's
// next Acquire opens a new one. Renew checks each lock (its node exists,
// created by the Client's live session) and extends nothing: a lock the
// Store granted by a watch on its node, set on the Client's session by the
// first check's read, which proves the node is there, after one write on the
// session, as long as it has not fired and the connection has not changed
// since it was set (see Store.Renew).
//
// What happens when things fail:
//
//   - A reconnect within T loses nothing: the session and its nodes live
//     on, and go-zookeeper re-sets the watches (a release missed meanwhile
//     is delivered).
//   - A holder frozen (SIGSTOP, a long pause), partitioned or crashed keeps
//     its locks until the server expires its session, at most T after it
//     last heard from it; then every node of the session goes and waiters
//     are woken. That is what a frozen holder costs: others wait up to T,
//     not just a lease.
//   - Leader loss: a session survives the election when its Client reaches
//     a surviving server within T, and the new leader gives every session a
//     full timeout again; writes (keep-alives, grants) wait for it. A hold
//     survives when that takes less than lease − margin, and its holder is
//     told otherwise; no lock is granted twice.
//   - A request made while a session is disconnected waits in
//     go-zookeeper's queue and is sent after the reconnect: the Store checks
//     the session's state before every write, and fails at once while it is
//     disconnected, but a write can still be sent late when the connection
//     drops after that check. A write that lands on a later session of the
//     same connection (after an expiry) is undone: the Store then closes
//     that connection, and its nodes with it.
//
// # Scheduled jobs
//
// Each job operation reads the server's clock first (a write to
// /leash/clock, whose modification time the server stamps), then the
// job's node and its children, decides, and writes with one
// multi-operation conditioned on the job node's data version, which every
// claim and added record bumps; the run record's name is its sequence
// number, so two writers of the same read cannot both create it either. A
// claim that loses a race reads again and is told the tick is taken. Since
// the clock is read before the grant, a claim is never granted before its
// tick less its tolerance by the server's clock; it may be granted up to
// one round trip after its Until. Whether a running record's claimer still
// holds the job's lock is whether a hold node of its Client exists in the
// lock's directory (no time is read for it). AddRuns puts each missed
// tick below the records of later ticks (the claim that found it missed):
// those records take the seqs above it, each deleted at the version read
// and created again in the same multi-operation, so an end recorded on one
// meanwhile makes the operation fail and start over rather than be lost;
// History reads the job's node again after its records, and reads again
// when it changed. Job znodes or children that are not leash's are refused
// with a NotALockError and never changed.
//
// # Lease limits
//
// A lock cannot outlive its session: Acquire refuses, with an error
// matching driver.ErrUnsupported that says so, a lease longer than the
// session timeout. That is the timeout the server granted (the Store reads
// it from each connection's handshake; the server clamps the one asked for,
// Options.SessionTimeout, to its [minSessionTimeout, maxSessionTimeout], by
// default 2 to 20 ticks). DefaultSessionTimeout, 40 s, covers leash's
// default 30 s lease. The Client's margins are set, before any session, for
// the timeout asked for (raised to two ticks); when the server grants a
// shorter one, Acquire also refuses a lease whose hold that timeout would
// not cover for as long as the Client counts it valid. Leases have no lower
// bound but the millisecond.
//
// # Waiting
//
// A refused Mutex acquire leaves nothing behind. A FairMutex waiter's place,
// as in the ZooKeeper lock recipe, is an ephemeral sequential node of the
// waiter's session: the queue is in creation order, a place lasts req.Wait
// after each attempt (its modification time against the server's clock,
// read by a write to /leash/clock: a fairness decision, never a lock's),
// and Withdraw deletes it; the head is the oldest live place. An RWMutex
// writer that waits leaves a mark the same way, which keeps new readers
// out. A semaphore grants while fewer permit nodes than its count exist.
//
// Watch leaves a ZooKeeper watch on the lock's directory, which fires when a
// node comes or goes, and wakes only whom the change concerns: the fair
// queue's new head (WakeHead), as the recipe wakes only a node's successor,
// so there is no herd of retries; the next writer or the readers; one
// waiter per Client for a mutex or a semaphore. One goroutine serves each
// Watch call.
//
// # Fencing
//
// A grant is one multi-operation on the Client's session that bumps the
// lock directory's data version (a compare-and-set: of two racing acquirers
// one wins), deletes lapsed places and creates the hold node. The fencing
// token is that operation's zxid: the hold node's czxid, and the
// directory's mzxid, which Inspect reports as the last token (for a
// semaphore, the zxid of its last grant or resize). A zxid is
// ensemble-wide and only grows — its high 32 bits are the leader's epoch,
// which every election increments — so tokens keep growing across leader
// changes and whatever happens to the directory.
//
// # Costs
//
// Each Client costs one ZooKeeper connection and session, besides the
// Store's own: ZooKeeper limits the connections from one IP address
// (maxClientCnxns, 60 by default), so a host running many Clients on one
// ensemble needs that limit raised. Each session also reads a node every
// (T − TickTime)/4, 9.25 s by default (its heartbeat, see "The session is
// the lease"). An uncontended acquire is two round
// trips (the directory's children, then the multi-operation; one more read
// when the directory's data changed since the Store last saw it), plus, for
// a Client's first lock, the connection and session handshake; a release
// three (children, the node's data, delete). A contended acquire adds one
// round of pipelined reads of the other nodes (and a write to /leash/clock
// when there are waiting places). A renewal round is one write per Client
// (KeepAlive) and, for Renew's check, one more write per Client: a lock
// whose watch is set costs nothing more; one read per lock the Store granted
// whose watch is not set (its first check, after a reconnect, after its
// node changed), two for a lock it did not (its directory first).
// BenchmarkLockUnlock and BenchmarkRenewalRound10k measure both.
//
// # Opening by URL
//
// Importing the package registers the zk scheme with driver.Register, so
// driver.Open and the leash CLI open
//
//	zk://[user:password@]host:port[,host:port…][/root][?session_timeout=40s&tick_time=3s]
//
// with Dial: the servers, the root (default DefaultRoot), the session
// timeout to ask for (default DefaultSessionTimeout) and the servers'
// tickTime (default DefaultTickTime). User information is
// sent as digest credentials (AddAuth "digest", again after every
// reconnect); the Store's znodes get the world ACL, so digest credentials
// serve servers that require authentication, not ACLs on the locks. No
// error shows the password. ParseURL parses such a URL without connecting.
package zkstore
