package zkstore

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leash-go/leash/driver"
)

// The data of the znodes the Store keeps, by which it recognises them: a
// znode without it is not leash's, and the Store refuses to touch it.
var (
	locksMarker   = []byte("leash locks v1")
	clientsMarker = []byte("leash clients v1")
	clockMarker   = []byte("leash clock v1")
	recordsMarker = []byte("leash records v1")
	// dirMarker is the data of a lock directory, Root/locks/<name>.
	dirMarker = []byte("leash lock v1")
)

const (
	// semPrefix starts the data of a semaphore's directory, followed by its
	// permit count.
	semPrefix = "leash semaphore v1 "
	// holdDataPrefix starts the data of a hold's node, followed by its
	// lease in milliseconds.
	holdDataPrefix = "leash lock node v1 "
	// placeDataPrefix starts the data of a waiting place's node, followed
	// by how long it lasts without a new attempt, in milliseconds.
	placeDataPrefix = "leash place v1 "
	// seqLen is the length of the sequence number ZooKeeper appends to a
	// sequential node's name.
	seqLen = 10
)

// semData is the data of a semaphore's directory.
func semData(permits int) []byte { return []byte(semPrefix + strconv.Itoa(permits)) }

// parseDirData says what a lock directory's data makes it: a lock (sem
// false), a semaphore of permits, or, ok false, not leash's.
func parseDirData(b []byte) (sem bool, permits int, ok bool) {
	if string(b) == string(dirMarker) {
		return false, 0, true
	}
	rest, found := strings.CutPrefix(string(b), semPrefix)
	if !found {
		return false, 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 {
		return false, 0, false
	}
	return true, n, true
}

// A nodeKind is what a lock directory's child is, by its name's prefix.
type nodeKind uint8

const (
	nkLock   nodeKind = iota // "lock-": the exclusive hold of a Mutex or FairMutex
	nkWrite                  // "write-": the exclusive hold of an RWMutex writer
	nkRead                   // "read-": a reader's shared hold
	nkPermit                 // "permit-": one of a semaphore's permits
	nkQueue                  // "queue-": a place in the fair queue
	nkWaitW                  // "waitw-": a waiting writer's mark
)

var nodePrefixes = [...]string{nkLock: "lock-", nkWrite: "write-", nkRead: "read-", nkPermit: "permit-", nkQueue: "queue-", nkWaitW: "waitw-"}

// hold reports whether the node is a hold (it has a lease, kept alive by
// its client's session), not a waiting place (kept by its own attempts).
func (k nodeKind) hold() bool { return k <= nkPermit }

// exclusive reports whether the node is an exclusive hold.
func (k nodeKind) exclusive() bool { return k == nkLock || k == nkWrite }

// driverKind is the lock kind of a hold.
func (k nodeKind) driverKind() driver.Kind {
	switch k {
	case nkWrite:
		return driver.KindWrite
	case nkRead:
		return driver.KindRead
	case nkPermit:
		return driver.KindPermit
	}
	return driver.KindMutex
}

// holdKind is the node kind of a hold of kind k.
func holdKind(k driver.Kind) nodeKind {
	switch k {
	case driver.KindWrite:
		return nkWrite
	case driver.KindRead:
		return nkRead
	case driver.KindPermit:
		return nkPermit
	}
	return nkLock
}

// A lockNode is a child of a lock directory, parsed from its name:
// "<kind>-<epoch>-<escaped owner>-<sequence>", the epoch being the id of
// the ZooKeeper session of the owner's Client that created the node (16 hex
// digits), and the sequence ZooKeeper's, signed.
type lockNode struct {
	name  string
	kind  nodeKind
	epoch uint64
	owner string
	seq   int64
}

// nodeName returns the name a node is created with, before ZooKeeper
// appends its sequence number. The owner's segment never ends in '-' (it is
// escaped, "%2D"), so that a negative sequence number ("-…") cannot be read
// as part of it.
func nodeName(kind nodeKind, epoch uint64, owner string) string {
	return fmt.Sprintf("%s%016x-%s-", nodePrefixes[kind], epoch, ownerSegment(owner))
}

// ownerSegment escapes an owner for a node name: escapeSegment, and a
// final '-' as "%2D".
func ownerSegment(owner string) string {
	e := escapeSegment(owner)
	if strings.HasSuffix(e, "-") {
		e = e[:len(e)-1] + "%2D"
	}
	return e
}

// cutSeq splits the sequence number ZooKeeper appended from a node name's
// rest: it formats the parent's int32 change count with %010d, which past
// 2^31 wraps and is negative: '-' and nine or ten digits.
func cutSeq(rest string) (head string, seq int64, ok bool) {
	digits := func(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
	for _, n := range []int{seqLen, seqLen + 1} { // "-" and 9 or 10 digits
		if i := len(rest) - n; i >= 2 && rest[i-1] == '-' && rest[i] == '-' && digits(rest[i+1:]) {
			v, err := strconv.ParseInt(rest[i:], 10, 32)
			return rest[:i-1], v, err == nil && v < 0
		}
	}
	if i := len(rest) - seqLen; i >= 1 && rest[i-1] == '-' && digits(rest[i:]) {
		v, err := strconv.ParseInt(rest[i:], 10, 32)
		return rest[:i-1], v, err == nil && v >= 0
	}
	return "", 0, false
}

// parseNode parses a lock directory's child; ok is false for a name the
// Store does not create.
func parseNode(name string) (lockNode, bool) {
	for k, p := range nodePrefixes {
		rest, ok := strings.CutPrefix(name, p)
		if !ok {
			continue
		}
		head, seq, ok := cutSeq(rest)
		if !ok || len(head) < 16+1+1 || head[16] != '-' {
			return lockNode{}, false
		}
		e := head[:16]
		if strings.Trim(e, "0123456789abcdef") != "" {
			return lockNode{}, false // only what nodeName and ZooKeeper write
		}
		epoch, err := strconv.ParseUint(e, 16, 64)
		if err != nil {
			return lockNode{}, false
		}
		seg := head[17:]
		owner, err := url.PathUnescape(seg)
		if err != nil || owner == "" || ownerSegment(owner) != seg {
			return lockNode{}, false
		}
		return lockNode{name: name, kind: nodeKind(k), epoch: epoch, owner: owner, seq: seq}, true
	}
	return lockNode{}, false
}

// parseChildren parses a lock directory's children, in sequence order (which
// is creation order until the sequence wraps past 2^31: judge orders nodes
// by their czxid); bad is the first name that is not a lock node's.
func parseChildren(children []string) (nodes []lockNode, bad string) {
	nodes = make([]lockNode, 0, len(children))
	for _, c := range children {
		n, ok := parseNode(c)
		if !ok {
			return nil, c
		}
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b lockNode) int { return cmp.Compare(a.seq, b.seq) })
	return nodes, ""
}

// nodeData is the data of a node: a hold's lease, or a place's wait.
func nodeData(kind nodeKind, d time.Duration) []byte {
	p := holdDataPrefix
	if !kind.hold() {
		p = placeDataPrefix
	}
	return []byte(p + strconv.FormatInt(max(d.Milliseconds(), 1), 10))
}

// parseNodeData returns the duration in a node's data.
func parseNodeData(kind nodeKind, b []byte) (time.Duration, bool) {
	p := holdDataPrefix
	if !kind.hold() {
		p = placeDataPrefix
	}
	rest, ok := strings.CutPrefix(string(b), p)
	if !ok {
		return 0, false
	}
	ms, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || ms <= 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
