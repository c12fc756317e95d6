package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testkit"
	"github.com/leash-go/leash/pgstore"
)

// churnEnv, when set to a store URL, makes the test binary play a client
// that takes and releases one name, and two with it, as fast as it can (see
// runChurn).
const churnEnv = "LEASH_PG_CHURN"

// runChurn is the body of a churning child: it says "acquired <token>"
// once it first holds the name "churn", then acquires, renews and releases
// it, and takes "churn" and "churn/2" together, in a loop until killed.
func runChurn(url string) int {
	ctx := context.Background()
	st, err := driver.Open(ctx, url)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	said := false
	for i := 0; ; i++ {
		owner := fmt.Sprintf("00000000-0000-4000-8000-%012d:%d", os.Getpid(), i)
		r := driver.Request{Name: "churn", Owner: owner, Lease: 2 * time.Second}
		g, err := st.Acquire(ctx, r)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		if g.Acquired {
			if !said {
				fmt.Println("acquired", g.Fence)
				said = true
			}
			st.Renew(ctx, []driver.Request{r})
			_ = st.Release(ctx, r)
		}
		ms := st.(driver.MultiStore)
		if mg, err := ms.AcquireMany(ctx, []driver.Request{r, {Name: "churn/2", Owner: owner, Lease: 2 * time.Second}}); err == nil && mg.Acquired {
			_ = st.Release(ctx, r)
			_ = st.Release(ctx, driver.Request{Name: "churn/2", Owner: owner})
		}
	}
}

// TestPausedClient stops (SIGSTOP) a client that takes and releases a name
// in a tight loop, at whatever point of its work it is: every operation of
// another client on that name still answers at once (no row lock is left
// with the paused client), and the name is granted at the latest when the
// paused client's lease ends.
func TestPausedClient(t *testing.T) {
	table := tableName(t)
	newStore(t, &pgstore.Options{Table: table}) // creates the tables
	url := sharedPostgres(t).URL() + "&leash_table=" + table
	child := testkit.StartSelf(t, "churning client", churnEnv+"="+url)
	if _, err := child.Acquired(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := child.Pause(); err != nil {
		t.Fatal(err)
	}
	s := pgstore.New(newPool(t, sharedPostgres(t).URL()), &pgstore.Options{Table: table})
	t.Cleanup(func() { s.Close() })
	r := driver.Request{Name: "churn", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
	both := []driver.Request{r, {Name: "churn/2", Owner: r.Owner, Lease: time.Minute}}
	// Each call has 30s, far more than any call needs unless it waits for
	// the paused client: a lease is 2s, and no call waits for a lease.
	call := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	if _, err := s.Inspect(call(), "churn"); err != nil {
		t.Fatal(err)
	}
	if res := s.Renew(call(), both); res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("Renew beside the paused client = %+v", res)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mg, err := s.AcquireMany(call(), both)
		if err != nil {
			t.Fatalf("AcquireMany beside the paused client: %v", err)
		}
		if mg.Acquired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not granted 30s after the client paused; its lease is 2s")
		}
		time.Sleep(mg.Remaining) // the paused client's lease runs out
	}
	if res := s.Renew(call(), both); res[0].Status != driver.Renewed || res[1].Status != driver.Renewed {
		t.Fatalf("Renew of both = %+v", res)
	}
	for _, r := range both {
		if err := s.Release(call(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := child.Resume(); err != nil {
		t.Fatal(err)
	}
}
