package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/redis/go-redis/v9"
)

// MarkerOnly makes s judge restarts by the marker alone, as earlier versions
// did (no server identity): the negative control of the snapshot tests.
func MarkerOnly(s *Store) *Store {
	s.markerOnly = true
	return s
}

// ReleaseOne drops one of req.Owner's holds, as a Redisson unlock does, and
// reports whether the lock was freed: the Redisson interop the contract no
// longer has, which the store keeps for its own undo of a grant.
func (s *Store) ReleaseOne(ctx context.Context, req driver.Request) (bool, error) {
	return s.release(ctx, req, "one")
}

// StayOnMoves makes s's sharded subscriptions ignore their slot moving to
// another node: the negative control of the slot-move wake tests.
func StayOnMoves(s *Store) *Store {
	s.stayOnMoves = true
	return s
}

// NoTryAgainRetry makes s give up on a script refused with TRYAGAIN at
// once, as earlier versions did: the negative control of the migration
// retry test.
func NoTryAgainRetry(s *Store) *Store {
	s.pipe.noTryAgain = true
	return s
}

// SlotTag returns a hash tag whose slot is sl: the restart marker of slot
// sl is "leash:epoch:{" + SlotTag(sl) + "}".
func SlotTag(sl int) string { return slotTag(sl) }

// GraceOver waits until a view of the process behind c says a restart grace
// of d has ended: the start parseFacts reads from its INFO is d or more
// before the server's time, as the scripts count it.
func GraceOver(t testing.TB, c *redis.Client, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	for {
		info, err := c.Info(ctx, "server", "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		var f serverFacts
		if parseFacts(&f, info); f.startUS == 0 {
			t.Fatalf("INFO of %s gives no start (not a primary, or promoted)", c)
		}
		now, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if now.UnixMicro() >= f.startUS+d.Microseconds() {
			return
		}
		time.Sleep(100 * time.Millisecond) // polls the server's clock
	}
}

// ViewNeverAges makes s keep its view of a server process until a dial shows
// it may have changed, as earlier versions did: the negative control of
// TestStaleViewOfARepromotedProcess.
func ViewNeverAges(s *Store) *Store {
	s.watch.maxAge = 0
	return s
}
