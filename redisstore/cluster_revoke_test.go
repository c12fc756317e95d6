package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// clusterRevokeListening waits until the client that holds name listens
// for revocations on some node of cl (PUBSUB NUMSUB counts a node's own
// subscribers).
func clusterRevokeListening(t *testing.T, cl *testserver.Cluster, c *leash.Client, name string) {
	t.Helper()
	info, err := c.Inspect(bg(t), name)
	if err != nil || len(info.Owners) != 1 {
		t.Fatalf("Inspect(%q) = %+v, %v; want one holder", name, info, err)
	}
	ch := "leash_revoke__channel:" + driver.OwnerClient(info.Owners[0].Owner)
	var rdbs []*redis.Client
	for _, n := range cl.Nodes() {
		rdbs = append(rdbs, newRDB(t, n.Addr))
	}
	waitFor(t, "the holder to listen for revocations", func() bool {
		var subs int64
		for _, rdb := range rdbs {
			subs += numSub(t, rdb, ch)
		}
		return subs == 1
	})
}

// TestClusterForceUnlockRevokes: on a Cluster of three masters, a holder of
// a Mutex on every master is told "revoked" by another client's
// ForceUnlock at once, on the revocation channel (a plain PUBLISH, which
// the cluster bus carries to whichever node the holder listens on), not at
// its next renewal, which the hour-long lease puts twenty minutes away. No
// one is granted a name before its holder was told; once told, the holder
// acknowledges, and the name is granted with a larger token.
func TestClusterForceUnlockRevokes(t *testing.T) {
	cl, cc := newReplicatedCluster(t, testserver.ClusterOptions{})
	holder, other := clusterLeash(t, cc, time.Hour, nil), clusterLeash(t, cc, time.Hour, nil)
	for i := range cl.Masters {
		name := namesOn(t, cc, lockName(t), len(cl.Masters), i, 1)[0]
		h, err := holder.Mutex(name).Lock(bg(t))
		if err != nil {
			t.Fatal(err)
		}
		clusterRevokeListening(t, cl, holder, name)
		if ok, err := other.ForceUnlock(bg(t), name); err != nil || !ok {
			t.Fatalf("master %d: ForceUnlock(%q) = %v, %v; want true, nil", i, name, ok, err)
		}
		// The hang guard of a broken revocation: a renewal would tell it
		// only in twenty minutes.
		select {
		case <-h.Lost():
		case <-time.After(30 * time.Second):
			t.Fatalf("master %d: the holder of %q was not told of the force unlock", i, name)
		}
		var le *leash.LostError
		if !errors.As(h.Err(), &le) || le.Reason != leash.ReasonRevoked {
			t.Errorf("master %d: holder's Err = %v, want lost: revoked", i, h.Err())
		}
		g, err := other.Mutex(name).Lock(bg(t))
		if err != nil {
			t.Fatalf("master %d: Lock after the revocation: %v", i, err)
		}
		if g.Fence() <= h.Fence() {
			t.Errorf("master %d: token %d after the revocation, want > %d", i, g.Fence(), h.Fence())
		}
		if err := h.Unlock(bg(t)); !errors.Is(err, leash.ErrRevoked) {
			t.Errorf("master %d: Unlock of the revoked hold = %v, want ErrRevoked", i, err)
		}
		if err := g.Unlock(bg(t)); err != nil {
			t.Error(err)
		}
	}
}
