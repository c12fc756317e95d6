package zkstore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The data of the znodes the Store keeps, by which it recognises them: a
// znode without it is not leash's, and the Store refuses to touch it.
var (
	locksMarker   = []byte("leash locks v1")
	clientsMarker = []byte("leash clients v1")
	clockMarker   = []byte("leash clock v1")
	// dirMarker is the data of a lock directory, Root/locks/<name>.
	dirMarker = []byte("leash lock v1")
)

const (
	// nodePrefix starts the name of every lock node.
	nodePrefix = "lock-"
	// nodeDataPrefix starts the data of every lock node.
	nodeDataPrefix = "leash lock node v1 "
	// sessionDataPrefix starts the data of every session node.
	sessionDataPrefix = "leash session v1 "
	// seqLen is the length of the sequence number ZooKeeper appends to a
	// sequential node's name.
	seqLen = 10
)

// A lockNode is a child of a lock directory, parsed from its name:
// "lock-<epoch>-<escaped owner>-<sequence>", the epoch being the session
// epoch of the owner's client (16 hex digits) when the node was created.
type lockNode struct {
	name  string
	epoch uint64
	owner string
	seq   int64
}

// nodeName returns the name a lock node of owner is created with, before
// ZooKeeper appends its sequence number.
func nodeName(epoch uint64, owner string) string {
	return fmt.Sprintf("%s%016x-%s-", nodePrefix, epoch, escapeSegment(owner))
}

// parseNode parses a lock directory's child; ok is false for a name the
// Store does not create.
func parseNode(name string) (lockNode, bool) {
	rest, ok := strings.CutPrefix(name, nodePrefix)
	if !ok || len(rest) < 16+1+1+1+seqLen || rest[16] != '-' || rest[len(rest)-seqLen-1] != '-' {
		return lockNode{}, false
	}
	epoch, err := strconv.ParseUint(rest[:16], 16, 64)
	if err != nil {
		return lockNode{}, false
	}
	seq, err := strconv.ParseInt(rest[len(rest)-seqLen:], 10, 64)
	if err != nil || seq < 0 {
		return lockNode{}, false
	}
	owner, ok := unescapeSegment(rest[17 : len(rest)-seqLen-1])
	if !ok || owner == "" {
		return lockNode{}, false
	}
	return lockNode{name: name, epoch: epoch, owner: owner, seq: seq}, true
}

// parseChildren parses a lock directory's children, in sequence order; bad
// is the first name that is not a lock node's.
func parseChildren(children []string) (nodes []lockNode, bad string) {
	nodes = make([]lockNode, 0, len(children))
	for _, c := range children {
		n, ok := parseNode(c)
		if !ok {
			return nil, c
		}
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b lockNode) int { return int(a.seq - b.seq) })
	return nodes, ""
}

// nodeData is the data of a lock node: its lease.
func nodeData(lease time.Duration) []byte {
	return []byte(nodeDataPrefix + strconv.FormatInt(lease.Milliseconds(), 10))
}

// parseNodeData returns the lease in a lock node's data.
func parseNodeData(b []byte) (time.Duration, bool) {
	rest, ok := strings.CutPrefix(string(b), nodeDataPrefix)
	if !ok {
		return 0, false
	}
	ms, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || ms <= 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// sessionData is the data of a client's session node: its epoch and its
// time to live in milliseconds, the longest lease of a lock it kept.
func sessionData(epoch uint64, ttl int64) []byte {
	return []byte(fmt.Sprintf("%s%016x %d", sessionDataPrefix, epoch, ttl))
}

// parseSessionData parses a session node's data.
func parseSessionData(b []byte) (epoch uint64, ttl int64, ok bool) {
	rest, ok := strings.CutPrefix(string(b), sessionDataPrefix)
	if !ok {
		return 0, 0, false
	}
	e, t, ok := strings.Cut(rest, " ")
	if !ok {
		return 0, 0, false
	}
	epoch, err1 := strconv.ParseUint(e, 16, 64)
	ttl, err2 := strconv.ParseInt(t, 10, 64)
	if err1 != nil || err2 != nil || epoch == 0 || ttl <= 0 {
		return 0, 0, false
	}
	return epoch, ttl, true
}
