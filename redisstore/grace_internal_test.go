package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/redis/go-redis/v9"
)

func TestSlotTagHashesToItsSlot(t *testing.T) {
	for sl := range 16384 {
		if got := slot("leash:epoch:{" + slotTag(sl) + "}"); got != sl {
			t.Fatalf("slot of the marker for slot %d = %d", sl, got)
		}
	}
}

func TestParseFactsStartNeverBeforeTheRealStart(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\nserver_time_usec:1700000005999999\r\nuptime_in_seconds:5\r\n# Replication\r\nrole:master\r\nsecond_repl_offset:-1\r\n"
	// Both ends of uptime_in_seconds are truncated: the real uptime is in
	// (4s, 6s), so the latest possible start is 4s before server_time_usec,
	// 1700000001999999; rounded up to a whole second, as every client of the
	// process reads it (see TestEveryClientReadsOneStart).
	var f serverFacts
	if parseFacts(&f, info); f.startUS != 1700000002000000 || f.runID != "abc" {
		t.Errorf("parseFacts start = %d, run id %q; want 1700000002000000 (the latest possible start, rounded up), abc", f.startUS, f.runID)
	}
	for _, promoted := range []string{
		strings.Replace(info, "second_repl_offset:-1", "second_repl_offset:1234", 1),
		strings.Replace(info, "role:master", "role:slave", 1),
		strings.Replace(info, "server_time_usec:1700000005999999\r\n", "", 1),
	} {
		f = serverFacts{}
		if parseFacts(&f, promoted); f.startUS != 0 {
			t.Errorf("parseFacts(%q) start = %d, want none (the grace starts when the script runs)", promoted, f.startUS)
		}
	}
}

// TestEveryClientReadsOneStart: views of one server process read at
// different times, a second of its clock apart, carry the same start, so
// that the marker one client writes is the view of every other and their
// scripts take quick_over's few comparisons (see graceArg).
func TestEveryClientReadsOneStart(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	s := New(rdb, nil)
	first := s.watch.refresh(ctx, nil, rdb)
	if first.startUS == 0 || !strings.HasPrefix(first.view, strconv.FormatInt(first.startUS, 10)+":") {
		t.Fatalf("the first view %q has not its start %d", first.view, first.startUS)
	}
	// The server's clock moves on to another second: its uptime_in_seconds
	// has grown by one, or server_time_usec is in the same second still.
	for sec := rdb.Time(ctx).Val().Unix(); rdb.Time(ctx).Val().Unix() == sec; {
		time.Sleep(10 * time.Millisecond)
	}
	if second := s.watch.refresh(ctx, nil, rdb); second.view != first.view {
		t.Errorf("views read a second apart: %q, then %q; want one", first.view, second.view)
	}
}

// TestGraceEndAnswersOnlyForItsView: the end of the grace that a grace
// argument carries ("<end µs>=", see graceArg) tells the grace is over only
// when the marker is the argument's own view, or MarkFresh's "0:<id>" of
// the view's process (quick_over in lua/lib.lua). A marker another client
// wrote with a later start (its grace ends later), a marker that is only the
// start of the view, MarkFresh's marker of another process, or an end whose
// digits are not a time's, is judged by the whole rule. Each case checks
// both the answer of grace.lua and whether quick_over gave it.
func TestGraceEndAnswersOnlyForItsView(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	f := New(rdb, nil).watch.refresh(ctx, nil, rdb)
	now := rdb.Time(ctx).Val().UnixMicro()
	// An hour's grace: a start a second back is inside it however slowly the
	// cases run, one two hours back long past it.
	const sec, grace = int64(time.Second / time.Microsecond), int64(time.Hour / time.Microsecond)
	view := func(start int64) string { return strconv.FormatInt(start, 10) + ":" + f.id }
	arg := func(end string, start int64) string {
		return end + "=" + strconv.FormatInt(grace, 10) + "@" + view(start)
	}
	ends := func(start int64) string { return strconv.FormatInt(start+grace, 10) }
	quick := redis.NewScript(libFor("quick_over() now_us()") + `
local _, now_s = now_us()
if quick_over(ARGV[1], ARGV[2], now_s) then
    return 1
end
return 0`)
	for _, tc := range []struct {
		name, marker, arg string
		over, quick       bool
	}{
		{"the view's marker, grace over", view(now - 7200*sec), arg(ends(now-7200*sec), now-7200*sec), true, true},
		{"the view's marker, grace running", view(now - sec), arg(ends(now-sec), now-sec), false, false},
		// The end is the view's (over); the marker's start is later.
		{"a marker with a later start", view(now - sec), arg(ends(now-7200*sec), now-7200*sec), false, false},
		// The end says over, and the marker is where the view begins, but
		// it names another process: the grace counts from the view's start.
		{"a marker that is the start of the view", view(now - sec)[:len(view(now-sec))-20], arg(ends(now-7200*sec), now-sec), false, false},
		// "10" sorts before any 16-digit time, as if long over.
		{"an end of two digits", view(now - sec), arg("10", now-sec), false, false},
		{"no end, grace over", view(now - 7200*sec), strconv.FormatInt(grace, 10) + "@" + view(now-7200*sec), true, false},
		{"MarkFresh's marker, the view's grace running", "0:" + f.id, arg(ends(now-sec), now-sec), true, true},
		// Another process's marker: the view's start is the grace's.
		{"MarkFresh's marker of another process", "0:" + strings.Repeat("f", 40), arg(ends(now-sec), now-sec), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := rdb.Set(ctx, epochKey, tc.marker, 0).Err(); err != nil {
				t.Fatal(err)
			}
			left, err := graceScript.Run(ctx, rdb, []string{epochKey}, tc.arg).Int64()
			if err != nil || (left == 0) != tc.over || left < 0 {
				t.Errorf("grace left for marker %q, argument %q = %d ms, %v; want over %v", tc.marker, tc.arg, left, err, tc.over)
			}
			q, err := quick.Run(ctx, rdb, nil, tc.arg, tc.marker).Int64()
			if err != nil || (q == 1) != tc.quick {
				t.Errorf("quick_over(%q, %q) = %d, %v; want %v", tc.arg, tc.marker, q, err, tc.quick)
			}
		})
	}
}

func TestParseGrace(t *testing.T) {
	for _, tc := range []struct {
		in any
		ok bool
	}{
		{[]any{int64(0), int64(1500), "grace"}, true},
		{[]any{int64(0), int64(1500)}, false},        // a busy lock
		{[]any{int64(1), int64(7), int64(1)}, false}, // a grant
		{[]any{int64(0), int64(0), "grace"}, false},  // no time left
		{[]any{int64(0), int64(5), int64(3)}, false}, // not the grace
		{[]any{int64(0), "x", "grace"}, false},       // bad type
		{"OK", false},
	} {
		if _, ok := parseGrace(tc.in); ok != tc.ok {
			t.Errorf("parseGrace(%#v) ok = %v, want %v", tc.in, ok, tc.ok)
		}
	}
}

// TestConfirmGivesBackAGrantOnANewProcess: an acquire whose view of the
// server was read before a restart from a snapshot, and whose script ran on
// a connection dialed after it, is granted by the restored marker (the
// marker-only blind spot); confirm sees the dial, reads the new run id, and
// gives the grant back. Its reply may have been lost and the script sent
// again (go-redis resends a command whose connection ended, a pipeline
// whole): the resend re-entered the lock, so the owner holds it twice, and
// confirm must give back both holds, or the acquire's next run would find
// the lock still held by its owner and re-enter it again, granted inside
// the new process's grace.
func TestConfirmGivesBackAGrantOnANewProcess(t *testing.T) {
	for _, sends := range []int{1, 2} {
		t.Run(fmt.Sprintf("sent %d times", sends), func(t *testing.T) {
			srv := testserver.NewRedis(t, testserver.RedisOptions{})
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 1})
			defer rdb.Close()
			ctx := context.Background()
			s := New(rdb, nil)
			stale := s.watch.facts(ctx, nil, rdb) // the view before the restart
			if err := rdb.Save(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			req := driver.Request{Kind: driver.KindMutex, Name: "test/confirm", Owner: owner(0), Lease: time.Minute}
			keys := []string{req.Name, tokenKey(req.Name), fairQueueKey(req.Name), fairPlacesKey(req.Name), epochKey}
			args := []any{ms(req.Lease), req.Owner, s.graceArg(req.Lease, stale)}
			var v any
			for i := range sends {
				var err error
				v, err = acquireScript.Run(ctx, rdb, keys, args...).Result() // the first dials: the old connection is dead
				if err != nil || !isGrant(v) {
					t.Fatalf("send %d of the acquire with the stale view = %v, %v; want granted (the blind spot confirm covers)", i+1, v, err)
				}
			}
			if holds := rdb.HGet(ctx, req.Name, req.Owner).Val(); holds != strconv.Itoa(sends) {
				t.Fatalf("holds after %d sends = %q", sends, holds)
			}
			keep, err := s.confirm(ctx, epochKey, stale, v, []driver.Request{req})
			if keep || err != nil {
				t.Fatalf("confirm = %v, %v; want the grant given back", keep, err)
			}
			if n, _ := rdb.Exists(ctx, req.Name).Result(); n != 0 {
				t.Errorf("the grant is still on the server after confirm gave it back: %v", rdb.HGetAll(ctx, req.Name).Val())
			}
			fresh := s.watch.facts(ctx, nil, rdb)
			if fresh.runID == stale.runID {
				t.Fatalf("the Store still names the old process")
			}
			v, err = acquireScript.Run(ctx, rdb, keys, ms(req.Lease), req.Owner, s.graceArg(req.Lease, fresh)).Result()
			if _, inGrace := parseGrace(v); err != nil || !inGrace {
				t.Errorf("acquire with the new view = %v, %v; want refused by the grace", v, err)
			}
		})
	}
}

// TestBusyInfoIsNotADeniedInfo: an INFO answered BUSY (a long script runs)
// fails only the acquires of that moment; it is not taken for an ACL that
// denies INFO, which would fail every acquire until the next reconnection.
func TestBusyInfoIsNotADeniedInfo(t *testing.T) {
	srv := testserver.NewRedis(t, testserver.RedisOptions{Args: []string{"--busy-reply-threshold", "50"}})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer rdb.Close()
	spinner := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 10 * time.Second})
	defer spinner.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := New(rdb, nil)
	done := make(chan error, 1)
	// Owner: this test. Ends when the script has spun for 1s.
	go func() {
		done <- spinner.Eval(ctx, `local t = redis.call('time'); local s = t[1] * 1000000 + t[2]
while true do t = redis.call('time'); if t[1] * 1000000 + t[2] - s > 1000000 then return 1 end end`, nil).Err()
	}()
	for {
		f := s.watch.refresh(ctx, nil, rdb)
		if f.infoErr != nil {
			t.Fatalf("INFO during a busy script recorded as denied: %v", f.infoErr)
		}
		if f.fetchErr != nil && strings.Contains(f.fetchErr.Error(), "BUSY") {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("INFO never answered BUSY")
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.check(ctx, rdb, s.watch.facts(ctx, nil, rdb)); err != nil {
		t.Errorf("check after the script ended = %v, want nil", err)
	}
}
