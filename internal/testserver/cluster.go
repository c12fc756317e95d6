package testserver

import (
	"fmt"
	"strings"
)

// NewCluster starts a Redis Cluster of n masters for the test, no replicas,
// the 16384 hash slots split evenly among them in order, and returns them
// once every node reports the cluster ok. Like any new cluster it serves no
// leash lock before its restart grace: a test calls redisstore's MarkFresh.
func NewCluster(t TB, n int) []*Redis {
	t.Helper()
	nodes := make([]*Redis, n)
	for i := range nodes {
		nodes[i] = NewRedis(t, RedisOptions{Args: []string{
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			// A paused node is not failed by its peers within a test.
			"--cluster-node-timeout", "60000",
		}})
	}
	for i, node := range nodes {
		first, last := i*16384/n, (i+1)*16384/n-1
		if _, err := query(node.Addr, fmt.Sprintf("CLUSTER ADDSLOTSRANGE %d %d", first, last)); err != nil {
			t.Fatalf("testserver: cluster node %s: %v", node.Addr, err)
		}
		if i > 0 {
			if _, err := query(node.Addr, fmt.Sprintf("CLUSTER MEET 127.0.0.1 %d", nodes[0].Port)); err != nil {
				t.Fatalf("testserver: cluster node %s: %v", node.Addr, err)
			}
		}
	}
	for _, node := range nodes {
		var info string
		var err error
		if !eventually(func() bool {
			info, err = query(node.Addr, "CLUSTER INFO")
			return err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n))
		}) {
			t.Fatalf("testserver: cluster node %s not ok within %v: %v %s", node.Addr, startTimeout, err, info)
		}
	}
	return nodes
}
