package testserver

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// NewReplica starts a redis-server for the test that replicates the server at
// addr, and returns it once that server has the replica's acknowledgement of
// a write made after the first sync: until a replica acknowledges, WAIT
// counts it out.
func NewReplica(t TB, addr string) *Redis {
	t.Helper()
	r := NewRedis(t, RedisOptions{ReplicaOf: addr})
	acked := regexp.MustCompile(fmt.Sprintf(`port=%d,state=online,offset=(\d+)`, r.Port))
	written := regexp.MustCompile(`master_repl_offset:(\d+)`)
	offset := func(re *regexp.Regexp) int64 {
		info, err := query(addr, "INFO replication")
		if err != nil {
			return -1
		}
		m := re.FindStringSubmatch(info)
		if m == nil {
			return -1
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	wait := func(what string, cond func() bool) {
		if !eventually(cond) {
			t.Fatalf("testserver: replica %s of %s: no %s within %v: %s", r.Addr, addr, what, startTimeout, r.logTail())
		}
	}
	wait("first sync", func() bool { return offset(acked) >= 0 })
	if _, err := query(addr, "INCR testserver:replication-probe"); err != nil {
		t.Fatalf("testserver: write to %s: %v", addr, err)
	}
	probe := offset(written)
	wait("acknowledgement of a write", func() bool { return offset(acked) >= probe })
	return r
}

// query sends one command, its words separated by spaces, and returns its
// reply: a status, an integer or a bulk string (see call), within a second.
func query(addr, cmd string) (string, error) {
	v, err := callWithin(time.Second, addr, strings.Fields(cmd)...)
	if err != nil {
		return "", err
	}
	reply, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("testserver: %s answered %v", cmd, v)
	}
	return reply, nil
}
