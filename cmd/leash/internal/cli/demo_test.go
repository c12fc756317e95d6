package cli

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/leash-go/leash/internal/leakcheck"
	"github.com/leash-go/leash/internal/testserver"
)

func TestMain(m *testing.M) {
	// The demo re-executes its own binary as "leash demo-holder"; in tests
	// that binary is this test binary.
	if len(os.Args) > 1 && os.Args[1] == "demo-holder" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(leakcheck.Check(m.Run()))
}

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

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

func TestHelpAndVersion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"help"}, exitOK, "leash <command>"},
		{[]string{"help", "demo"}, exitOK, "usage: leash demo"},
		{[]string{"version"}, exitOK, "leash "},
		{nil, exitUsage, "Commands:"},
		{[]string{"frobnicate"}, exitUsage, "unknown command"},
		{[]string{"help", "frobnicate"}, exitUsage, "unknown help topic"},
		{[]string{"demo", "extra"}, exitUsage, "usage: leash demo"},
	} {
		code, out, stderr := run(t, tc.args...)
		if code != tc.code || !strings.Contains(out+stderr, tc.want) {
			t.Errorf("leash %v = %d, %q; want %d and %q", tc.args, code, out+stderr, tc.code, tc.want)
		}
	}
}
