package testserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// NewCluster starts a Redis Cluster of n masters for the test, no replicas,
// the 16384 hash slots split evenly among them in order, and returns them
// once every node reports the cluster ok. Like any new cluster it serves no
// leash lock before its restart grace: a test calls redisstore's MarkFresh.
func NewCluster(t TB, n int) []*Redis {
	t.Helper()
	return NewClusterWith(t, ClusterOptions{Masters: n}).Masters
}

// ClusterOptions configures NewClusterWith.
type ClusterOptions struct {
	// Masters is the number of masters; the 16384 hash slots are split
	// evenly among them in order (master i serves [i*16384/n, (i+1)*16384/n)).
	Masters int
	// Replicas is the number of replicas of each master (0 or more).
	Replicas int
	// NodeTimeout is the cluster-node-timeout: how long a node may be
	// unreachable before its peers fail it and its replica takes over.
	// Default 60s, so that a node paused within a test is not failed.
	NodeTimeout time.Duration
}

// Cluster is a Redis Cluster on loopback, each node a redis-server in its
// own directory. Its node lists are as started: after a failover the
// server in Replicas[i] may be a master (see MasterOf).
type Cluster struct {
	// Masters are the masters as started, in slot order.
	Masters []*Redis
	// Replicas[i] are the replicas started for Masters[i].
	Replicas [][]*Redis
}

// NewClusterWith starts a Redis Cluster for the test and returns it once
// every node agrees on its slots and every replica is in sync with its
// master. It kills every node at cleanup. Like any new cluster it serves no
// leash lock before its restart grace: a test calls redisstore's MarkFresh.
func NewClusterWith(t TB, opts ClusterOptions) *Cluster {
	t.Helper()
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = 60 * time.Second
	}
	start := func() *Redis {
		return NewRedis(t, RedisOptions{Args: []string{
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(opts.NodeTimeout.Milliseconds(), 10),
			// A replica that lost its master for a while may still be
			// promoted: tests decide when failovers happen.
			"--cluster-replica-validity-factor", "0",
		}})
	}
	c := &Cluster{Masters: make([]*Redis, opts.Masters), Replicas: make([][]*Redis, opts.Masters)}
	n := opts.Masters
	for i := range c.Masters {
		c.Masters[i] = start()
		first, last := i*16384/n, (i+1)*16384/n-1
		if _, err := call(c.Masters[i].Addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(first), strconv.Itoa(last)); err != nil {
			t.Fatalf("testserver: cluster node %s: %v", c.Masters[i].Addr, err)
		}
		for range opts.Replicas {
			c.Replicas[i] = append(c.Replicas[i], start())
		}
	}
	nodes := c.Nodes()
	for i, node := range nodes {
		// Distinct config epochs before the nodes meet, as redis-cli
		// --cluster create sets them: otherwise the nodes resolve their
		// collisions by bumping epochs after the replicas have copied
		// their masters', and a replica's forced failover is refused
		// ("slot epoch > reqEpoch").
		if _, err := call(node.Addr, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			t.Fatalf("testserver: cluster node %s: %v", node.Addr, err)
		}
	}
	for _, node := range nodes[1:] {
		if _, err := call(node.Addr, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(nodes[0].Port)); err != nil {
			t.Fatalf("testserver: cluster node %s: %v", node.Addr, err)
		}
	}
	for i, m := range c.Masters {
		id, err := c.ID(m)
		if err != nil {
			t.Fatalf("testserver: %v", err)
		}
		for _, r := range c.Replicas[i] {
			// A replica must know its master before it can replicate it.
			var err error
			if !eventually(func() bool {
				_, err = call(r.Addr, "CLUSTER", "REPLICATE", id)
				return err == nil
			}) {
				t.Fatalf("testserver: cluster replica %s of %s: %v", r.Addr, m.Addr, err)
			}
		}
	}
	if err := c.WaitHealthy(); err != nil {
		t.Fatalf("%v", err)
	}
	return c
}

// Nodes returns every node as started: the masters, then the replicas.
func (c *Cluster) Nodes() []*Redis {
	nodes := append([]*Redis(nil), c.Masters...)
	for _, rs := range c.Replicas {
		nodes = append(nodes, rs...)
	}
	return nodes
}

// Addrs returns the addresses of every node, to seed a cluster client.
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, n := range c.Nodes() {
		addrs = append(addrs, n.Addr)
	}
	return addrs
}

// ID returns a node's cluster node id (CLUSTER MYID).
func (c *Cluster) ID(node *Redis) (string, error) {
	id, err := query(node.Addr, "CLUSTER MYID")
	if err != nil {
		return "", fmt.Errorf("testserver: CLUSTER MYID on %s: %w", node.Addr, err)
	}
	return id, nil
}

// byID returns the node of the cluster with this node id, or nil.
func (c *Cluster) byID(id string) *Redis {
	for _, n := range c.Nodes() {
		if got, err := c.ID(n); err == nil && got == id {
			return n
		}
	}
	return nil
}

// MasterOf returns the node that serves slot, as the running node asked
// first (in Nodes order) sees it.
func (c *Cluster) MasterOf(slot int) (*Redis, error) {
	for _, n := range c.Nodes() {
		if !n.running() {
			continue
		}
		owners, err := slotOwners(n.Addr)
		if err != nil {
			continue
		}
		if m := c.byID(owners[slot]); m != nil {
			return m, nil
		}
	}
	return nil, fmt.Errorf("testserver: no running node names the master of slot %d", slot)
}

// WaitHealthy waits until every running node reports cluster_state:ok, knows
// every node, and names the same master for every slot, and every running
// replica's link to its master is up, for up to healthyTimeout.
func (c *Cluster) WaitHealthy() error {
	var why string
	ok := eventuallyWithin(healthyTimeout, func() bool {
		why = ""
		var first []string
		var firstRoles string
		for _, n := range c.Nodes() {
			if !n.running() {
				continue
			}
			info, err := query(n.Addr, "CLUSTER INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(c.Nodes()))) {
				why = fmt.Sprintf("node %s: %v %s", n.Addr, err, info)
				return false
			}
			owners, err := slotOwners(n.Addr)
			if err != nil {
				why = err.Error()
				return false
			}
			ro, err := roles(n.Addr)
			if err != nil {
				why = err.Error()
				return false
			}
			if first == nil {
				first, firstRoles = owners, ro
			} else if strings.Join(first, ",") != strings.Join(owners, ",") {
				why = fmt.Sprintf("node %s sees other slot owners than the first node", n.Addr)
				return false
			} else if ro != firstRoles {
				// A master that does not yet know a replica's master
				// denies it a vote ("I don't know its master"), and
				// votes once per master for twice the node timeout:
				// a forced failover asked then never gets a majority.
				why = fmt.Sprintf("node %s sees other replicas than the first node: %s, not %s", n.Addr, ro, firstRoles)
				return false
			}
			repl, err := query(n.Addr, "INFO replication")
			if err != nil || (strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up")) {
				why = fmt.Sprintf("replica %s not in sync: %v", n.Addr, err)
				return false
			}
		}
		return true
	})
	if !ok {
		return fmt.Errorf("testserver: cluster not healthy within %v: %s", healthyTimeout, why)
	}
	return nil
}

// healthyTimeout bounds WaitHealthy. A node learns that another is a
// replica, and of whom, from that node's own pings, and with the node
// timeout at 60s a node is pinged at least every 30s (once a second, the
// node of five random ones heard from longest ago): on a busy machine a
// six-node cluster took longer than startTimeout to agree on its replicas
// (CI: "sees other replicas than the first node" after 15s).
const healthyTimeout = 4 * startTimeout

// Failover makes replica the master of its master's slots with CLUSTER
// FAILOVER (a manual failover: the master stops taking writes until the
// replica has all of them, then the replica takes over), or, with force,
// CLUSTER FAILOVER FORCE (no handshake with the master, which may be dead or
// paused: the replica is promoted with whatever it had received, as in an
// automatic failover). It returns once every running node names replica
// master of those slots.
func (c *Cluster) Failover(replica *Redis, force bool) error {
	id, err := c.ID(replica)
	if err != nil {
		return err
	}
	args := []string{"CLUSTER", "FAILOVER"}
	if force {
		args = append(args, "FORCE")
	}
	var why string
	var asked time.Time
	if !eventuallyWithin(3*startTimeout, func() bool {
		// Redis abandons a manual failover whose election has not ended
		// within 5s; ask again then.
		if time.Since(asked) > 6*time.Second {
			if _, err := call(replica.Addr, args...); err != nil {
				why = fmt.Sprintf("%s on %s: %v", strings.Join(args, " "), replica.Addr, err)
				return false
			}
			asked = time.Now()
		}
		role, err := query(replica.Addr, "INFO replication")
		if err != nil || !strings.Contains(role, "role:master") {
			why = fmt.Sprintf("%s not master yet: %v", replica.Addr, err)
			return false
		}
		for _, n := range c.Nodes() {
			if !n.running() || n == replica {
				continue
			}
			nodes, err := query(n.Addr, "CLUSTER NODES")
			if err != nil {
				why = err.Error()
				return false
			}
			for _, line := range strings.Split(nodes, "\n") {
				f := strings.Fields(line)
				if len(f) > 2 && f[0] == id && !strings.Contains(f[2], "master") {
					why = fmt.Sprintf("node %s does not see %s as master yet: %s", n.Addr, replica.Addr, line)
					return false
				}
			}
		}
		return true
	}) {
		return fmt.Errorf("testserver: failover to %s not done within %v: %s; its log: %s", replica.Addr, 3*startTimeout, why, replica.logTail())
	}
	return nil
}

// MigrateSlot moves slot and its keys from the node from to the node to,
// as redis-cli --cluster reshard does: CLUSTER SETSLOT IMPORTING on to and
// MIGRATING on from, MIGRATE of every key, then SETSLOT NODE on both and
// on every other running master. Between those steps it calls between(step)
// with "migrating" (both SETSLOTs done, no key moved yet: the source answers
// ASK for keys it no longer has) and "moved" (every key on to, the slot
// still the source's in every node's map), so a test can act while the slot
// is half-way; between may be nil.
func (c *Cluster) MigrateSlot(slot int, from, to *Redis, between func(step string)) error {
	fromID, err := c.ID(from)
	if err != nil {
		return err
	}
	toID, err := c.ID(to)
	if err != nil {
		return err
	}
	s := strconv.Itoa(slot)
	run := func(node *Redis, args ...string) error {
		if _, err := call(node.Addr, args...); err != nil {
			return fmt.Errorf("testserver: %s on %s: %w", strings.Join(args, " "), node.Addr, err)
		}
		return nil
	}
	if err := run(to, "CLUSTER", "SETSLOT", s, "IMPORTING", fromID); err != nil {
		return err
	}
	if err := run(from, "CLUSTER", "SETSLOT", s, "MIGRATING", toID); err != nil {
		return err
	}
	if between != nil {
		between("migrating")
	}
	for {
		v, err := call(from.Addr, "CLUSTER", "GETKEYSINSLOT", s, "100")
		if err != nil {
			return fmt.Errorf("testserver: CLUSTER GETKEYSINSLOT %s on %s: %w", s, from.Addr, err)
		}
		keys, _ := v.([]any)
		if len(keys) == 0 {
			break
		}
		args := []string{"MIGRATE", "127.0.0.1", strconv.Itoa(to.Port), "", "0", "5000", "KEYS"}
		for _, k := range keys {
			args = append(args, k.(string))
		}
		if err := run(from, args...); err != nil {
			return err
		}
	}
	if between != nil {
		between("moved")
	}
	// The target first, then the source, as redis-cli does: a client the
	// source sends away finds the target already owning the slot.
	if err := run(to, "CLUSTER", "SETSLOT", s, "NODE", toID); err != nil {
		return err
	}
	if err := run(from, "CLUSTER", "SETSLOT", s, "NODE", toID); err != nil {
		return err
	}
	for _, n := range c.Nodes() {
		if n == to || n == from || !n.running() {
			continue
		}
		if role, err := query(n.Addr, "INFO replication"); err == nil && strings.Contains(role, "role:master") {
			if err := run(n, "CLUSTER", "SETSLOT", s, "NODE", toID); err != nil {
				return err
			}
		}
	}
	return c.WaitHealthy()
}

// roles returns, as the node at addr sees it (CLUSTER NODES), which node is
// a replica of which, as sorted "replica-id>master-id" pairs.
func roles(addr string) (string, error) {
	nodes, err := query(addr, "CLUSTER NODES")
	if err != nil {
		return "", fmt.Errorf("testserver: CLUSTER NODES on %s: %w", addr, err)
	}
	var pairs []string
	for _, line := range strings.Split(nodes, "\n") {
		if f := strings.Fields(line); len(f) > 3 && strings.Contains(f[2], "slave") {
			pairs = append(pairs, f[0]+">"+f[3])
		}
	}
	slices.Sort(pairs)
	return strings.Join(pairs, " "), nil
}

// slotOwners returns, for each of the 16384 slots, the node id of its master
// as the node at addr sees it (CLUSTER NODES), "" for an unserved slot.
func slotOwners(addr string) ([]string, error) {
	nodes, err := query(addr, "CLUSTER NODES")
	if err != nil {
		return nil, fmt.Errorf("testserver: CLUSTER NODES on %s: %w", addr, err)
	}
	owners := make([]string, 16384)
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") { // a slot being migrated or imported
				continue
			}
			lo, hi, _ := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if hi == "" {
				b, err2 = a, nil
			}
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("testserver: CLUSTER NODES on %s: bad slot range %q", addr, r)
			}
			for s := a; s <= b; s++ {
				owners[s] = f[0]
			}
		}
	}
	return owners, nil
}

// call sends one command, its arguments as a RESP array (so they may hold
// spaces or be empty), and returns its reply: a string for a status, an
// integer's decimal or a bulk string, nil for a nil bulk, []any for an
// array. An error reply is an error.
func call(addr string, args ...string) (any, error) { return callWithin(10*time.Second, addr, args...) }

// callWithin is call, the exchange bounded by d.
func callWithin(d time.Duration, addr string, args ...string) (any, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(c))
}

// readReply reads one RESP2 reply (see call).
func readReply(rd *bufio.Reader) (any, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errors.New("testserver: empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return nil, errors.New(line[1:])
	case '$', '*':
		n, err := strconv.Atoi(line[1:])
		switch {
		case err != nil:
			return nil, fmt.Errorf("testserver: bad reply %q", line)
		case n < 0:
			return nil, nil
		case line[0] == '$':
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(rd, buf); err != nil {
				return nil, err
			}
			return string(buf[:n]), nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(rd); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("testserver: bad reply %q", line)
}
