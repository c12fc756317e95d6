package cli

import (
	"strconv"
	"strings"
	"testing"

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
		"Scene 1", "woken", "Scene 2", "4s into the work: still held",
		"Scene 3", "after the crash", "Scene 4", "LOST (expired)", "REJECTED by the ledger",
		"All four scenes behaved",
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
