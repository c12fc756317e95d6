package zkstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/zkstore"
)

// TestSilentSessionProvesNothing: a keep-alive that no earlier request of
// its session proves heard by the leader recently enough (the session was
// silent, as a stalled process's is) fails with an error of unknown
// outcome, so that the Client extends no lock by it; a keep-alive a tick
// after it succeeds. An acquire on such a session writes on it and waits a
// tick before the grant. The negative control trusts the silent session:
// the keep-alive succeeds, and the grant does not wait.
func TestSilentSessionProvesNothing(t *testing.T) {
	for _, trust := range []bool{false, true} {
		name := "checked"
		if trust {
			name = "trusted (negative control)"
		}
		t.Run(name, func(t *testing.T) {
			s := dial(t, &zkstore.Options{SessionTimeout: 4 * time.Second}, shared.ZooKeeper(t).Addr)
			if trust {
				s.TrustQuiet()
			}
			owner := "00000000-0000-4000-8000-0000000000dd:1"
			client := driver.OwnerClient(owner)
			req := driver.Request{Name: lockName(t) + "/a", Owner: owner, Lease: time.Second}
			if g, err := s.Acquire(bg(t), req); err != nil || !g.Acquired {
				t.Fatalf("Acquire = %+v, %v", g, err)
			}
			if err := s.KeepAlive(bg(t), client); err != nil {
				t.Fatalf("KeepAlive of a session just opened = %v", err)
			}

			s.Silence(client, 10*time.Second)
			err := s.KeepAlive(bg(t), client)
			switch {
			case trust && err != nil:
				t.Fatalf("KeepAlive after a silence, trusted = %v", err)
			case !trust && (err == nil || errors.Is(err, driver.ErrNotHeld) || !strings.Contains(err.Error(), "extends no lock")):
				t.Fatalf("KeepAlive after a silence = %v, want an error of unknown outcome saying it extends no lock", err)
			}
			time.Sleep(testserver.ZooKeeperTick) // the condition: that keep-alive answered a tick ago
			if err := s.KeepAlive(bg(t), client); err != nil {
				t.Fatalf("KeepAlive a tick after one = %v", err)
			}

			s.Silence(client, 10*time.Second)
			req.Name, req.Owner = lockName(t)+"/b", "00000000-0000-4000-8000-0000000000dd:2"
			if g, err := s.Acquire(bg(t), req); err != nil || !g.Acquired {
				t.Fatalf("Acquire on a silent session = %+v, %v", g, err)
			}
			want := int64(1)
			if trust {
				want = 0
			}
			if got := s.Reproved(); got != want {
				t.Errorf("grants that wrote on their silent session and waited first = %d, want %d", got, want)
			}
		})
	}
}

// TestLeaderLagMargin: a Client on the Store keeps each lock valid at most
// (T − TickTime)/2 after the keep-alive that proved it (the Store's Drift),
// and so refuses a renewal interval that does not fit in it; a server that
// grants a shorter session timeout than asked gets a lease refused whose
// hold that timeout would not cover.
func TestLeaderLagMargin(t *testing.T) {
	addr := shared.ZooKeeper(t).Addr
	s := dial(t, &zkstore.Options{SessionTimeout: 40 * time.Second, TickTime: 3 * time.Second}, addr)
	for lease, want := range map[time.Duration]time.Duration{30 * time.Second: 11500 * time.Millisecond, 10 * time.Second: 0} {
		if got := s.Drift(lease); got != want {
			t.Errorf("Drift(%v) = %v, want %v", lease, got, want)
		}
	}
	if _, err := leash.New(s, &leash.Options{Lease: 30 * time.Second, RenewInterval: 20 * time.Second}); !errors.Is(err, leash.ErrInvalidOptions) {
		t.Errorf("a renewal interval of 20s for a hold valid 18.5s: leash.New = %v, want ErrInvalidOptions", err)
	}

	asked := testserver.ZooKeeperMaxSession + 30*time.Second
	s = dial(t, &zkstore.Options{SessionTimeout: asked}, addr)
	owner := "00000000-0000-4000-8000-0000000000de:1"
	long := driver.Request{Name: lockName(t), Owner: owner, Lease: asked / 2}
	if _, err := s.Acquire(bg(t), long); !errors.Is(err, driver.ErrUnsupported) || !strings.Contains(err.Error(), "shorter than the") {
		t.Errorf("Acquire of a %v lease, the session asked %v and granted %v = %v; want ErrUnsupported saying the timeout is shorter",
			long.Lease, asked, testserver.ZooKeeperMaxSession, err)
	}
	short := long
	short.Lease = (testserver.ZooKeeperMaxSession - testserver.ZooKeeperTick) / 2
	if g, err := s.Acquire(bg(t), short); err != nil || !g.Acquired {
		t.Errorf("Acquire of a %v lease = %+v, %v", short.Lease, g, err)
	}

	// A tick as long as the timeout granted leaves no hold safe.
	tiny := dial(t, &zkstore.Options{SessionTimeout: testserver.ZooKeeperTick, TickTime: 3 * testserver.ZooKeeperTick}, addr)
	req := driver.Request{Name: lockName(t) + "/tiny", Owner: "00000000-0000-4000-8000-0000000000df:1", Lease: 10 * time.Millisecond}
	if _, err := tiny.Acquire(bg(t), req); !errors.Is(err, driver.ErrUnsupported) || !strings.Contains(err.Error(), "no longer than Options.TickTime") {
		t.Errorf("Acquire on a session granted %v (the servers' least) with a tick of %v = %v; want ErrUnsupported saying no hold is safe",
			2*testserver.ZooKeeperTick, 3*testserver.ZooKeeperTick, err)
	}
}
