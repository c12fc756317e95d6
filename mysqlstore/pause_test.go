package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/mysqlstore"
)

// helperEnv, when set, makes the test binary run as a child that takes and
// releases a lock in a loop (see runHammerer) instead of running tests.
const helperEnv = "LEASH_TEST_MYSQL_HAMMERER"

// runHammerer takes the lock LEASH_TEST_NAME on the DSN LEASH_TEST_DSN with
// a lease of LEASH_TEST_LEASE and releases it, over and over, printing
// "acquired F" for each grant: whenever a test pauses it, it may be anywhere
// in a call.
func runHammerer() int {
	lease, err := time.ParseDuration(os.Getenv("LEASH_TEST_LEASE"))
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	db, err := sql.Open("mysql", os.Getenv("LEASH_TEST_DSN"))
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	c, err := leash.New(mysqlstore.New(db, nil), &leash.Options{Lease: lease})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	ctx := context.Background()
	m := c.Mutex(os.Getenv("LEASH_TEST_NAME"))
	for {
		h, err := m.Lock(ctx)
		if err != nil {
			fmt.Println("error", err)
			continue
		}
		fmt.Println("acquired", h.Fence())
		_ = h.Unlock(ctx)
	}
}

// TestPausedClientBlocksNothing pauses (SIGSTOP) a client that takes and
// releases one lock as fast as it can, at whatever point of a call it is,
// again and again: each time, another client takes the lock within the
// paused client's lease, with a greater token. Every multi-statement step
// runs server-side in one CALL, so a paused client holds no row lock; and
// a lock it holds runs out with its lease.
func TestPausedClientBlocksNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	const lease = time.Second
	s := newStore(t, "", nil) // migrates the schema the child uses
	name := "pause/" + t.Name()
	child := testkit.StartSelf(t, "hammerer", helperEnv+"=1", "LEASH_TEST_DSN="+sharedServer(t).DSN(testDB, ""),
		"LEASH_TEST_NAME="+name, "LEASH_TEST_LEASE="+lease.String())
	c, err := leash.New(s, &leash.Options{Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var last, lastChild int64 // the tokens of the last grants, to this test and to the child
	for round := range 5 {
		// Let the child run a few grants, then freeze it mid-flight.
		for range 3 + round {
			line, err := child.Await("acquired ", 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			f, _ := strconv.ParseInt(strings.TrimPrefix(line, "acquired "), 10, 64)
			if f <= lastChild {
				t.Fatalf("child's grant %d after %d", f, lastChild)
			}
			lastChild = f
		}
		if err := child.Pause(); err != nil {
			t.Fatal(err)
		}
		// The deadline starts now that the child is paused: its lease, and
		// time for the poll and a busy machine.
		ctx, cancel := context.WithTimeout(context.Background(), lease+10*time.Second)
		h, err := c.Mutex(name).Lock(ctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: Lock while the other client is paused: %v", round, err)
		}
		if h.Fence() <= max(last, lastChild) {
			t.Errorf("round %d: fence %d, want > %d", round, h.Fence(), max(last, lastChild))
		}
		last = h.Fence()
		if err := h.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := child.Resume(); err != nil {
			t.Fatal(err)
		}
	}
}
