package cli

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash/internal/testserver"
)

func TestDemo(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	t.Setenv(storeEnv, "redis://"+srv.Addr)
	code, out, stderr := run(t, "demo")
	if code != exitOK {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	for _, want := range []string{
		"A fencing token is a number that grows", "Scene 1", "woken", "Scene 2", "4s into the work: still held",
		"Scene 3", "after the crash", "Scene 4", "LOST (expired)", "REJECTED by the ledger",
		"Scene 5", "already claimed, skipped", "each run once", "All five scenes behaved",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoUnreachableStore(t *testing.T) {
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(storeEnv, "redis://127.0.0.1:"+strconv.Itoa(port))
	code, _, stderr := run(t, "demo")
	if code != exitStore || !strings.Contains(stderr, "cannot reach") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("demo on a closed port = %d, %q; want exit %d and one line saying it cannot reach the store", code, stderr, exitStore)
	}
}

// TestDemoPrintsHandOffsInOrder: scene 1 prints every grant after the
// release that made it possible, even when the next holder learns of its
// grant before the last holder's Unlock returns (which the hooks force on
// the first hand-off).
func TestDemoPrintsHandOffsInOrder(t *testing.T) {
	srv := sharedRedis(t)
	var out bytes.Buffer
	d := &demo{e: &env{stdout: &out, stderr: &out}, tl: &timeline{w: &out, start: time.Now()},
		rdb: newRDB(t, srv.Addr), prefix: lockName(t) + "/"}
	var (
		mu             sync.Mutex
		grants, unlock int
		secondGrant    = make(chan struct{})
	)
	d.granted = func(string) {
		mu.Lock()
		defer mu.Unlock()
		if grants++; grants == 2 {
			close(secondGrant)
		}
	}
	d.released = func(string) {
		mu.Lock()
		unlock++
		first := unlock == 1
		mu.Unlock()
		if first { // hold the first Unlock's return until the next grant is known
			select {
			case <-secondGrant:
			case <-time.After(30 * time.Second):
				t.Error("no second grant within 30s of the first release")
			}
		}
	}
	if err := d.contention(ctxFor(t)); err != nil {
		t.Fatalf("scene 1: %v\n%s", err, out.String())
	}
	name := d.prefix + "orders:42"
	var events []string // "acquired instance-N", "released instance-N", in print order
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && (f[2] == "acquired" || f[2] == "released") && f[3] == name {
			events = append(events, f[2]+" "+f[1])
		}
	}
	if len(events) != 12 {
		t.Fatalf("scene 1 printed %d grants and releases, want 12:\n%s", len(events), out.String())
	}
	for i := 0; i < len(events); i += 2 {
		who := strings.TrimPrefix(events[i], "acquired ")
		if !strings.HasPrefix(events[i], "acquired ") || events[i+1] != "released "+who {
			t.Fatalf("scene 1 printed %q then %q: a grant before the release that preceded it\n%s", events[i], events[i+1], out.String())
		}
	}
}
