package zkstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/faultproxy"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/zkstore"
)

// newClient returns a leash Client on a Store of its own on addrs, closed at
// cleanup.
func newClient(t *testing.T, sopts *zkstore.Options, opts *leash.Options, addrs ...string) *leash.Client {
	t.Helper()
	c, err := leash.New(dial(t, sopts, addrs...), opts)
	return testkit.Closing(t, c, err)
}

func lockName(t *testing.T) string { return "test/" + t.Name() }

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestCutHolderToldFirst cuts a holder's connection (its proxy black-holes
// it): another client gets the lock only once the holder's lease has run
// out, and by then the holder has been told it lost the lock.
func TestCutHolderToldFirst(t *testing.T) {
	z := shared.ZooKeeper(t)
	p, err := faultproxy.New(z.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	const lease = time.Second
	holder := newClient(t, &zkstore.Options{SessionTimeout: 2 * lease}, &leash.Options{Lease: lease}, p.Addr)
	other := newClient(t, nil, &leash.Options{Lease: lease}, z.Addr)
	name := lockName(t)
	h, err := holder.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	g, err := other.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Unlock(bg(t))
	if err := h.Err(); err == nil {
		t.Fatalf("another client acquired %q (fence %d) while the cut holder (fence %d) still believed it held it", name, g.Fence(), h.Fence())
	}
	if g.Fence() <= h.Fence() {
		t.Errorf("fence of the next holder = %d, want > %d", g.Fence(), h.Fence())
	}
	var lost *leash.LostError
	if !errors.As(h.Err(), &lost) {
		t.Fatalf("holder's error = %v, want a *leash.LostError", h.Err())
	}
	t.Logf("holder told: %v", lost)
	p.Heal()
}

// TestReconnectKeepsLocks cuts a holder's connection for less than its
// session timeout: the session survives the reconnect, and the lock with it.
func TestReconnectKeepsLocks(t *testing.T) {
	z := shared.ZooKeeper(t)
	p, err := faultproxy.New(z.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	const lease = 10 * time.Second
	s := dial(t, &zkstore.Options{SessionTimeout: 2 * lease}, p.Addr)
	c, err := leash.New(s, &leash.Options{Lease: lease})
	c = testkit.Closing(t, c, err)
	h, err := c.Mutex(lockName(t)).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	session := s.SessionID(driver.OwnerClient(h.Owner()))
	p.Reset() // drop every connection; go-zookeeper reconnects through the proxy
	// The first renewals may meet the dropped connection; one succeeds once
	// go-zookeeper has reconnected, long before the lease runs out.
	for err := h.Renew(bg(t)); err != nil; err = h.Renew(bg(t)) {
		if h.Err() != nil {
			t.Fatalf("hold lost while reconnecting: %v (last renewal: %v)", h.Err(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := s.SessionID(driver.OwnerClient(h.Owner())); got != session {
		t.Fatalf("session after the reconnect = %x, want the same %x", got, session)
	}
	if err := h.Err(); err != nil {
		t.Fatalf("hold after a reconnect: %v", err)
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
}

// TestLeaderLoss kills the ensemble's leader while locks are held: every
// holder keeps its lock or is told it lost it, and no lock is granted to
// another client while its holder still believes it holds it.
func TestLeaderLoss(t *testing.T) {
	e := testserver.NewZooKeeperEnsemble(t)
	const lease = 3 * time.Second
	holder := newClient(t, &zkstore.Options{SessionTimeout: 4 * lease}, &leash.Options{Lease: lease}, e.Addrs()...)
	other := newClient(t, &zkstore.Options{SessionTimeout: 4 * lease}, &leash.Options{Lease: lease}, e.Addrs()...)
	var holds []*leash.Hold
	for i := range 5 {
		h, err := holder.Mutex(fmt.Sprintf("%s/%d", lockName(t), i)).Lock(bg(t))
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
	}
	leader := e.Leader()
	if leader == nil {
		t.Fatal("the ensemble has no leader")
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := e.AwaitServing(); err != nil {
		t.Fatal(err)
	}
	// Through two leases after the new leader serves, every lock is either
	// still held (the other client is refused) or its holder knows it lost it.
	for end := time.Now().Add(2 * lease); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, h := range holds {
			g, err := other.Mutex(h.Name()).TryLock(bg(t))
			if errors.Is(err, leash.ErrNotAcquired) {
				continue
			}
			if err != nil {
				t.Logf("TryLock(%q) during the failover: %v", h.Name(), err)
				continue
			}
			if h.Err() == nil {
				t.Fatalf("%q granted to another client (fence %d) while its holder (fence %d) still believed it held it", h.Name(), g.Fence(), h.Fence())
			}
			_ = g.Unlock(bg(t))
		}
	}
	kept := 0
	for _, h := range holds {
		if h.Err() == nil {
			kept++
		}
	}
	t.Logf("%d of %d holds survived the leader's loss", kept, len(holds))
}

// TestSessionExpiry cuts a holder's connection until the server expires its
// ZooKeeper session (its lock node vanishes): the holder is told it lost the
// lock, and after the reconnect, under a new session, the client's
// keep-alive reports ErrNotHeld.
func TestSessionExpiry(t *testing.T) {
	z := shared.ZooKeeper(t)
	p, err := faultproxy.New(z.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	const lease = time.Second
	s := dial(t, &zkstore.Options{SessionTimeout: lease}, p.Addr)
	c, err := leash.New(s, &leash.Options{Lease: lease})
	c = testkit.Closing(t, c, err)
	watcher := dial(t, nil, z.Addr)
	name := lockName(t)
	h, err := c.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	client := driver.OwnerClient(h.Owner())
	p.Blackhole()
	dir := zkstore.DefaultRoot + "/locks/" + url.PathEscape(name)
	for { // the server expires the session: its ephemeral lock node goes
		n, _, err := watcher.Conn().Children(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(n) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h.Err() == nil {
		t.Fatalf("the session expired on the server, and the holder still believes it holds %q", name)
	}
	p.Heal()
	// go-zookeeper reconnects and learns of the expiry (or the Store closed
	// the session first, its lease run out): the keep-alive fails, outcome
	// unknown, until then, and reports ErrNotHeld after.
	for err := s.KeepAlive(bg(t), client); !errors.Is(err, driver.ErrNotHeld); err = s.KeepAlive(bg(t), client) {
		if err == nil {
			t.Fatal("KeepAlive succeeded after the session expired on the server")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for { // the Store's own session, through the proxy too, may be reconnecting
		g, err := c.Mutex(name).TryLock(bg(t))
		if err == nil {
			_ = g.Unlock(bg(t))
			break
		}
		// A grant that came back after its validity (the new session's
		// set-up is part of the acquire) is given back: try again.
		if late := new(leash.LateGrantError); errors.Is(err, leash.ErrNotAcquired) && !errors.As(err, &late) {
			t.Fatalf("TryLock by the same client after its session expired = %v, want a grant under a new session", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServerRestart kills the server and starts it again on the same port
// and data directory within the session timeout: the session, kept in the
// server's data, survives, and the lock with it. The lease must outlast the
// server's restart, a JVM's start, which took more than a 5 s lease's
// validity on a loaded machine: 15 s, with the session of four leases that
// the test servers' maxSessionTimeout (60 s) grants.
func TestServerRestart(t *testing.T) {
	z := testserver.NewZooKeeper(t)
	const lease = 15 * time.Second
	s := dial(t, &zkstore.Options{SessionTimeout: 4 * lease}, z.Addr)
	c, err := leash.New(s, &leash.Options{Lease: lease})
	c = testkit.Closing(t, c, err)
	h, err := c.Mutex(lockName(t)).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	session := s.SessionID(driver.OwnerClient(h.Owner()))
	if err := z.Restart(); err != nil {
		t.Fatal(err)
	}
	for err := h.Renew(bg(t)); err != nil; err = h.Renew(bg(t)) {
		if h.Err() != nil {
			t.Fatalf("hold lost across the restart: %v (last renewal: %v)", h.Err(), err)
		}
		time.Sleep(50 * time.Millisecond) // go-zookeeper reconnects
	}
	if got := s.SessionID(driver.OwnerClient(h.Owner())); got != session {
		t.Errorf("session after the restart = %x, want the same %x", got, session)
	}
	other := newClient(t, nil, nil, z.Addr)
	if _, err := other.Mutex(lockName(t)).TryLock(bg(t)); !errors.Is(err, leash.ErrNotAcquired) {
		t.Errorf("TryLock by another client after the restart = %v, want ErrNotAcquired", err)
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
}

// TestPausedServerHolderToldFirst freezes the server (SIGSTOP) under a
// holder, with another client already waiting for the lock, for as long as
// the holder's session timeout: when the server resumes, it expires the
// session at once and the waiter is granted the lock; by then the holder
// has been told it lost it (its validity ended a lease after its last
// renewal was sent, which is before the server's timeout).
func TestPausedServerHolderToldFirst(t *testing.T) {
	z := testserver.NewZooKeeper(t)
	const lease, session = time.Second, 2 * time.Second
	holder := newClient(t, &zkstore.Options{SessionTimeout: session}, &leash.Options{Lease: lease}, z.Addr)
	other := newClient(t, nil, &leash.Options{Lease: lease}, z.Addr)
	name := lockName(t)
	h, err := holder.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		h       *leash.Hold
		err     error
		believe bool // the holder believed it held the lock when it was granted
	}
	granted := make(chan grant, 1)
	go func() {
		g, err := other.Mutex(name).Lock(bg(t))
		granted <- grant{g, err, h.Err() == nil}
	}()
	if err := z.Pause(); err != nil {
		t.Fatal(err)
	}
	// The fault's length, not a wait for a condition: the server, frozen,
	// sees the session's timeout pass and expires it on resuming.
	time.Sleep(session)
	if err := z.Resume(); err != nil {
		t.Fatal(err)
	}
	var g grant
	select {
	case g = <-granted:
	case <-time.After(30 * lease): // bounds a broken wake-up, not a speed
		t.Fatalf("the waiting client not granted the lock within %v of the server resuming", 30*lease)
	}
	if g.err != nil {
		t.Fatal(g.err)
	}
	if g.believe {
		t.Fatalf("%q granted to another client (fence %d) while the holder still believed it held it", name, g.h.Fence())
	}
	select {
	case <-h.Lost():
	case <-time.After(30 * lease):
		t.Fatal("the holder's Lost channel not closed")
	}
	if g.h.Fence() <= h.Fence() {
		t.Errorf("fence of the next holder = %d, want > %d", g.h.Fence(), h.Fence())
	}
	_ = g.h.Unlock(bg(t))
}
