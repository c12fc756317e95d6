package redisstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// TestScriptInstructions counts the instructions redis-server executes per
// call of the scripts on the paths that bound throughput: an uncontended
// acquire and release, a release that hands the lock to a queued waiter,
// and a FairMutex waiter's attempt on a held lock; and the floor under the
// acquire (a script that only returns, one that runs one of the acquire's
// commands first, and one that first defines lib.lua's functions as the
// acquire does); and the batched variants of the
// uncontended acquire and release (see coalesce), as a call that carries
// one request and what each request more in a call adds; and the floor
// under those (the same Redis commands with none of leash's logic), beside
// the peers' lock and unlock scripts. It runs
// redis-server under valgrind's
// callgrind, counting only inside EVALSHA, one server per
// case; before each measured call an EVAL (not counted) puts the keys in
// the case's state. The four script cases run a second time as Redis 7
// functions (FUNCTION LOAD once, FCALL each call; see functionLibrary),
// which the store does not use: the figures say what that would save (the
// closures of lib.lua, made once per load instead of once per call).
// Instruction counts repeat within about 2 % from run to
// run whatever else the machine is doing, so two versions of the scripts
// can be compared closely, where the microseconds of INFO commandstats
// (BenchmarkScriptCost) move by tens of percent:
//
//	cd redisstore && LEASH_CALLGRIND=1 go test -run TestScriptInstructions -v .
//
// It needs valgrind (callgrind_annotate comes with it), and skips unless
// LEASH_CALLGRIND is set: under valgrind the server runs fifty times slower.
func TestScriptInstructions(t *testing.T) {
	if os.Getenv("LEASH_CALLGRIND") == "" {
		t.Skip("set LEASH_CALLGRIND=1 to count redis-server's instructions per script call (needs valgrind)")
	}
	for _, tool := range []string{"valgrind", "callgrind_annotate"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (apt-get install valgrind): %v", tool, err)
		}
	}
	const (
		calls  = 1000
		holder = "d88f154d-e078-610b-3a5f-3a574a1cc522:1"
		waiter = "d88f154d-e078-610b-3a5f-3a574a1cc523:1"
		name   = "hot"
	)
	keys := mutexKeys(name) // lock, counter, queue, places
	marker := epochKey      // a single server's restart marker
	hold := "redis.call('del', KEYS[1]) redis.call('hset', KEYS[1], ARGV[1], '1') redis.call('pexpire', KEYS[1], '30000')"
	acquireKeys := func(int) []string { return append(append([]string{}, keys...), marker) }
	acquireArgs := func(g string) []any { return []any{"30000", holder, g} }
	releaseKeysOf := func(i int) []string { return append(releaseKeys(name, latchKey(name, strconv.Itoa(i))), marker) }
	releaseArgs := func(g string) []any { return []any{holder, "30000", "all", "6000", "3000", g} }
	for _, tc := range []struct {
		name   string
		script *redis.Script
		setup  string // run before each call, on KEYS = setupKeys, ARGV = {holder, waiter}
		keys   func(i int) []string
		args   func(grace string) []any
		want   string // the measured call's reply, as fmt prints it
		fcall  bool   // measure it as a Redis 7 function too
	}{
		{"acquire, free name", acquireScript, "redis.call('del', KEYS[1])", acquireKeys, acquireArgs, "[1 * 1]", true},
		{"release, no waiter", releaseScript[0], hold, releaseKeysOf, releaseArgs, "1", true},
		{"release, handed to a queued waiter", releaseScript[0], hold +
			" local t = redis.call('time') redis.call('zadd', KEYS[3], t[1] .. '000000', ARGV[2])" +
			" redis.call('zadd', KEYS[4], (t[1] + 3) .. '000', ARGV[2])",
			releaseKeysOf, releaseArgs, "1 handed", true},
		// The floor under the acquire: a script that only returns, with the
		// acquire's keys and arguments; one that first makes one of the
		// acquire's commands (what that command costs beyond the call: the
		// TIME every fresh grant reads, the EXISTS and MGET of its first
		// steps); and one that first defines the acquire's lib.lua
		// functions, as every call of it does.
		{"return, acquire's arguments", returnScript, "redis.call('del', KEYS[1])", acquireKeys, acquireArgs, "1", false},
		{"TIME, then return", timeReturnScript, "redis.call('del', KEYS[1])", acquireKeys, acquireArgs, "1", false},
		{"EXISTS of lock and queue, then return", existsReturnScript, "redis.call('del', KEYS[1])", acquireKeys, acquireArgs, "1", false},
		{"MGET of marker and counter, then return", mgetReturnScript, "redis.call('del', KEYS[1])", acquireKeys, acquireArgs, "1", false},
		{"acquire's lib.lua, then return", libReturnScript, "redis.call('del', KEYS[1])", acquireKeys, acquireArgs, "1", false},
		{"FairMutex attempt on a held lock", acquireFairScript, "redis.call('hset', KEYS[1], ARGV[1], '1') redis.call('pexpire', KEYS[1], '30000')",
			acquireKeys, func(g string) []any { return []any{"30000", waiter, "3000", g} }, "[0 *]", true},
	} {
		outcome := func(rdb *redis.Client, v any) string {
			got := fmt.Sprint(v)
			if a, ok := v.([]any); ok && len(a) > 1 && strings.Contains(tc.want, "*") {
				a[1] = "*" // a token or a time left
				got = fmt.Sprint(a)
			}
			if strings.HasSuffix(tc.want, " handed") && rdb.HExists(context.Background(), name, waiter).Val() {
				got += " handed"
			}
			return got
		}
		n := countInstructions(t, calls, evalShaCall(tc.script), tc.setup, keys, []any{holder, waiter}, tc.keys, tc.args, outcome, tc.want)
		if !tc.fcall {
			t.Logf("%-36s %8d instructions per call", tc.name, n)
			continue
		}
		f := countInstructions(t, calls, fcallOf(scriptBodies[tc.script]), tc.setup, keys, []any{holder, waiter}, tc.keys, tc.args, outcome, tc.want)
		t.Logf("%-36s %8d instructions per call; as a function %8d (%+.0f %%)", tc.name, n, f, 100*float64(f-n)/float64(n))
	}
	// The batched scripts (see coalesce), as a batch of one and of four
	// requests on names of their own: what one more request in a batch costs.
	for _, tc := range []struct {
		name   string
		script *redis.Script
		keys   func(name string) []string
		args   func(grace string) []any
		held   bool // the request's lock is held by holder before the call
	}{
		{"acquire, free name", acquireScript, func(name string) []string { return append(mutexKeys(name), marker) },
			func(g string) []any { return []any{"30000", holder, g} }, false},
		{"release, no waiter", releaseScript[0], func(name string) []string { return append(releaseKeys(name, latchKey(name, "r")), marker) },
			func(g string) []any { return []any{holder, "30000", "all", "6000", "3000", g} }, true},
	} {
		var per [2]int64
		for j, n := range []int{1, 4} {
			var (
				keys, setup []string
				reqs        []*call
			)
			nk := len(tc.keys(""))
			for i := range n {
				keys = append(keys, tc.keys(fmt.Sprint(name, i))...)
				reqs = append(reqs, &call{keys: tc.keys(fmt.Sprint(name, i)), args: tc.args("")})
				lock := fmt.Sprintf("KEYS[%d]", nk*i+1)
				setup = append(setup, "redis.call('del', "+lock+")")
				if tc.held {
					setup = append(setup, fmt.Sprintf("redis.call('del', KEYS[%d]) redis.call('hset', %s, ARGV[1], '1') redis.call('pexpire', %s, '30000')", nk*i+3, lock, lock))
				}
			}
			// The measured call's keys and arguments as coalesce lays
			// them out; the setup's are the requests' in a row.
			args := func(g string) []any {
				for _, c := range reqs {
					c.args = tc.args(g)
				}
				_, a := batchedScripts[tc.script].batchArgs(reqs)
				return a
			}
			batchKeys, _ := batchedScripts[tc.script].batchArgs(reqs)
			per[j] = countInstructions(t, calls, evalShaCall(batchedScripts[tc.script].script), strings.Join(setup, " "), keys, []any{holder},
				func(int) []string { return batchKeys }, args,
				func(_ *redis.Client, v any) string { return fmt.Sprint(len(v.([]any))) }, fmt.Sprint(n))
		}
		t.Logf("%-36s %8d instructions per call of a batch of 1; each request more in a batch %8d", "batched "+tc.name, per[0], (per[1]-per[0])/3)
	}
	// The floor under those: batched scripts that run only the Redis
	// commands an uncontended request of the batched acquire or release
	// runs, in the same order on the same keys, with none of leash's own
	// logic around them (no shape checks, grace, token arithmetic, latch
	// reads or pcall); and, beside them, the peers' pattern, one script
	// call each, with no batching: SET NX PX then GET to lock, GET then DEL
	// to unlock. What the acquire's and release's commands cost per request
	// is what batching cannot remove (bench/NOTES.md, "What bounds the
	// uncontended rows").
	for _, tc := range []struct {
		name     string
		source   string
		held     bool                       // the request's lock is held by holder before the call
		keys     func(name string) []string // a request's keys; the call's arguments are the batch's size and the owner
		batched  bool
		wantEach string
	}{
		{"acquire's commands alone", `local t = redis.call('time')
local r = {}
for i = 0, tonumber(ARGV[1]) - 1 do
    local k = i * 5
    redis.call('exists', KEYS[k + 1], KEYS[k + 3])
    redis.call('mget', KEYS[k + 5], KEYS[k + 2])
    redis.call('set', KEYS[k + 2], t[1] .. t[2])
    redis.call('hincrby', KEYS[k + 1], ARGV[2], '1')
    redis.call('pexpire', KEYS[k + 1], '30000')
    r[i + 1] = {1, 1, 1}
end
return r`, false, func(n string) []string { return append(mutexKeys(n), marker) }, true, ""},
		{"release's commands alone", `local r = {}
for i = 0, tonumber(ARGV[1]) - 1 do
    local k = i * 5
    redis.call('exists', KEYS[k + 3], KEYS[k + 4])
    redis.call('hdel', KEYS[k + 1], ARGV[2])
    redis.call('publish', KEYS[k + 5], '0')
    r[i + 1] = 1
end
redis.call('set', KEYS[5] .. ':latch', string.rep('1', #r), 'px', '6000')
return r`, true, func(n string) []string { return append(mutexKeys(n), channelName(n)) }, true, ""},
		{"peers' lock: SET NX PX, GET", `local r = redis.call('set', KEYS[1], ARGV[2], 'nx', 'px', '30000') redis.call('get', KEYS[1]) return {r and 1 or 0}`, false, func(n string) []string { return []string{n} }, false, "[1]"},
		{"peers' unlock: GET, DEL", `if redis.call('get', KEYS[1]) == ARGV[2] then return {redis.call('del', KEYS[1])} end return {0}`, true, func(n string) []string { return []string{n} }, false, "[1]"},
	} {
		script := redis.NewScript(tc.source)
		scriptSources[script] = tc.source
		sizes := []int{1, 4}
		if !tc.batched {
			sizes = sizes[:1]
		}
		var per [2]int64
		for j, n := range sizes {
			var keys, setup []string
			for i := range n {
				nm := fmt.Sprint(name, i)
				keys = append(keys, tc.keys(nm)...)
				lock := fmt.Sprintf("KEYS[%d]", len(tc.keys(nm))*i+1)
				setup = append(setup, "redis.call('del', "+lock+")")
				switch {
				case tc.held && tc.batched:
					setup = append(setup, fmt.Sprintf("redis.call('hset', %s, ARGV[1], '1') redis.call('pexpire', %s, '30000')", lock, lock))
				case tc.held:
					setup = append(setup, fmt.Sprintf("redis.call('set', %s, ARGV[1], 'px', '30000')", lock))
				}
			}
			want := tc.wantEach
			if tc.batched {
				want = fmt.Sprint(n)
			}
			per[j] = countInstructions(t, calls, evalShaCall(script), strings.Join(setup, " "), keys, []any{holder},
				func(int) []string { return keys }, func(string) []any { return []any{n, holder} },
				func(_ *redis.Client, v any) string {
					if tc.batched {
						return fmt.Sprint(len(v.([]any)))
					}
					return fmt.Sprint(v)
				}, want)
		}
		if !tc.batched {
			t.Logf("%-36s %8d instructions per call", tc.name, per[0])
			continue
		}
		t.Logf("%-36s %8d instructions per call of a batch of 1; each request more in a batch %8d", "batched "+tc.name, per[0], (per[1]-per[0])/3)
	}
}

// A measuredCall is how countInstructions loads and calls what it measures:
// the redis-server function that collects the count (callgrind's
// --toggle-collect), a load before the first call, and one call.
type measuredCall struct {
	collect string
	load    func(context.Context, *redis.Client) error
	call    func(ctx context.Context, rdb *redis.Client, keys []string, args ...any) *redis.Cmd
}

// evalShaCall measures script as the store runs it: EVALSHA.
func evalShaCall(script *redis.Script) measuredCall {
	return measuredCall{
		collect: "evalShaCommand",
		load: func(ctx context.Context, rdb *redis.Client) error {
			return rdb.ScriptLoad(ctx, scriptSources[script]).Err()
		},
		call: func(ctx context.Context, rdb *redis.Client, keys []string, args ...any) *redis.Cmd {
			return rdb.EvalSha(ctx, script.Hash(), keys, args...)
		},
	}
}

// fcallOf measures body as a Redis 7 function (FCALL), loaded from
// functionLibrary.
func fcallOf(body string) measuredCall {
	return measuredCall{
		collect: "fcallCommand",
		load: func(ctx context.Context, rdb *redis.Client) error {
			return rdb.FunctionLoad(ctx, functionLibrary(body)).Err()
		},
		call: func(ctx context.Context, rdb *redis.Client, keys []string, args ...any) *redis.Cmd {
			return rdb.FCall(ctx, "leash_measured", keys, args...)
		},
	}
}

// functionLibrary makes body, with the lib.lua functions it calls, into a
// Redis function library whose one function, leash_measured, runs it. The
// library's top level runs once per FUNCTION LOAD, so lib.lua's closures
// are made once, and its per-call state (the top-level locals declared
// "= nil": the TIME reply, the INFO replies, owner_shaped's memo) would
// outlive a call: the function resets each of them before it runs body.
// Functions take KEYS and ARGV as arguments, and replicate their effects
// without redis.replicate_commands, which a library may not call at load.
func functionLibrary(body string) string {
	lib := strings.Replace(libFor(body), "redis.replicate_commands()", "", 1)
	var state []string
	for _, m := range perCallLocal.FindAllStringSubmatch(lib, -1) {
		for _, v := range strings.Split(m[1], ",") {
			state = append(state, strings.TrimSpace(v))
		}
	}
	reset := ""
	if len(state) > 0 {
		reset = strings.Join(state, ", ") + " = " + strings.TrimSuffix(strings.Repeat("nil, ", len(state)), ", ")
	}
	return "#!lua name=leash_measured\n" + lib + "\nlocal function body(KEYS, ARGV)\n" + body + "\nend\n" +
		"redis.register_function('leash_measured', function(keys, args)\n" + reset + "\nreturn body(keys, args)\nend)\n"
}

// The floor scripts of TestScriptInstructions.
var (
	returnSource    = "return 1"
	libReturnSource = libFor(acquireLua) + "\n" + returnSource
	returnScript    = redis.NewScript(returnSource)
	libReturnScript = redis.NewScript(libReturnSource)

	timeReturnSource   = "redis.call('time') " + returnSource
	existsReturnSource = "redis.call('exists', KEYS[1], KEYS[3]) " + returnSource
	mgetReturnSource   = "redis.call('mget', KEYS[5], KEYS[2]) " + returnSource
	timeReturnScript   = redis.NewScript(timeReturnSource)
	existsReturnScript = redis.NewScript(existsReturnSource)
	mgetReturnScript   = redis.NewScript(mgetReturnSource)
)

// scriptBodies are the bodies of the scripts TestScriptInstructions also
// measures as functions.
var scriptBodies = map[*redis.Script]string{
	acquireScript:     acquireLua,
	releaseScript[0]:  releaseLua,
	acquireFairScript: acquireFairLua,
}

// scriptSources are the sources of the scripts TestScriptInstructions runs.
var scriptSources = map[*redis.Script]string{
	batchedScripts[acquireScript].script:    batchedScripts[acquireScript].source,
	batchedScripts[releaseScript[0]].script: batchedScripts[releaseScript[0]].source,
	acquireScript:                           withLibSource(acquireLua),
	releaseScript[0]:                        withLibSource(releaseLua),
	acquireFairScript:                       withLibSource(acquireFairLua),
	returnScript:                            returnSource,
	libReturnScript:                         libReturnSource,
	timeReturnScript:                        timeReturnSource,
	existsReturnScript:                      existsReturnSource,
	mgetReturnScript:                        mgetReturnSource,
}

// countInstructions starts redis-server under callgrind, collecting only in
// m's command, and runs calls pairs of (setup EVAL, measured call of m);
// it returns the instructions per measured call.
func countInstructions(t *testing.T, calls int, m measuredCall, setup string, setupKeys []string, setupArgs []any,
	keysOf func(int) []string, argsOf func(grace string) []any, outcome func(*redis.Client, any) string, want string) int64 {
	t.Helper()
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "callgrind.out")
	cmd := exec.Command("valgrind", "--tool=callgrind", "--collect-atstart=no",
		"--toggle-collect="+m.collect, "--callgrind-out-file="+out,
		"redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waited := false
	defer func() {
		if !waited {
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), ReadTimeout: time.Minute})
	defer rdb.Close()
	for start := time.Now(); rdb.Ping(ctx).Err() != nil; time.Sleep(100 * time.Millisecond) {
		if time.Since(start) > time.Minute {
			t.Fatal("redis-server under valgrind did not answer PING within a minute")
		}
	}
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	var f serverFacts
	parseFacts(&f, info)
	run := f.runID
	// A marker an hour back: the restart grace is over, as on a server that
	// has run for a while. The grace argument is what graceArg makes of a
	// view whose start the marker holds: the end of the grace, "=", the
	// grace, "@", the view.
	start := (time.Now().Unix() - 3600) * 1_000_000
	view := strconv.FormatInt(start, 10) + ":" + run
	if err := rdb.Set(ctx, epochKey, view, 0).Err(); err != nil {
		t.Fatal(err)
	}
	grace := strconv.FormatInt(start+30_000_000, 10) + "=30000000@" + view
	if err := m.load(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	for i := range calls {
		if err := rdb.Eval(ctx, setup, setupKeys, setupArgs...).Err(); err != nil && err != redis.Nil {
			t.Fatalf("setup: %v", err)
		}
		v, err := m.call(ctx, rdb, keysOf(i), argsOf(grace)...).Result()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := outcome(rdb, v); got != want { // the case is on the path it names
			t.Fatalf("call %d: %s, want %s", i, got, want)
		}
	}
	_ = rdb.Do(ctx, "shutdown", "nosave").Err() // the connection closes: no reply
	select {
	case err := <-done:
		waited = true
		if err != nil {
			t.Logf("valgrind: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("redis-server under valgrind did not shut down within a minute")
	}
	a, err := exec.Command("callgrind_annotate", out).Output()
	if err != nil {
		t.Fatalf("callgrind_annotate: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(a)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[len(f)-2] == "PROGRAM" && f[len(f)-1] == "TOTALS" {
			total, err := strconv.ParseInt(strings.ReplaceAll(f[0], ",", ""), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return total / int64(calls)
		}
	}
	t.Fatalf("no PROGRAM TOTALS in callgrind_annotate's output:\n%s", a)
	return 0
}
