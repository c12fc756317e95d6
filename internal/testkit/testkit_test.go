package testkit_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leash-go/leash/internal/leakcheck"
	"github.com/leash-go/leash/internal/testkit"
)

// roleEnv, when set, makes the test binary play a child: it prints the
// value's lines (separated by "|") and, unless the last is "exit", waits to
// be killed.
const roleEnv = "LEASH_TESTKIT_CHILD"

func TestMain(m *testing.M) {
	if say := os.Getenv(roleEnv); say != "" {
		lines := strings.Split(say, "|")
		for _, l := range lines {
			fmt.Println(l)
		}
		if lines[len(lines)-1] == "exit" {
			os.Exit(0)
		}
		select {} // until killed
	}
	os.Exit(leakcheck.Check(m.Run()))
}

func TestChildLines(t *testing.T) {
	c := testkit.StartSelf(t, "holder", roleEnv+"=acquired 42|wrote 42 accepted|noise|ready|more")
	if fence, err := c.Acquired(time.Minute); err != nil || fence != 42 {
		t.Fatalf("Acquired = %d, %v; want 42, nil", fence, err)
	}
	if l, err := c.Next(time.Minute); err != nil || l != "wrote 42 accepted" {
		t.Fatalf("Next = %q, %v; want the write", l, err)
	}
	if l, err := c.Await("ready", time.Minute); err != nil || l != "ready" {
		t.Fatalf("Await(ready) = %q, %v; want ready, past the noise", l, err)
	}
	if err := c.Pause(); err != nil {
		t.Fatal(err)
	}
	c.Kill() // a paused child too
	c.Kill() // and twice
	if err := c.Wait(time.Minute); err != nil {
		t.Errorf("Wait after Kill: %v", err)
	}
}

func TestChildReportsItsEnd(t *testing.T) {
	for name, tc := range map[string]struct {
		say  string
		read func(*testkit.Child) error
		want string
	}{
		"exit before the line": {"exit", func(c *testkit.Child) error {
			c.Next(time.Minute) // "exit"
			_, err := c.Next(time.Minute)
			return err
		}, "holder exited"},
		"exit while awaiting": {"exit", func(c *testkit.Child) error { _, err := c.Await("ready", time.Minute); return err }, `holder exited while awaiting "ready"`},
		"an error line":       {"error no server|ready", func(c *testkit.Child) error { _, err := c.Await("ready", time.Minute); return err }, "holder: error no server"},
		"not acquired":        {"waiting", func(c *testkit.Child) error { _, err := c.Acquired(time.Minute); return err }, `holder said "waiting", want acquired`},
		"silent":              {"", func(c *testkit.Child) error { _, err := c.Next(time.Millisecond); return err }, "holder silent for 1ms"},
	} {
		t.Run(name, func(t *testing.T) {
			env := roleEnv + "=" + tc.say
			if tc.say == "" {
				env = roleEnv + "= " // prints one blank line, then waits
			}
			c := testkit.StartSelf(t, "holder", env)
			if tc.say == "" {
				c.Next(time.Minute)
			}
			if err := tc.read(c); err == nil || err.Error() != tc.want {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestChildDrain(t *testing.T) {
	c := testkit.StartSelf(t, "holder", roleEnv+"=one|two|exit")
	if err := c.Wait(time.Minute); err != nil {
		t.Fatal(err)
	}
	c.Drain() // the lines said before the exit, and no hang on the end
	if l, err := c.Next(time.Minute); err == nil {
		t.Errorf("Next after Drain = %q, want the child's end", l)
	}
}

func TestParseFence(t *testing.T) {
	for name, tc := range map[string]struct {
		reply any
		err   error
		want  testkit.Fence
		fails bool
	}{
		"accepted":       {reply: []any{int64(1), int64(7), int64(3)}, want: testkit.Fence{Accepted: true, Seen: 7, Seq: 3}},
		"rejected":       {reply: []any{int64(0), int64(9), int64(0)}, want: testkit.Fence{Seen: 9}},
		"short":          {reply: []any{int64(1), int64(7)}, fails: true},
		"not a number":   {reply: []any{int64(1), "7", int64(0)}, fails: true},
		"not a list":     {reply: int64(1), fails: true},
		"a client error": {err: errors.New("boom"), fails: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := testkit.ParseFence(tc.reply, tc.err)
			if (err != nil) != tc.fails || got != tc.want {
				t.Errorf("ParseFence(%#v, %v) = %+v, %v; want %+v, failing %v", tc.reply, tc.err, got, err, tc.want, tc.fails)
			}
		})
	}
}

// closer counts its Close calls.
type closer struct{ closed int }

func (c *closer) Close() error { c.closed++; return nil }

func TestClosing(t *testing.T) {
	c := &closer{}
	t.Run("closed at cleanup", func(t *testing.T) {
		if got := testkit.Closing(t, c, nil); got != c {
			t.Errorf("Closing returned %p, want %p", got, c)
		}
		if c.closed != 0 {
			t.Errorf("closed %d times before cleanup, want 0", c.closed)
		}
	})
	if c.closed != 1 {
		t.Errorf("closed %d times after cleanup, want 1", c.closed)
	}
}

// TestLoopRunsExactlyItsGoroutines checks that Loop starts the goroutines
// it is asked for, one included (b.RunParallel would start GOMAXPROCS), and
// that they make the iterations between them, each once.
func TestLoopRunsExactlyItsGoroutines(t *testing.T) {
	for _, n := range []int{1, 2, 16} {
		var (
			mu      sync.Mutex
			started int
			done    int
		)
		testkit.Loop(n, 1000, func(next func() bool) {
			mu.Lock()
			started++
			mu.Unlock()
			for next() {
				mu.Lock()
				done++
				mu.Unlock()
			}
		})
		if started != n || done != 1000 {
			t.Errorf("Loop(%d, 1000): %d goroutines made %d iterations, want %d and 1000", n, started, done, n)
		}
	}
}
