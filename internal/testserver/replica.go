package testserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
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

// query sends one inline command and returns its reply: a status, an
// integer or a bulk string.
func query(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"), strings.HasPrefix(line, ":"):
		return line[1:], nil
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("testserver: %s answered %q", cmd, line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("testserver: %s answered %q", cmd, line)
}
