package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

func cmdLs() *command {
	return &command{
		name:  "ls",
		usage: "ls [--json] [store flags] [PATTERN]",
		short: "list held locks whose names match a pattern",
		long: `
Ls lists the locks held in the store whose names match PATTERN, a glob ("*"
matches anything, "?" one character, "\" quotes the next; Redis also takes
"[ab]", a set; default "*"), sorted by name, with the kind, holder, hold
count, lease left, last fencing token and waiters of each. Ls needs a store
with administration (every store leash ships has it); on one without, it
exits 64 before any round trip. On Redis, it walks the keyspace with SCAN, never KEYS, so it
does not block the server; on a Cluster it walks every master. A key counts as a lock
when it has the lock layout: a hash with an expiry whose fields are owners
"<id>:<n>" with hold counts, and perhaps a readers-writer "mode" (locks taken
by Redisson's RLock are listed too), or a semaphore's sorted set of owners
with leash's permit count beside it. show, unlock and every lock operation
judge a key by the same rule; other keys are another application's data,
never listed and never touched. Free locks are not listed; 'leash show NAME'
shows any lock.

KIND is mutex (a Mutex, FairMutex or Redisson lock), read or write (an
RWMutex) or permit (a Semaphore); the readers and permits after the first
are listed on lines of their own. HOLDER is host:pid, then the holder's
[label] and (command) when it has them, then "tail" when its job has ended
and the lock is only kept until its lease runs out (leash run --at-least);
it is the owner id when the holder keeps no record (a Redisson client).
'leash show NAME' prints the holder in full. While the server is in its
restart grace (see 'leash help store'), or may evict keys, ls says so on
stderr.

  --json   print a JSON array of objects as 'leash show --json' prints them
           ([] when no lock matches)
` + storeHelp + `

Exit status: 0, also when no lock matches (ls then prints nothing on
stdout); 64 for a bad URL or a store without administration, 69 when the
store cannot be reached, 77 when it refuses the credentials.

Examples:

  $ leash ls 'billing/*'
  NAME             KIND   HOLDER                                  HOLDS  REMAINING  FENCE             WAITERS
  billing/invoice  mutex  web-2:41873 [billing worker v1.4]       1      27.412s    1763800000123456  1
  billing/payout   mutex  cron-1:5120 (./payout.sh --day today)   1      4.907s     1763800000654321  0
  billing/report   mutex  cron-3:7781 (./report.sh) tail          1      9m12.5s    1763800000777777  0

  $ leash ls --json | jq -r '.[] | select(.waiters > 0) | .name'`,
		run: runLs,
	}
}

func runLs(e *env, argv []string) int {
	c := cmdLs()
	var asJSON bool
	sf, operands, err := parseOperator(e, c, argv, func(fs *flag.FlagSet) { fs.BoolVar(&asJSON, "json", false, "print JSON") })
	if err != nil {
		return exitParse(err)
	}
	if len(operands) > 1 {
		return e.fail("ls", usageErrorf("ls takes at most one pattern, got %d (quote a pattern, or the shell expands it): leash %s", len(operands), c.usage))
	}
	pattern := "*"
	if len(operands) == 1 {
		pattern = operands[0]
	}
	if _, err := driver.Glob(pattern); err != nil {
		return e.fail("ls", usageErrorf("pattern %q: %v", pattern, err))
	}
	ctx := context.Background()
	var admin driver.Admin
	conn, err := openStore(ctx, sf, func(c *conn) (err error) {
		admin, err = c.admin("ls")
		return err
	})
	if err != nil {
		return e.fail("ls", err)
	}
	defer conn.Close()
	names, err := admin.List(ctx, pattern)
	if err != nil {
		return e.fail("ls", conn.fail(err))
	}
	infos := []lockJSON{}
	var held []driver.Info
	for _, name := range names {
		// From the store, not a Client: the walk also finds locks that
		// other clients took under names leash refuses (Redisson allows more).
		info, err := admin.Inspect(ctx, name)
		if errors.Is(err, leash.ErrNotALock) {
			continue // replaced by other data since the walk
		}
		if err != nil {
			return e.fail("ls", conn.fail(err))
		}
		if info.Held { // not released since the walk
			held = append(held, info)
		}
	}
	hs := readHolders(ctx, conn.store, func(err error) { e.errorf("ls: holders unknown: %v", conn.fail(err)) }, held...)
	for _, info := range held {
		infos = append(infos, toJSON(info, hs))
	}
	if _, note := conn.graceNote(ctx, ""); note != "" {
		fmt.Fprintln(e.stderr, "leash: ls: "+note)
	}
	if asJSON {
		if err := writeJSON(e.stdout, infos); err != nil {
			return e.fail("ls", err)
		}
		return exitOK
	}
	if len(held) == 0 {
		fmt.Fprintf(e.stderr, "leash: ls: no held lock matches %q\n", pattern)
		return exitOK
	}
	printLocks(e.stdout, held, hs)
	return exitOK
}
