// Package zkstore is a leash store on ZooKeeper, through
// github.com/go-zookeeper/zk: every lock kind (Mutex, FairMutex, RWMutex,
// Semaphore), MultiLock, release notifications, administration (the leash
// CLI's show, ls and unlock), holder records, and session renewal — one
// keep-alive per client renews all of its locks.
//
//	s, err := zkstore.Dial([]string{"zk1:2181", "zk2:2181", "zk3:2181"}, nil)
//	if err != nil { … }
//	c, err := leash.New(s, nil) // Close the Client, then the Store
//
// New takes a connection of your own (zk.Connect) instead; give it the
// session timeout the connection negotiated (Options.SessionTimeout).
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
//	/leash/clients/<client id>          ephemeral: a leash Client's session node;
//	                                    data "leash session v1 <epoch> <ttl in ms>"
//	/leash/clock                        written to read the server's clock
//	/leash/records/<client id>          ephemeral: the Client's holder record (JSON)
//
// A lock name, an owner and a client id each become one znode name by
// url.PathEscape ("/" is "%2F", "." and ".." are "%2E" and "%2E%2E"), so
// every name leash accepts maps onto one directory. <e> is the epoch of the
// owner's session node (16 hex digits), <seq> ZooKeeper's sequence number.
//
// The Store recognises its znodes by these names and data, and refuses
// anything else with a *driver.NotALockError saying what is there: a
// directory without leash's data, a child that is not a leash node. It never
// deletes or changes such a znode, and List leaves it out. The Store never
// deletes a lock directory, so there is one persistent znode per name ever
// locked; everything below them is ephemeral and goes with its session. An
// operator may delete an empty directory (ZooKeeper refuses to delete one
// that is not) of a name no one uses: fencing tokens are zxids, which keep
// growing whatever happens to the directory.
//
// # Sessions and leases
//
// A Store has one ZooKeeper session (its connection's), and every lock it
// grants is an ephemeral node of that session: when the session ends —
// Close, or the server expiring it after a partition or a crash — every
// lock goes at once, and every watcher is woken.
//
// The Store is a [driver.SessionStore]: each leash Client (each client id,
// see driver.OwnerClient) has a session node, and the Client's watchdog
// calls KeepAlive once per renewal round, which sets that node's data: one
// write, answered only while the ZooKeeper session lives, whose
// modification time (the server's clock) is the Client's last keep-alive.
// A lock is held while its node exists and less than its lease has passed
// since the Client's last keep-alive or the lock's grant (or a retried
// acquire), whichever is later. So a lock ends when its
// holder stops renewing it even while the process's ZooKeeper connection
// still heartbeats (a stuck watchdog, a lock whose hold the Client gave up),
// as on every other store: a lock never outlives the lease its holder counts.
// The next acquirer judges that: it reads the holder's node, its session
// node and the server's clock, and deletes a lock whose lease ran out in
// its own grant, on the condition that the session node has not changed
// (a keep-alive in between wins). A grant only checks the session node's
// version (creating the node for a Client's first lock, raising its time
// to live for a longer lease than any before), so a Client's concurrent
// grants do not conflict.
//
// KeepAlive fails at once, outcome unknown, while the Store is not
// connected: the Client keeps its holds until their validity deadline (the
// send time of the last successful keep-alive plus the lease minus the
// safety margin) and tells every holder, before the server can expire the
// session, since Acquire refuses a lease longer than the session timeout. It
// returns an error matching driver.ErrNotHeld when the client has no
// session node (never held a lock here, or the ZooKeeper session expired and
// took it) or when its previous keep-alive is older than its longest lease;
// a session node that lapsed is deleted, and, since every hold node names
// its session's random epoch, its holds never come back, even if not yet
// deleted. Renew checks each lock (its node, its epoch, its lease) and
// extends nothing.
//
// What happens when things fail:
//
//   - A reconnect within the session timeout loses nothing: the session and
//     its nodes live on, and go-zookeeper re-sets the watches (a release
//     missed meanwhile is delivered).
//   - A partition longer than lease − margin: every holder is told
//     (leash.ReasonUnreachable) before its lease can run out on the server;
//     other clients get the lock once it has.
//   - Session expiry: the server deletes every node of the session, waiters
//     are woken, go-zookeeper starts a new session, the next KeepAlive reports
//     ErrNotHeld and every hold of the Client is lost.
//   - Leader loss: the session survives the election when the Store reaches
//     a surviving server within the session timeout; writes (keep-alives,
//     grants) wait for the new leader. A hold survives when that takes less
//     than lease − margin, and its holder is told otherwise; no lock is
//     granted twice. Lease times are the leader's clock (znode modification
//     times), so keep the servers' clocks synchronised: after a failover a
//     skew between the old and the new leader's clocks shortens or lengthens
//     what others judge, and the Client's safety margin must cover it.
//
// # Lease limits
//
// A lock cannot outlive its session, which the server expires one session
// timeout after it last heard from the Store: Acquire refuses, with an error
// matching driver.ErrUnsupported that says so, a lease longer than the
// session timeout. That is the timeout the server granted (Dial reads it from
// the connection handshake; the server clamps the one asked for to its
// [minSessionTimeout, maxSessionTimeout], by default 2 to 20 ticks of 2 s),
// or Options.SessionTimeout for New. DefaultSessionTimeout, 40 s, covers
// leash's default 30 s lease. Leases have no lower bound but the
// millisecond: they are judged by znode times, not by session expiry.
//
// # Waiting
//
// A refused Mutex acquire leaves nothing behind (it writes only the clock
// node). A FairMutex waiter's place, as in the ZooKeeper lock recipe, is an
// ephemeral sequential node: the queue is in sequence order, a place lasts
// req.Wait after each attempt (its modification time), and Withdraw deletes
// it; the head is the oldest live place. An RWMutex writer that waits
// leaves a mark the same way, which keeps new readers out. A semaphore
// grants while fewer live permit nodes than its count exist.
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
// A grant is one multi-operation that bumps the lock directory's data
// version (a compare-and-set: of two racing acquirers one wins), deletes
// dead nodes, checks (or creates) the session node and creates the hold
// node. The
// fencing token is that operation's zxid: the hold node's czxid, and the
// directory's mzxid, which Inspect reports as the last token (for a
// semaphore, the zxid of its last grant or resize). A zxid is
// ensemble-wide and only grows — its high 32 bits are the leader's epoch,
// which every election increments — so tokens keep growing across leader
// changes and whatever happens to the directory. The sequence number was not
// chosen: it is the parent's count of child changes (waiting places' too),
// and starts again at 0 if the parent is deleted and created again.
//
// # Costs
//
// An uncontended acquire is two round trips (the directory's children, then
// the multi-operation; one more read when the directory's data changed since
// the Store last saw it, and one for a Client's first lock, its session
// node); a release two (children, delete). A contended
// acquire adds one round of pipelined reads of the holders and one write to
// the clock node. A renewal round is one write per Client (KeepAlive) and,
// for Renew's check, one write to the clock node and one pipelined read per
// lock the Store granted (two for a lock it did not: its directory first).
// BenchmarkLockUnlock and BenchmarkRenewalRound10k measure both.
//
// # Opening by URL
//
// Importing the package registers the zk scheme with driver.Register, so
// driver.Open and the leash CLI open
//
//	zk://[user:password@]host:port[,host:port…][/root][?session_timeout=40s]
//
// with Dial: the servers, the root (default DefaultRoot) and the session
// timeout to ask for (default DefaultSessionTimeout). User information is
// sent as digest credentials (AddAuth "digest", again after every
// reconnect); the Store's znodes get the world ACL, so digest credentials
// serve servers that require authentication, not ACLs on the locks. No
// error shows the password. ParseURL parses such a URL without connecting.
package zkstore
