package cli

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/redisstore"
)

// showHolderJSON waits until show --json of name lists a holder with a host, and
// returns the answer.
func showHolderJSON(t *testing.T, name string) lockJSON {
	t.Helper()
	var j lockJSON
	eventually(t, 30*time.Second, "show --json naming the holder of "+name, func() bool {
		_, out, _ := run(t, "show", "--json", name)
		j = lockJSON{}
		return json.Unmarshal([]byte(out), &j) == nil && len(j.Owners) == 1 && j.Owners[0].Host != ""
	})
	return j
}

func matchAll(t *testing.T, what, out string, res ...string) {
	t.Helper()
	for _, re := range res {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("%s lacks %s:\n%s", what, re, out)
		}
	}
}

// recordOf reads the holder record of owner's client.
func recordOf(t *testing.T, addr, owner string) (driver.ClientRecord, bool) {
	t.Helper()
	rec, ok, err := redisstore.New(newRDB(t, addr), nil).GetClient(ctxFor(t), driver.OwnerClient(owner))
	if err != nil {
		t.Fatal(err)
	}
	return rec, ok
}

// TestHolderOfRun: ls, show and show --json name the host, pid and command
// of a leash run holder, and its record expires once leash is killed.
func TestHolderOfRun(t *testing.T) {
	srv := sharedRedis(t)
	store := "redis://" + srv.Addr
	t.Setenv(storeEnv, store)
	name, log := lockName(t), logFile(t)
	p := startLeash(t, store, runArgs(name, []string{"--lease", "1s"}, child(log, "-sleep", "5m"))...)
	waitLog(t, log, "ready ", 30*time.Second)
	host, _ := os.Hostname()
	pid := strconv.Itoa(p.cmd.Process.Pid)

	o := showHolderJSON(t, name).Owners[0]
	if o.Host != host || o.PID != p.cmd.Process.Pid || !strings.HasSuffix(o.Command, " -log "+log+" -sleep 5m") ||
		o.State != "held" || o.AcquiredAt == nil || time.Since(*o.AcquiredAt) > time.Minute || o.TailSince != nil {
		t.Errorf("show --json owner = %+v, want host %s, pid %s, the command, held, acquired just now", o, host, pid)
	}
	_, out, _ := run(t, "show", name)
	matchAll(t, "show", out, `(?m)^host +`+regexp.QuoteMeta(host)+`$`, `(?m)^pid +`+pid+`$`,
		`(?m)^command +.* -sleep 5m$`, `(?m)^acquired +\d{4}-\d\d-\d\dT`, `(?m)^state +the command is running$`)
	_, out, _ = run(t, "ls", name)
	matchAll(t, "ls", out, `(?m)^NAME +KIND +HOLDER +HOLDS`, `(?m)^`+regexp.QuoteMeta(name)+` +mutex +`+regexp.QuoteMeta(host+":"+pid)+` \(.+\) +1 `)

	// A killed holder leaves nothing behind for longer than its record's
	// time to live (twice the lease).
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	eventually(t, 30*time.Second, "the killed holder's record expires", func() bool {
		_, ok := recordOf(t, srv.Addr, o.Owner)
		return !ok
	})
}

// TestHolderOfTail: after leash run --at-least, the lock shows its holder's
// tail: the command ended, the lock is kept until its lease ends, and so is
// the record.
func TestHolderOfTail(t *testing.T) {
	srv := sharedRedis(t)
	store := "redis://" + srv.Addr
	t.Setenv(storeEnv, store)
	name, log := lockName(t), logFile(t)
	const atLeast = 20 * time.Second
	if status, _, stderr := runLeash(t, store, runArgs(name, []string{"--at-least", atLeast.String()}, child(log))...); status != 0 {
		t.Fatalf("leash run --at-least exited %d; stderr:\n%s", status, stderr)
	}
	defer run(t, "unlock", "--force", name)
	_, out, _ := run(t, "show", "--json", name)
	var j lockJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil || len(j.Owners) != 1 {
		t.Fatalf("show --json = %s (%v)", out, err)
	}
	o := j.Owners[0]
	if o.State != "tail" || o.TailSince == nil || o.AcquiredAt == nil || o.TailSince.Before(*o.AcquiredAt) || o.Command == "" {
		t.Errorf("show --json owner after the command ended = %+v, want a tail with its command", o)
	}
	_, out, _ = run(t, "show", name)
	matchAll(t, "show", out, `(?m)^state +tail since \d{4}-`)
	_, out, _ = run(t, "ls", name)
	matchAll(t, "ls", out, `(?m)^`+regexp.QuoteMeta(name)+` +mutex +\S+:\d+ \(.+\) tail +1 `)
	ttl, err := newRDB(t, srv.Addr).PTTL(ctxFor(t), "leash_client:{"+driver.OwnerClient(o.Owner)+"}").Result()
	if err != nil || ttl <= 0 || ttl > atLeast+time.Second {
		t.Errorf("the record's PTTL = %v (%v), want the tail's rest, at most %v", ttl, err, atLeast+time.Second)
	}
}

// TestHolderOfLibrary: a library Client's label is shown, and its record is
// gone once it closes.
func TestHolderOfLibrary(t *testing.T) {
	srv := sharedRedis(t)
	t.Setenv(storeEnv, "redis://"+srv.Addr)
	c := newClient(t, srv.Addr, &leash.Options{Label: "billing worker v1.4"})
	name := lockName(t)
	h, err := c.Mutex(name).Lock(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	pid := strconv.Itoa(os.Getpid())
	o := showHolderJSON(t, name).Owners[0]
	if o.Host != host || o.PID != os.Getpid() || o.Label != "billing worker v1.4" || o.Command != "" || o.State != "held" || o.AcquiredAt == nil {
		t.Errorf("show --json owner = %+v, want host %s, pid %s, the label, held", o, host, pid)
	}
	_, out, _ := run(t, "show", name)
	matchAll(t, "show", out, `(?m)^label +billing worker v1\.4$`, `(?m)^pid +`+pid+`$`)
	_, out, _ = run(t, "ls", name)
	matchAll(t, "ls", out, `(?m)^`+regexp.QuoteMeta(name)+` +mutex +`+regexp.QuoteMeta(host+":"+pid)+` \[billing worker v1\.4\] +1 `)
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if rec, ok := recordOf(t, srv.Addr, h.Owner()); ok {
		t.Errorf("record after Close = %+v, want none", rec)
	}
}

// TestHolderUnknown: a Redisson holder has no record; show says so and ls
// shows its owner id.
func TestHolderUnknown(t *testing.T) {
	srv := sharedRedis(t)
	t.Setenv(storeEnv, "redis://"+srv.Addr)
	rdb := newRDB(t, srv.Addr)
	name, javaOwner := lockName(t), "0f8fad5b-d9cb-469f-a165-70867728950e:57"
	if err := rdb.HSet(ctxFor(t), name, javaOwner, 1).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctxFor(t), name, time.Minute)
	defer rdb.Del(context.Background(), name)
	_, out, _ := run(t, "show", name)
	matchAll(t, "show", out, `(?m)^holder +`+javaOwner+`$`, `(?m)^host +unknown \(no holder record`)
	_, out, _ = run(t, "ls", name)
	matchAll(t, "ls", out, `(?m)^`+regexp.QuoteMeta(name)+` +mutex +`+javaOwner+` +1 `)
}

func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"./report.sh", "--day", "2026-11-24"}, "./report.sh --day 2026-11-24"},
		{[]string{"sh", "-c", `echo "$X"`}, `sh -c "echo \"$X\""`},
		{[]string{"a", "", "b\nc"}, `a "" "b\nc"`},
		{[]string{strings.Repeat("x", leash.MaxCommandLen+10)}, strings.Repeat("x", leash.MaxCommandLen-3) + "…"},
	} {
		if got := commandLine(tc.argv); got != tc.want || len(got) > leash.MaxCommandLen {
			t.Errorf("commandLine(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
}

// TestHelpLsColumns: the example in leash help ls has the columns ls prints.
func TestHelpLsColumns(t *testing.T) {
	var b strings.Builder
	printLocks(&b, []driver.Info{{Name: "x", Held: true, Owners: []driver.OwnerHolds{{Owner: "o:1", Holds: 1}}}}, nil)
	printed := strings.Fields(strings.SplitN(b.String(), "\n", 2)[0])
	_, help, _ := run(t, "help", "ls")
	_, example, ok := strings.Cut(help, "$ leash ls 'billing/*'\n")
	if !ok {
		t.Fatalf("leash help ls has no ls example:\n%s", help)
	}
	if got := strings.Fields(strings.SplitN(example, "\n", 2)[0]); strings.Join(got, " ") != strings.Join(printed, " ") {
		t.Errorf("leash help ls example columns = %q, ls prints %q", got, printed)
	}
}

// TestUnlockOfTailLeavesTheNextHolder: unlock --force frees a lock left to
// expire (a --at-least tail) at once, as its holder; when the tail ends and
// someone else takes the name between unlock's look and its release, the
// new holder's lock is left alone (a force release would have deleted it
// while its holder worked under it).
func TestUnlockOfTailLeavesTheNextHolder(t *testing.T) {
	srv := sharedRedis(t)
	store := "redis://" + srv.Addr
	name, log := lockName(t), logFile(t)
	if status, _, stderr := runLeash(t, store, runArgs(name, []string{"--at-least", "20s"}, child(log))...); status != 0 {
		t.Fatalf("leash run --at-least exited %d; stderr:\n%s", status, stderr)
	}
	ctx := ctxFor(t)
	rs := redisstore.New(newRDB(t, srv.Addr), nil)
	info, err := rs.Inspect(ctx, name)
	if err != nil || len(info.Owners) != 1 || !tailOnly(ctx, rs, info) {
		t.Fatalf("Inspect of the tail = %+v, %v; want one owner, in its tail", info, err)
	}
	// The tail ends (as its lease would) and another client takes the name.
	if _, err := rs.ForceRelease(ctx, name); err != nil {
		t.Fatal(err)
	}
	next, err := newClient(t, srv.Addr, nil).Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	freed, err := releaseTail(ctx, rs, name, info)
	if err != nil || len(freed) != 0 {
		t.Errorf("releaseTail after the tail ended = %v, %v; want nothing freed", freed, err)
	}
	now, err := rs.Inspect(ctx, name)
	if err != nil || !now.Held || len(now.Owners) != 1 || now.Owners[0].Owner != next.Owner() || next.Err() != nil {
		t.Errorf("after releaseTail: Inspect = %+v, %v, the new holder's Err = %v; want the new holder's lock untouched", now, err, next.Err())
	}
	if err := next.Unlock(ctx); err != nil {
		t.Errorf("the new holder's Unlock = %v", err)
	}

	// Without a race: the tail is released as its holder, at once.
	if status, _, stderr := runLeash(t, store, runArgs(name, []string{"--at-least", "20s"}, child(log, "-id", "second"))...); status != 0 {
		t.Fatalf("the second leash run --at-least exited %d; stderr:\n%s", status, stderr)
	}
	info, err = rs.Inspect(ctx, name)
	if err != nil || len(info.Owners) != 1 {
		t.Fatalf("Inspect of the second tail = %+v, %v", info, err)
	}
	status, out, stderr := runLeash(t, store, "unlock", "--force", name)
	if status != 0 || !strings.Contains(out, "unlocked") || !strings.Contains(out, info.Owners[0].Owner) || !strings.Contains(out, "work had ended") {
		t.Errorf("unlock --force of a tail = %d, %q, %q; want it unlocked, naming its holder", status, out, stderr)
	}
	assertFree(t, newRDB(t, srv.Addr), name)
}
