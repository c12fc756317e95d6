package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestShowKinds checks show and ls on an RWMutex held by readers with a
// writer queued, and on a semaphore: kind, per-owner leases, permits, queue;
// on every test store.
func TestShowKinds(t *testing.T) {
	for _, st := range testStores(t) {
		t.Run(st.name, func(t *testing.T) { testShowKinds(t, st) })
	}
}

func testShowKinds(t *testing.T, st testStore) {
	t.Setenv(storeEnv, st.url)
	ctx := ctxFor(t)
	c := st.client(t, nil)
	prefix := lockName(t) + "/"
	rw, sem := prefix+"rw", prefix+"sem"
	for range 2 {
		r, err := c.RWMutex(rw, nil).RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Unlock(context.Background())
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	writer := st.client(t, nil)
	// Owner: this test. Stops when cancel ends its wait.
	go func() { _, _ = writer.RWMutex(rw, nil).Lock(wctx) }()
	waitForWaiter(t, c, rw)
	p, err := c.Semaphore(sem, 3).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Unlock(context.Background())

	status, out, stderr := run(t, "show", rw)
	if status != 0 {
		t.Fatalf("show = %d, %q", status, stderr)
	}
	for _, want := range []string{`(?m)^state +held$`, `(?m)^kind +read \(an RWMutex`, `(?m)^holder +\S+ \(read, [0-9.]+m?s left\)$`, `(?m)^queued +1$`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("show of a read-held RWMutex lacks %s:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "(read, "); n != 2 {
		t.Errorf("show lists %d readers, want 2:\n%s", n, out)
	}
	_, out, _ = run(t, "show", sem)
	for _, want := range []string{`(?m)^kind +permit \(a Semaphore\)$`, `(?m)^permits +3 \(1 held\)$`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("show of a semaphore lacks %s:\n%s", want, out)
		}
	}
	_, out, _ = run(t, "show", "--json", rw)
	var j lockJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	if j.Kind != "read" || len(j.Owners) != 2 || j.Owners[0].RemainingMS == nil || j.Queued != 1 {
		t.Errorf("show --json of a read-held RWMutex = %+v", j)
	}
	_, out, _ = run(t, "ls", prefix+"*")
	if !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(rw)+` +read `).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(sem)+` +permit `).MatchString(out) {
		t.Errorf("ls lacks the RWMutex or the semaphore with their kinds:\n%s", out)
	}
}

// TestShowLsUnlock runs show, ls and unlock on a held lock with a waiter and
// on a free one, on every test store.
func TestShowLsUnlock(t *testing.T) {
	for _, st := range testStores(t) {
		t.Run(st.name, func(t *testing.T) { testShowLsUnlock(t, st) })
	}
}

func testShowLsUnlock(t *testing.T, st testStore) {
	t.Setenv(storeEnv, st.url)
	ctx := ctxFor(t)
	c := st.client(t, nil)
	prefix := lockName(t) + "/"
	held, free := prefix+"held", prefix+"free"
	h, err := c.Mutex(held).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(context.Background())
	// A waiter, so that show has one to count: one that never starves,
	// since a starving Mutex waiter also marks the name and watches the
	// fair channel, which show would count as well.
	waiter := st.client(t, &leash.Options{Starvation: leash.NoStarvation})
	got := make(chan error, 1)
	// Owner: this test. Stops when the force-unlock below lets it in.
	go func() {
		wh, err := waiter.Mutex(held).Lock(ctx)
		if err == nil {
			err = wh.Unlock(ctx)
		}
		got <- err
	}()
	waitForWaiter(t, c, held)
	if f, err := c.Mutex(free).Lock(ctx); err != nil {
		t.Fatal(err)
	} else if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("show", func(t *testing.T) {
		status, out, stderr := run(t, "show", held)
		if status != 0 {
			t.Fatalf("show = %d, %q", status, stderr)
		}
		for _, want := range []string{
			`(?m)^lock       ` + regexp.QuoteMeta(held) + `$`, `(?m)^state      held$`,
			`(?m)^holder     ` + regexp.QuoteMeta(h.Owner()) + `$`, `(?m)^holds      1$`,
			`(?m)^remaining  [0-9.]+m?s$`, `(?m)^fence      [0-9]+$`, `(?m)^waiters    1$`,
		} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("show output lacks %s:\n%s", want, out)
			}
		}
		_, out, _ = run(t, "show", free)
		if !regexp.MustCompile(`(?m)^state +free$`).MatchString(out) || strings.Contains(out, "holder") {
			t.Errorf("show of a free lock:\n%s", out)
		}
	})
	t.Run("show --json", func(t *testing.T) {
		var j lockJSON
		_, out, _ := run(t, "show", held, "--json")
		if err := json.Unmarshal([]byte(out), &j); err != nil {
			t.Fatalf("show --json is not JSON: %v\n%s", err, out)
		}
		if !j.Held || j.Name != held || len(j.Owners) != 1 || j.Owners[0].Owner != h.Owner() || j.Owners[0].Holds != 1 ||
			j.RemainingMS == nil || *j.RemainingMS <= 0 || j.Fence != h.Fence() || j.Waiters == nil || *j.Waiters != 1 {
			t.Errorf("show --json = %s", out)
		}
		_, out, _ = run(t, "show", "--json", free)
		var f map[string]any
		if err := json.Unmarshal([]byte(out), &f); err != nil || f["held"] != false || f["remaining_ms"] != nil || len(f["owners"].([]any)) != 0 {
			t.Errorf("show --json of a free lock = %s (%v)", out, err)
		}
	})
	t.Run("ls", func(t *testing.T) {
		status, out, _ := run(t, "ls", prefix+"*")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if status != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], held+" ") {
			t.Fatalf("ls = %d:\n%s", status, out)
		}
		// Aligned: each column starts where its header does.
		for _, col := range []string{"HOLDER", "HOLDS", "REMAINING", "FENCE", "WAITERS"} {
			i := strings.Index(lines[0], col)
			if i <= 0 || lines[1][i-1] != ' ' || lines[1][i] == ' ' {
				t.Errorf("column %s is not aligned:\n%s", col, out)
			}
		}
		if st.redis == nil {
			return // the rest needs another application's data beside the locks
		}
		// A key of the same name that is no lock is not a lock, not an outage.
		rdb := newRDB(t, st.redis.Addr)
		rdb.Set(ctx, prefix+"string", "x", time.Minute)
		if status, _, stderr := run(t, "show", prefix+"string"); status != exitNotALock || !strings.Contains(stderr, "it holds a string") {
			t.Errorf("show of a string key = %d, %q", status, stderr)
		}
		status, out, stderr := run(t, "ls", prefix+"nothing*")
		if status != 0 || out != "" || !strings.Contains(stderr, "no held lock matches") {
			t.Errorf("ls with no match = %d, %q, %q", status, out, stderr)
		}
	})
	t.Run("ls --json", func(t *testing.T) {
		var js []lockJSON
		_, out, _ := run(t, "ls", "--json", prefix+"*")
		if err := json.Unmarshal([]byte(out), &js); err != nil || len(js) != 1 || js[0].Name != held || js[0].Owners[0].Holds != 1 {
			t.Errorf("ls --json = %s (%v)", out, err)
		}
		if _, out, _ := run(t, "ls", "--json", prefix+"nothing*"); strings.TrimSpace(out) != "[]" {
			t.Errorf("ls --json with no match = %q, want []", out)
		}
	})
	t.Run("unlock --force --now", func(t *testing.T) {
		forced := time.Now()
		status, out, stderr := run(t, "unlock", "--force", "--now", held)
		if status != 0 || !strings.Contains(out, "unlocked") || !strings.Contains(out, h.Owner()) {
			t.Fatalf("unlock --force = %d, %q, %q", status, out, stderr)
		}
		// The waiter is woken at once, not when the 30s lease runs out.
		select {
		case err := <-got:
			if err != nil {
				t.Errorf("the waiter: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter was not woken by the force-unlock")
		}
		t.Logf("waiter woken %v after the force-unlock", time.Since(forced))
		if status, out, _ := run(t, "unlock", "--force", held); status != 0 || !strings.Contains(out, "was not held") {
			t.Errorf("unlock --force of a free lock = %d, %q", status, out)
		}
		// The holder learns (at once, or at its next renewal).
		if err := h.Renew(ctx); !errorsIsLost(err) {
			t.Errorf("the force-unlocked holder's Renew = %v, want a loss", err)
		}
	})
}

func errorsIsLost(err error) bool {
	var le *leash.LostError
	return errors.As(err, &le)
}

// TestJSONFromTheBinary checks the JSON as a script reading the binary's
// stdout gets it.
func TestJSONFromTheBinary(t *testing.T) {
	srv := sharedRedis(t)
	store := "redis://" + srv.Addr
	name := lockName(t)
	c := newClient(t, srv.Addr, nil)
	h, err := c.Mutex(name).Lock(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(context.Background())
	for _, args := range [][]string{{"show", "--json", name}, {"ls", "--json", name}} {
		status, out, stderr := runLeash(t, store, args...)
		var v any
		if status != 0 || json.Unmarshal([]byte(out), &v) != nil || !strings.Contains(out, h.Owner()) {
			t.Errorf("leash %q = %d, %q, %q; want JSON naming the holder", args, status, out, stderr)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, c := range commands() {
		if c.hidden {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			status, out, _ := run(t, "help", c.name)
			if status != 0 || !strings.Contains(out, "usage: leash "+c.usage) || !strings.Contains(out, "Example") {
				t.Errorf("leash help %s = %d:\n%s\nwant the usage line and examples", c.name, status, out)
			}
			// -h prints the same help, on stdout, with status 0.
			if status, hout, _ := run(t, c.name, "-h"); c.name != "version" && (status != 0 || hout != out) {
				t.Errorf("leash %s -h = %d, %q; want the help text", c.name, status, hout)
			}
		})
	}
	// Every flag is documented in its command's help.
	for name, define := range map[string]func(fs *flag.FlagSet){
		"run":    func(fs *flag.FlagSet) { defineRunFlags(fs) },
		"show":   func(fs *flag.FlagSet) { new(storeFlags).register(fs); fs.Bool("json", false, "") },
		"ls":     func(fs *flag.FlagSet) { new(storeFlags).register(fs); fs.Bool("json", false, "") },
		"unlock": func(fs *flag.FlagSet) { new(storeFlags).register(fs); fs.Bool("force", false, "") },
	} {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		define(fs)
		_, out, _ := run(t, "help", name)
		fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(out, "--"+f.Name+" ") {
				t.Errorf("leash help %s does not document --%s", name, f.Name)
			}
		})
		for _, want := range []string{"Exit status", "Example"} {
			if !strings.Contains(out, want) {
				t.Errorf("leash help %s has no %q", name, want)
			}
		}
	}
	if _, out, _ := run(t, "help", "run"); !strings.Contains(out, "LEASH_FENCE") || !strings.Contains(out, "LEASH_OWNER") || !strings.Contains(out, "LEASH_NAME") {
		t.Errorf("leash help run does not name the variables the command gets")
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"help"}, exitOK, "leash <command>"},
		{[]string{"help", "store"}, exitOK, "redis+sentinel://"},
		{[]string{"help", "exit-status"}, exitOK, "76"},
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

// TestUserDataThroughTheCLI runs the operator commands and leash run on
// names that hold an application's data: each says what is there and exits
// 65, ls lists none of them, and the data keeps its type, contents and TTL.
func TestUserDataThroughTheCLI(t *testing.T) {
	srv := sharedRedis(t)
	t.Setenv(storeEnv, "redis://"+srv.Addr)
	ctx := ctxFor(t)
	rdb := newRDB(t, srv.Addr)
	prefix := lockName(t) + "/"
	visits, board, text := prefix+"visits", prefix+"leaderboard", prefix+"greeting"
	rdb.HSet(ctx, visits, "home", 10, "about", 5)                                                  // an application's counter hash
	rdb.ZAdd(ctx, board, redis.Z{Score: 100, Member: "alice"}, redis.Z{Score: 200, Member: "bob"}) // a sorted set
	rdb.Set(ctx, text, "hello", time.Hour)
	dump := func() []string {
		var out []string
		for _, k := range []string{visits, board, text} {
			d, _ := rdb.Dump(ctx, k).Result()
			out = append(out, rdb.Type(ctx, k).Val(), d)
		}
		return out
	}
	before := dump()
	textTTL := rdb.PTTL(ctx, text).Val()
	for _, tc := range []struct {
		name, found string
		args        []string
	}{
		{visits, "a hash without lock fields", []string{"show", visits}},
		{visits, "a hash without lock fields", []string{"show", "--json", visits}},
		{visits, "a hash without lock fields", []string{"unlock", "--force", visits}},
		{board, "a zset that is not a semaphore", []string{"unlock", "--force", board}},
		{board, "a zset that is not a semaphore", []string{"show", board}},
		{text, "a string", []string{"unlock", "--force", text}},
		{visits, "a hash without lock fields", []string{"run", "--no-wait", visits, "--", "sh", "-c", "echo ran"}},
		{text, "a string", []string{"run", "--wait", "1h", text, "--", "sh", "-c", "echo ran"}},
	} {
		status, out, stderr := run(t, tc.args...)
		if status != exitNotALock || !strings.Contains(stderr, tc.found) || !strings.Contains(stderr, tc.name) {
			t.Errorf("leash %s = %d, stderr %q; want %d and a line saying it holds %s", strings.Join(tc.args, " "), status, stderr, exitNotALock, tc.found)
		}
		if strings.Contains(out, "held") || strings.Contains(out, "home") || strings.Contains(out, "ran") || strings.Contains(out, "unlocked") {
			t.Errorf("leash %s printed %q, want nothing on stdout", strings.Join(tc.args, " "), out)
		}
	}
	if status, out, _ := run(t, "ls", prefix+"*"); status != 0 || out != "" {
		t.Errorf("ls = %d, %q; want 0 and no lock listed", status, out)
	}
	if after := dump(); !slices.Equal(after, before) {
		t.Errorf("the data changed: %q, was %q", after, before)
	}
	if rdb.PTTL(ctx, visits).Val() != -1 || rdb.PTTL(ctx, board).Val() != -1 {
		t.Errorf("a key without expiry got one")
	}
	if ttl := rdb.PTTL(ctx, text).Val(); ttl <= 0 || ttl > textTTL {
		t.Errorf("the string's TTL is %v, want at most the %v it had", ttl, textTTL)
	}
}

// TestKeyPrefixFlag checks that --key-prefix lets the operator commands see
// the locks of services that use redisstore.Options.KeyPrefix, by their
// unprefixed names, and leave the application's key of the same name alone.
func TestKeyPrefixFlag(t *testing.T) {
	srv := sharedRedis(t)
	t.Setenv(storeEnv, "redis://"+srv.Addr)
	ctx := ctxFor(t)
	rdb := newRDB(t, srv.Addr)
	const prefix = "svc:"
	name := lockName(t) + "/orders"
	rdb.Set(ctx, name, "hello", 0) // the application's key
	// The test server marked only leash:epoch as fresh, not svc:leash:epoch.
	store := redisstore.New(rdb, &redisstore.Options{KeyPrefix: prefix})
	if err := store.MarkFresh(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := leash.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(ctx)
	if status, out, stderr := run(t, "show", "--key-prefix", prefix, name); status != 0 || !strings.Contains(out, h.Owner()) {
		t.Errorf("show --key-prefix = %d, %q, %q; want the holder", status, out, stderr)
	}
	if status, out, _ := run(t, "ls", "--key-prefix", prefix, lockName(t)+"/*"); status != 0 || !strings.Contains(out, name+" ") {
		t.Errorf("ls --key-prefix = %d, %q; want %q listed", status, out, name)
	}
	if status, _, stderr := run(t, "show", name); status != exitNotALock {
		t.Errorf("show without the prefix = %d, %q; want %d (the application's string)", status, stderr, exitNotALock)
	}
	if status, _, stderr := run(t, "show", "--key-prefix", "{bad}", name); status != exitUsage {
		t.Errorf("show --key-prefix {bad} = %d, %q; want %d", status, stderr, exitUsage)
	}
}

// TestBadPatternBeforeTheStore: a pattern that is no glob (a lone '\' at
// its end) is a usage error (64) said before any network call — the store
// named cannot be reached, which would be 69 — for ls and jobs alike.
func TestBadPatternBeforeTheStore(t *testing.T) {
	for _, cmd := range []string{"ls", "jobs"} {
		if status, _, stderr := runLeash(t, "redis://127.0.0.1:1", cmd, `a\`); status != exitUsage || !strings.Contains(stderr, "lone") {
			t.Errorf("leash %s 'a\\' = %d, %q; want %d and the pattern's fault", cmd, status, stderr, exitUsage)
		}
	}
}
