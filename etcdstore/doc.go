// Package etcdstore is a leash lock store on etcd (v3 API; tested against
// etcd 3.4 with client v3.5).
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
//	…
//	c, err := leash.New(etcdstore.New(cli, nil), nil)
//
// The caller passes its own *clientv3.Client and keeps ownership of it. The
// Store grants every lock kind — Mutex, FairMutex, RWMutex (with downgrade)
// and Semaphore (KindMutex, KindFair, KindRead, KindWrite, KindPermit, with
// [driver.Withdrawer] and [driver.PermitSetter]) — MultiLock in one
// transaction ([driver.MultiStore]), administration for the leash CLI's
// show, ls and unlock ([driver.Admin]), holder records
// ([driver.ClientRecorder]) and release notifications by watch
// ([driver.Watcher]).
//
// # Key layout
//
// Every key is under Options.Prefix (DefaultPrefix, "leash/"):
//
//	<prefix>lock/<name>            the lock, while held: a JSON value
//	                               {"leash":1,"kind":"mutex","owner":"<client-id>:<n>","lease_ms":30000},
//	                               attached to its holder's etcd lease ("write" for an RWMutex's writer)
//	<prefix>read/<name>\x00<owner>   a reader's lease: as a lock's value, kind "read"
//	<prefix>wmark/<name>\x00<owner>  a waiting writer's mark: as a place's value
//	<prefix>wake/<name>            "leash wake v1", stamped by ForceRelease to wake every waiter
//	<prefix>fence/<name>           "leash fence v1"; its mod revision is the last token granted
//	<prefix>queue/<name>\x00<owner>  a FairMutex waiter's place:
//	                               {"leash":1,"kind":"place","owner":"…","wait_ms":…}
//	<prefix>sem/<name>             a semaphore: {"leash":1,"kind":"semaphore","permits":3}
//	<prefix>permit/<name>\x00<owner> a permit, while held: as a lock's value, kind "permit",
//	                               attached to its holder's etcd lease
//	<prefix>client/<client-id>     a leash Client's holder record (host, pid,
//	                               label, command, its locks), under a lease
//	                               of its own that each publication refreshes
//
// A name is a lock or a semaphore: once its semaphore key exists (it is
// kept, like the fence key), a lock on it is refused with a
// *driver.NotALockError, and the reverse while a lock or a read lease is
// held. Readers exclude every exclusive kind: each exclusive grant compares
// the name's read keys absent (a compare over their range).
//
// A key at one of these places that holds anything else (another
// application's data under the prefix) is refused with a
// *driver.NotALockError that says what is there, and is never changed or
// deleted: every write is a transaction that compares the key with what
// the Store expects, and ForceRelease deletes only keys it has read as the
// Store's. Keys elsewhere under the prefix are never written.
//
// # Leases and sessions
//
// The Store is a [driver.SessionStore]. A lock key is not renewed on its
// own: it is attached to an etcd lease of its holder's leash Client, one
// lease per Client and lease TTL, where the TTL of a lock of lease d is d
// rounded up to a whole second, plus one second (ttl = ceil(d) + 1 s). The
// Client's watchdog keeps every lease of the Client alive with one
// LeaseKeepAliveOnce per lease each renewal round (KeepAlive), not with
// clientv3's background keep-alive: the watchdog decides, and learns at once
// when a keep-alive fails. So 100,000 locks held with one lease cost one
// keep-alive per interval, plus one check of the lease's keys (Renew: a
// LeaseTimeToLive that lists them) that reports a lock deleted or forced
// free on that lock alone. A lock key's presence on the Client's lease is
// taken as its owner's only when the Store's record of the Client's grants
// of the name proves it (two owners of one Client put the same key on the
// same lease when one takes the name after the other lost it); a lock not
// settled so — absent from the lease, or not proved — is read on its own,
// in read-only transactions of 100 key reads, 8 in flight.
//
// Read leases and permits join the session the same way.
//
// When a lease expires or is revoked, etcd deletes every key attached to it,
// and the next keep-alive answers "lease not found". When that was the
// Client's only live lease, KeepAlive returns an error matching
// driver.ErrNotHeld and the core loses every lock at once; otherwise the
// check that follows finds each lock of that lease gone and reports it on
// its own hold, while the locks of the other leases are kept. The Store
// stops keeping a lease alive only when the server answers "lease not
// found" for that lease (a transaction that names two leases, a lock's and
// a queue place's, is followed by a keep-alive of each to learn which), and
// the check reports a lock as held only when its key is on a lease the
// Store keeps alive for the Client, which the server keeps at least the
// lock's lease from the send of the Client's last KeepAlive that succeeded
// (a key on any other lease is reported gone; one whose keep-alive failed,
// or was answered with a TTL shorter than asked, an unknown outcome). So a
// holder never outlives its lease unknowingly: the core counts each lock's
// validity from the send time of the last keep-alive that succeeded, so the
// holder is told before the server's TTL (which starts no earlier) can let
// anyone else in.
//
// Acquire makes the lease last the requested lease from the request at
// least: when the lease's last grant or keep-alive was sent too long ago for
// that, it sends a keep-alive first (or grants a new lease if the old one is
// gone). The extra second of TTL lets Acquires within about a second of a
// keep-alive skip it: locks taken one after another cost about one
// keep-alive a second. A lock whose holder stops therefore ends within its
// lease plus about 2.5 s of the holder's last keep-alive (under two seconds
// of rounding and extra TTL, plus the leader's expiry check, every 500 ms).
//
// # Lease minimum
//
// etcd TTLs are whole seconds, and the server raises a TTL below its
// minimum (1.5 election timeouts, rounded up to a second: 2 s at etcd's
// default election timeout of 1 s) to that minimum. The Store's shortest
// TTL is 2 s, for leases up to one second, which a default server grants as
// asked. On a server with a longer election timeout, a lease whose TTL would
// be raised is refused (an error matching driver.ErrUnsupported that gives
// the shortest lease the server keeps as asked): lock leases must then be at
// least the server's minimum TTL less one second. The refusal comes after
// one grant, which shows the minimum; later requests are refused before any
// round trip.
//
// # Fencing
//
// A grant's fencing token is its lock key's create revision (a reader's, its
// read key's; a permit's, its permit key's): the revision of the
// transaction that created the key. etcd revisions are cluster-wide and
// only grow: every later write, to any key, has a higher one, so each fresh
// grant of a name has a token above every earlier grant of it, whoever held
// it, however it ended (released, expired, forced free). A retry by the
// holder re-puts the key, which keeps its create revision (the same token).
// Revisions are kept in the raft log and the data directory, so they survive
// a member's restart, a leader failover and compaction. The assumption is
// that the cluster's revision never goes back: restoring a snapshot (etcdutl
// snapshot restore) restarts the cluster at the snapshot's revision, and
// tokens granted after the snapshot was taken would be granted again. After
// such a restore, raise the revision past every token issued before (etcdutl
// snapshot restore --bump-revision, in the releases that have it), or keep
// the fenced resources from trusting tokens issued before it.
//
// Inspect reports the last token from the fence key's mod revision (the
// fence key is written with each fresh grant, of a lock or a permit), so it
// is known after the lock is released. A permit's token is its permit key's
// create revision.
//
// A permit is granted in two round trips: a read of the semaphore and its
// permits, then a transaction that puts the permit if no permit key changed
// since the read (a compare over the permits' range) and the semaphore key
// is as read.
//
// # Restarts and failover
//
// A member's restart on its data directory, and a leader's failover, keep
// every key, revision and lease; a new leader extends every lease by its TTL
// when it takes over, so holders keep their locks unless they could reach no
// member for longer than their validity (then they are told, reason
// "unreachable", and release what the session would otherwise keep). A
// member cut off from the leader can answer neither a write nor a read (the
// Store's reads are linearizable), so it never answers from a stale copy. Watches are made
// with WithRequireLeader: one whose member loses its leader is cancelled,
// every waiter is woken (WakeAll), and the watch is set up again from the
// revision after the last one it saw (retried after 100 ms, doubling up to
// 5 s while the member stays cut off).
//
// etcd keeps every revision until it is compacted, and each acquire and
// release writes one: run it with --auto-compaction-retention, as for any
// write-heavy use. The Store needs no history: tokens are the keys' current
// create revisions, and a watch that compaction overtakes wakes everyone and
// starts again.
//
// # Waiting
//
// Waiters are woken by etcd watches, never by polling: a watch of the lock
// key, filtered to deletions (a release, a force release, the holder's
// lease ending), wakes one waiter per Client; for a semaphore, a watch of its
// permits does the same, and a change of its permit count wakes every
// waiter. A read-write lock's waiters are woken by a watch of its lock key,
// read keys and writer marks: after a deletion, as the keys were at its
// revision, a waiting writer when the lock is free and a writer is marked
// (WakeWriter), the readers when none is (WakeReaders). Watch returns once the server
// has created the watch, so no deletion after it is missed, or, when no
// member answers (a partition), with its context's error once that context
// ends. A creation unanswered for 10 s is asked again; clientv3 creates a
// stream's watches one at a time, so one whose request or answer was lost
// would hold every later one, and a creation unanswered for 2 s or more
// moves new watches to a new gRPC stream (at most once per 10 s, doubling
// up to 2 minutes while the new stream answers none). A watch that breaks,
// or whose revision was compacted, wakes every waiter and is set up again.
//
// A FairMutex follows etcd's queue recipe in the form the leash contract
// gives it (the lock is granted only to the head of the name's queue): each
// waiter has a place key, ordered by its create revision, which a new
// attempt refreshes without moving it; the head (the oldest place) is
// granted in one transaction that compares the lock key absent, the place
// unchanged and every place's create revision at or above the head's (and no
// reader or semaphore, as for every exclusive grant). One watch per name (of
// the lock key, its readers and the places) replaces etcd's "each
// waiter watches its predecessor": on a deletion it reads the queue's head
// and wakes only its waiter (WakeHead), which the core routes to the one
// goroutine that waits in that place. A place lasts its waiter's Wait from
// its last attempt, under a lease of the waiter's Client apart from its
// locks' (so its keep-alives do not keep a place of a waiter that stopped),
// and Withdraw deletes it.
//
// # Opening by URL
//
// Importing the package registers the etcd and etcds schemes with
// driver.Register, so that driver.Open and the leash CLI open
//
//	etcd://[user:password@]host[:port][,host[:port]…][/][?prefix=P][&dial_timeout=D]
//	etcds://…[?ca_file=F][&cert_file=F&key_file=F]
//
// A host without a port is on 2379; an IPv6 address goes in brackets.
// etcds:// uses TLS (the system's CAs unless ca_file is given; cert_file
// and key_file for servers that verify clients). user:password is an etcd
// user (etcd auth), percent-encoded; with it, opening fetches an auth token
// from the server. prefix is Options.Prefix. A URL that cannot name a store
// is an error matching driver.ErrBadURL, and no error shows the password.
package etcdstore
