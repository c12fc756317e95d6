package testserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterForcedFailoverOfDeadMaster kills a master of a Cluster with
// replicas while its replica is paused, resumes the replica and promotes it
// with CLUSTER FAILOVER FORCE: the replica serves the dead master's slots.
func TestClusterForcedFailoverOfDeadMaster(t *testing.T) {
	cl := NewClusterWith(t, ClusterOptions{Masters: 3, Replicas: 1})
	replica := cl.Replicas[0][0]
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Masters[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Failover(replica, true); err != nil {
		for _, n := range cl.Nodes() {
			b, _ := os.ReadFile(filepath.Join(n.Dir, "redis.log"))
			var keep []string
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(strings.ToLower(l), "fail") || strings.Contains(l, "vote") || strings.Contains(l, "lection") {
					keep = append(keep, l)
				}
			}
			t.Logf("%s:\n%s", n.Addr, strings.Join(keep, "\n"))
		}
		t.Fatal(err)
	}
	if m, err := cl.MasterOf(0); err != nil || m != replica {
		t.Errorf("MasterOf(0) = %v, %v; want the promoted replica %s", m, err, replica.Addr)
	}
}
