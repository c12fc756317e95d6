package zkstore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/faultproxy"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/zkstore"
)

// TestFollowerCutOffWithItsClient: a holder's session is on a follower,
// which is cut off from the other members just after a keep-alive, its
// client still reaching it. The leader hears of a follower's clients only
// when it pings the follower, so it may never hear of that keep-alive: it
// expires the session a timeout after an earlier request, and a client on
// the other members is granted the lock. The grant must come after the
// holder's hold stopped being valid by the Store's rule: (T − TickTime)/2
// after the keep-alive (the Client's margin is the Store's Drift). The
// negative control is the rule before it, lease − lease/20 with a lease of
// T: a run whose grant comes inside it shows the double grant that rule
// allowed; the test runs until one does (up to maxRuns), checking the
// Store's rule on every run.
func TestFollowerCutOffWithItsClient(t *testing.T) {
	const (
		session = 4 * time.Second
		lease   = session // the longest lease Acquire accepts
		maxRuns = 12
	)
	var (
		mu      sync.Mutex
		proxies = map[int][]*faultproxy.Proxy{} // by member: every proxy of a link to or from it
	)
	e := testserver.NewZooKeeperEnsembleVia(t, func(from, to int, addr string) (string, error) {
		p, err := faultproxy.New(addr)
		if err != nil {
			return "", err
		}
		t.Cleanup(func() { p.Close() })
		mu.Lock()
		proxies[from] = append(proxies[from], p)
		proxies[to] = append(proxies[to], p)
		mu.Unlock()
		return p.Addr, nil
	})
	opts := &zkstore.Options{SessionTimeout: session, TickTime: testserver.ZooKeeperTick}

	shown := false
	for run := 1; run <= maxRuns && !shown; run++ {
		if err := e.AwaitServing(); err != nil {
			t.Fatal(err)
		}
		follower, others := -1, []string(nil)
		for i, z := range e.Servers {
			if m, _ := z.Mode(); m == "follower" && follower < 0 {
				follower = i
				continue
			}
			others = append(others, z.Addr)
		}
		if follower < 0 {
			t.Fatal("no member says it follows")
		}
		holder := dial(t, opts, e.Servers[follower].Addr)
		other := dial(t, opts, others...)
		name := fmt.Sprintf("%s/%d", lockName(t), run)
		owner := fmt.Sprintf("00000000-0000-4000-8000-%012d:1", run)
		client := driver.OwnerClient(owner)
		if g, err := holder.Acquire(bg(t), driver.Request{Name: name, Owner: owner, Lease: lease}); err != nil || !g.Acquired {
			t.Fatalf("run %d: the holder's Acquire = %+v, %v", run, g, err)
		}
		// The keep-alive comes when the Store's last request is a while
		// old: the leader then last heard of the session well before it
		// (unless go-zookeeper pinged meanwhile), and the negative control
		// shows.
		for holder.HeardAgo(client) < 700*time.Millisecond {
			time.Sleep(5 * time.Millisecond)
		}
		k := time.Now()
		if err := holder.KeepAlive(bg(t), client); err != nil {
			t.Fatalf("run %d: KeepAlive = %v", run, err)
		}
		for _, p := range proxies[follower+1] {
			p.Blackhole()
		}
		var granted, returned time.Time
		for deadline := time.Now().Add(session + time.Minute); ; {
			start := time.Now()
			g, err := other.Acquire(bg(t), driver.Request{Name: name, Owner: fmt.Sprintf("00000000-0000-4000-9000-%012d:1", run), Lease: lease})
			if err == nil && g.Acquired {
				granted, returned = start, time.Now()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d: no grant to the other client within a minute after the holder's session timeout (last: %+v, %v)", run, g, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, p := range proxies[follower+1] {
			p.Heal()
		}
		valid := lease - max(lease/20, holder.Drift(lease))
		t.Logf("run %d: follower %d cut off; the other client's grant %v after the keep-alive was sent; the holder counted its hold valid %v (rule before: %v)",
			run, follower+1, returned.Sub(k).Round(time.Millisecond), valid, lease-lease/20)
		if granted.Before(k.Add(valid)) {
			t.Errorf("run %d: the other client was granted the lock %v after the holder's keep-alive was sent, inside the %v its hold stays valid: a double grant",
				run, granted.Sub(k), valid)
		}
		if returned.Before(k.Add(lease - lease/20)) {
			shown = true
		}
		holder.Close()
		other.Close()
	}
	if !shown {
		t.Errorf("negative control: in %d runs no grant came inside the hold's validity by the rule before (lease − lease/20 after the keep-alive): the test could not tell the rules apart", maxRuns)
	}
}
