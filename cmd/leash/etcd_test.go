package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/cmd/leash/internal/cli"
	"github.com/leash-go/leash/etcdstore"
	"github.com/leash-go/leash/internal/leakcheck"
	"github.com/leash-go/leash/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// runLeash runs the command in process and returns its exit status and output.
func runLeash(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	status := cli.Main(args, &stdout, &stderr)
	return status, stdout.String(), stderr.String()
}

// TestEtcdURL runs run, show, ls and unlock on an etcd:// URL: the commands
// see a lock a leash Client holds on the same etcd, under the URL's prefix,
// and unlock --force frees it for the next run.
func TestEtcdURL(t *testing.T) {
	srv := testserver.NewEtcd(t, testserver.EtcdOptions{})
	const prefix = "cli-test/"
	store := "etcd://" + srv.Addr() + "?prefix=" + prefix
	name := "jobs/" + t.Name()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if status, _, stderr := runLeash(t, "run", "--store", store, "--no-wait", name, "--", "true"); status != 0 {
		t.Fatalf("run = %d, %q", status, stderr)
	}
	if status, _, stderr := runLeash(t, "run", "--store", store, "--no-wait", "--at-least", "1m", name, "--", "true"); status == 0 ||
		!strings.Contains(stderr, "session") {
		t.Errorf("run --at-least on an etcd store = %d, %q; want a refusal that names the session", status, stderr)
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c, err := leash.New(etcdstore.New(cli, &etcdstore.Options{Prefix: prefix}), &leash.Options{Label: "etcd-cli-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, stderr := runLeash(t, "run", "--store", store, "--no-wait", name, "--", "true"); status == 0 {
		t.Errorf("run while a Client holds the lock = 0, %q; want refused", stderr)
	}
	status, out, stderr := runLeash(t, "show", "--store", store, name)
	if status != 0 || !strings.Contains(out, h.Owner()) {
		t.Errorf("show = %d, %q, %q; want the holder %q", status, out, stderr, h.Owner())
	}
	status, out, stderr = runLeash(t, "ls", "--store", store, "jobs/*")
	if status != 0 || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+` +mutex `).MatchString(out) {
		t.Errorf("ls = %d, %q, %q", status, out, stderr)
	}
	status, out, stderr = runLeash(t, "unlock", "--store", store, "--force", name)
	if status != 0 || !strings.Contains(out, "unlocked") || !strings.Contains(out, h.Owner()) {
		t.Errorf("unlock --force = %d, %q, %q", status, out, stderr)
	}
	if err := h.Renew(ctx); err == nil {
		t.Error("the force-unlocked holder's Renew = nil, want a loss")
	}
	if status, _, stderr := runLeash(t, "run", "--store", store, "--no-wait", name, "--", "true"); status != 0 {
		t.Errorf("run after unlock --force = %d, %q", status, stderr)
	}
	if status, out, _ := runLeash(t, "show", "--store", store, name); status != 0 || !regexp.MustCompile(`(?m)^state +free$`).MatchString(out) {
		t.Errorf("show after the last run = %d:\n%s", status, out)
	}
}

func TestMain(m *testing.M) { os.Exit(leakcheck.Check(m.Run())) }
