package etcdstore

// The key spaces below the prefix (see "Key layout" in the package doc).
// A name's own keys are <prefix><space><name>; the keys of its owners
// (places, marks, readers, permits) are <prefix><space><name>\x00<owner>.
const (
	lockSpace   = "lock/"
	fenceSpace  = "fence/"
	semSpace    = "sem/"
	wakeSpace   = "wake/"
	queueSpace  = "queue/"
	markSpace   = "wmark/"
	readSpace   = "read/"
	permitSpace = "permit/"
	clientSpace = "client/"
)

// queueSep ends a name in an owner's key: a control character, which no
// lock name holds, so that one name's keys are never below another's.
const queueSep = "\x00"

// wakeMark is the value of a wake key.
const wakeMark = "leash wake v1"

// key is name's key in space.
func (s *Store) key(space, name string) string { return s.prefix + space + name }

// dir is the prefix of the owners' keys of name in space.
func (s *Store) dir(space, name string) string { return s.prefix + space + name + queueSep }

// lockKey is the key of name's lock.
func (s *Store) lockKey(name string) string { return s.key(lockSpace, name) }

// fenceKey is the key whose mod revision is the last fencing token granted
// for name.
func (s *Store) fenceKey(name string) string { return s.key(fenceSpace, name) }

// semKey is the key of semaphore name: its permit count.
func (s *Store) semKey(name string) string { return s.key(semSpace, name) }

// wakeKey is the key ForceRelease stamps to wake every waiter of a
// read-write lock on name.
func (s *Store) wakeKey(name string) string { return s.key(wakeSpace, name) }

// clientKey is the key of client id's holder record.
func (s *Store) clientKey(id string) string { return s.key(clientSpace, id) }

// queueDir is the prefix of every fair queue place of name.
func (s *Store) queueDir(name string) string { return s.dir(queueSpace, name) }

// placeKey is owner's place in name's fair queue.
func (s *Store) placeKey(name, owner string) string { return s.queueDir(name) + owner }

// markDir is the prefix of every waiting-writer mark of name.
func (s *Store) markDir(name string) string { return s.dir(markSpace, name) }

// markKey is owner's waiting-writer mark on name.
func (s *Store) markKey(name, owner string) string { return s.markDir(name) + owner }

// readDir is the prefix of every read key of name.
func (s *Store) readDir(name string) string { return s.dir(readSpace, name) }

// readKey is owner's read lease of name.
func (s *Store) readKey(name, owner string) string { return s.readDir(name) + owner }

// permitDir is the prefix of every permit key of semaphore name.
func (s *Store) permitDir(name string) string { return s.dir(permitSpace, name) }

// permitKey is owner's permit of semaphore name.
func (s *Store) permitKey(name, owner string) string { return s.permitDir(name) + owner }
