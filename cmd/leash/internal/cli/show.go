package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/leash-go/leash/driver"
)

func cmdShow() *command {
	return &command{
		name:  "show",
		usage: "show [--json] [store flags] NAME",
		short: "show who holds a lock, its lease left, fencing token and waiters",
		long: `
Show prints the state of the lock NAME as the store sees it: whether it is
held and by what kind of lock (a mutex, an RWMutex's readers or writer, a
semaphore's permits), the holders (owner ids) with their hold counts or, for
readers and permits, each one's own lease left, who each holder is (host,
process id, label, and for leash run the command; when it took the lock; and
whether its job still runs or has ended, the lock only kept until its lease
runs out by --at-least), the lease left, the last
fencing token granted, a semaphore's permit count, how many waiters hold a
place in a fair queue or a waiting-writer mark, and how many clients wait.
A free lock prints its last fencing token, if it was ever taken. The answer
can be stale by the time it is read: never base a locking decision on it.
A name that holds something other than a lock (another application's key)
is not shown as a lock: show says what it holds, on stderr, and exits 65.

  --json   print one JSON object:
           {"name": "...", "kind": "mutex", "held": true,
            "owners": [{"owner": "...", "holds": 1, "kind": "mutex",
                        "host": "cron-1", "pid": 5120,
                        "command": "./report.sh",
                        "acquired_at": "2026-11-24T03:00:00.12Z",
                        "state": "held"}],
            "remaining_ms": 27412, "fence": 1763800000123456, "queued": 0,
            "waiters": 2}
           kind is "mutex", "read", "write" or "permit" ("" when free); an
           owner with a lease of its own (a reader, a permit) has its own
           "remaining_ms"; "permits" is present for a semaphore. host, pid,
           label and command are absent when the holder keeps no record (a
           Redisson client); acquired_at and state when its record does not
           list the lock yet. state is "held" while the holder works under
           the lock (leash run: the command runs) and "tail" once the work
           ended and the lock is kept until its lease runs out, since
           "tail_since".
           remaining_ms is null when the lock is not held, waiters null when
           the store cannot tell. "restart_grace_ms" is present while the
           server's restart grace refuses every fresh grant (see below).

When the server is in its restart grace, or is not safe for locks (it may
evict keys), show says so on a last line (on stderr with --json).
` + graceHelp + `
` + storeHelp + `

Exit status: 0 whether the lock is held or free; 64 for a bad name or URL,
or a store without administration (show needs it, as ls and unlock do; a
store that keeps no holder records shows owner ids only), 65 when the name
holds something that is not a lock, 69 when the store cannot be reached, 77
when it refuses the credentials.

Examples:

  $ leash show nightly-report
  lock       nightly-report
  state      held
  kind       mutex (a Mutex, FairMutex or Redisson lock)
  holder     3f0c9a4e-1b2d-4c6f-8a9b-0c1d2e3f4a5b:1
  host       cron-1
  pid        5120
  command    ./report.sh
  acquired   2026-11-24T03:00:00.120Z (2.588s ago)
  state      the command is running
  holds      1
  remaining  27.412s
  fence      1763800000123456
  waiters    0

  $ leash show --json nightly-report | jq .remaining_ms`,
		run: runShow,
	}
}

// showJSON is show's JSON: the lock, and the restart grace left.
type showJSON struct {
	lockJSON
	RestartGraceMS int64 `json:"restart_grace_ms,omitempty"`
}

func runShow(e *env, argv []string) int {
	c := cmdShow()
	var asJSON bool
	sf, names, err := parseOperator(e, c, argv, func(fs *flag.FlagSet) { fs.BoolVar(&asJSON, "json", false, "print JSON") })
	if err != nil {
		return exitParse(err)
	}
	if len(names) != 1 {
		return e.fail("show", usageErrorf("show takes one lock name, got %d: leash %s", len(names), c.usage))
	}
	ctx := context.Background()
	var admin driver.Admin
	conn, err := openStore(ctx, sf, func(c *conn) (err error) {
		admin, err = c.admin("show")
		return err
	}, names[0]) // checks the name
	if err != nil {
		return e.fail("show", err)
	}
	defer conn.Close()
	info, err := admin.Inspect(ctx, names[0])
	if err != nil {
		return e.fail("show", conn.fail(err))
	}
	grace, note := conn.graceNote(ctx, names[0])
	hs := readHolders(ctx, conn.store, func(err error) { e.errorf("show: holder unknown: %v", conn.fail(err)) }, info)
	if asJSON {
		if note != "" {
			fmt.Fprintln(e.stderr, "leash: show: "+note)
		}
		if err := writeJSON(e.stdout, showJSON{toJSON(info, hs), grace.Milliseconds()}); err != nil {
			return e.fail("show", err)
		}
		return exitOK
	}
	printLock(e.stdout, info, hs)
	if note != "" {
		fmt.Fprintln(e.stdout, note)
	}
	return exitOK
}
