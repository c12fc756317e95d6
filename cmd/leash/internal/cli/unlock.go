package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/leash-go/leash/driver"
)

func cmdUnlock() *command {
	return &command{
		name:  "unlock",
		usage: "unlock --force [store flags] NAME",
		short: "delete a lock whoever holds it, and wake its waiters",
		long: `
Unlock --force deletes the lock NAME whoever holds it, and wakes its waiters
at once: the next one takes it without waiting for the lease to run out. It
is the operator's tool for a lock whose holder is known to be gone or stuck.

--force is required, because the lock may still have a live holder: that
holder learns of it at its next renewal (within a third of its lease) and, if
it is 'leash run', stops its command; meanwhile both may run. The holder's
writes carry an older fencing token, which fenced resources reject.

Unlock prints who held the lock. Unlocking a free lock is not an error. A
name that holds something other than a lock (another application's key, a
plain hash, a sorted set) is never deleted: unlock says what it holds and
exits 65.

  --force  required: delete the lock whoever holds it
` + storeHelp + `

Exit status: 0 when the lock was deleted or was already free; 64 without
--force, for a bad name or URL, or a store without administration, 65 when
the name holds something that is not a lock (nothing was deleted), 69 when
the store cannot be reached, 77 when it refuses the credentials.

Examples:

  $ leash unlock --force nightly-report
  unlocked "nightly-report": it was held by 3f0c9a4e1b2d4c6f8a9b0c1d2e3f4a5b:1 (fence 1763800000123456)`,
		run: runUnlock,
	}
}

func runUnlock(e *env, argv []string) int {
	c := cmdUnlock()
	var force bool
	sf, names, err := parseOperator(e, c, argv, func(fs *flag.FlagSet) {
		fs.BoolVar(&force, "force", false, "delete the lock whoever holds it")
	})
	if err != nil {
		return exitParse(err)
	}
	switch {
	case len(names) != 1:
		return e.fail("unlock", usageErrorf("unlock takes one lock name, got %d: leash %s", len(names), c.usage))
	case !force:
		return e.fail("unlock", usageErrorf("unlock needs --force: it deletes %q whoever holds it, and a live holder keeps running until its next renewal", names[0]))
	}
	ctx := context.Background()
	var admin driver.Admin
	conn, err := openStore(ctx, sf, func(c *conn) (err error) {
		admin, err = c.admin("unlock")
		return err
	}, names[0]) // checks the name
	if err != nil {
		return e.fail("unlock", err)
	}
	defer conn.Close()
	info, err := admin.Inspect(ctx, names[0])
	if err != nil {
		return e.fail("unlock", conn.fail(err))
	}
	deleted, err := admin.ForceRelease(ctx, names[0])
	if err != nil {
		return e.fail("unlock", conn.fail(err))
	}
	if !deleted {
		fmt.Fprintf(e.stdout, "lock %q was not held\n", names[0])
		return exitOK
	}
	holder := "another owner"
	if len(info.Owners) > 0 {
		holder = info.Owners[0].Owner
	}
	fmt.Fprintf(e.stdout, "unlocked %q: it was held by %s (fence %d)\n", names[0], holder, info.Fence)
	return exitOK
}
