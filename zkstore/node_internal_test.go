package zkstore

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// FuzzNodeName: every owner's node name parses back to the node it names,
// and parseNode never accepts what nodeName cannot make.
func FuzzNodeName(f *testing.F) {
	for _, s := range []string{"0b7e…:1", "0b7e2a1c-0000-4000-8000-000000000001:12@job/7", "-", "%2F", ".", ""} {
		f.Add(s, uint64(42), int64(7))
		f.Add(s+"-", uint64(42), int64(-2147483648)) // the sequence wrapped
		f.Add(s, uint64(42), int64(-1))
	}
	f.Fuzz(func(t *testing.T, owner string, epoch uint64, seq int64) {
		if owner == "" || seq != int64(int32(seq)) {
			return
		}
		for k := range nodePrefixes {
			name := nodeName(nodeKind(k), epoch, owner) + fmt.Sprintf("%010d", seq) // as ZooKeeper (Java) formats it
			n, ok := parseNode(name)
			if !ok || n.owner != owner || n.epoch != epoch || n.seq != seq || n.kind != nodeKind(k) {
				t.Fatalf("parseNode(%q) = %+v, %v; want owner %q epoch %x seq %d kind %d", name, n, ok, owner, epoch, seq, k)
			}
			if strings.Contains(name, "/") {
				t.Fatalf("nodeName(%q) = %q holds a '/'", owner, name)
			}
		}
	})
}

// FuzzParseNode: parseNode never panics, and what it accepts is what
// nodeName makes of it.
func FuzzParseNode(f *testing.F) {
	f.Add("lock-000000000000002a-a%3Ab:1-0000000007")
	f.Add("queue-0000000000000000-x-0000000001")
	f.Add("settings")
	f.Fuzz(func(t *testing.T, name string) {
		n, ok := parseNode(name)
		if !ok {
			return
		}
		if again := nodeName(n.kind, n.epoch, n.owner); !strings.HasPrefix(name, again) {
			t.Fatalf("parseNode(%q) = %+v, which nodeName makes %q", name, n, again)
		}
	})
}

// FuzzData: node and directory data parse back to what was
// written, and their parsers never panic.
func FuzzData(f *testing.F) {
	f.Add(int64(300), uint64(42), 3, []byte("leash lock node v1 300"))
	f.Fuzz(func(t *testing.T, ms int64, _ uint64, permits int, junk []byte) {
		parseNodeData(nkLock, junk)
		parseNodeData(nkQueue, junk)
		parseDirData(junk)
		if ms > 0 && ms < 1<<40 {
			if d, ok := parseNodeData(nkRead, nodeData(nkRead, time.Duration(ms)*time.Millisecond)); !ok || d.Milliseconds() != ms {
				t.Fatalf("node data of %dms parses as %v, %v", ms, d, ok)
			}
		}
		if permits >= 0 {
			if sem, n, ok := parseDirData(semData(permits)); !ok || !sem || n != permits {
				t.Fatalf("semaphore data of %d parses as %v, %d, %v", permits, sem, n, ok)
			}
		}
	})
}
