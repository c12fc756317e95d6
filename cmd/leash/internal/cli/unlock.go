package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/leash-go/leash/driver"
)

func cmdUnlock() *command {
	return &command{
		name:  "unlock",
		usage: "unlock --force [--now] [store flags] NAME",
		short: "take a lock from whoever holds it, and wake its waiters",
		long: `
Unlock --force takes the lock NAME from whoever holds it. It is the
operator's tool for a lock whose holder is stuck or gone.

On a store that can revoke (Redis, mem), the holder is told at once: a leash
holder's Lost fires with the reason "revoked", and 'leash run' stops its
command (SIGTERM) within a few round trips. The name is granted to no one
else until the holder's client has heard and acknowledged ('leash run' and
'leash cron' acknowledge once the command and its process group are gone,
after SIGKILL at --kill-after if need be), or until the lease the holder
had runs out, whichever comes first: a holder that is paused or cut off
keeps the name out of use until its lease would have ended anyway, so two
holders never overlap. Waiters are woken as soon as
the name is free. A lock held by readers or permits (many holders) is
deleted at once instead, as with --now. On other stores --force is --now.
A lock whose holders have all ended their work and only keep it until its
lease runs out ('leash run --at-least') is released at once on every store,
as those holders: someone who took the name after them is left alone.

--now deletes the lock at once and wakes its waiters, whether or not the
holder has heard: the next waiter takes it while a holder that is paused or
cut off may still act on it, until it learns (at once when it hears the
revocation, otherwise at its next renewal, within a third of its lease).
Use it when the holder is known to be dead, or when freeing the name matters
more than the overlap. Fenced resources reject the old holder's writes,
which carry an older token. --now also clears a revoked lock that waits for
its holder.

--force is required in both cases. Unlock prints who held the lock.
Unlocking a free lock is not an error. A name that holds something other
than a lock (another application's key, a plain hash, a sorted set) is
never changed: unlock says what it holds and exits 65.

  --force  required: take the lock whoever holds it
  --now    delete it at once, without waiting for the holder to hear
` + storeHelp + `

Exit status: 0 when the lock was taken or was already free; 64 without
--force, for a bad name or URL, or a store without administration, 65 when
the name holds something that is not a lock (nothing was changed), 69 when
the store cannot be reached, 77 when it refuses the credentials.

Examples:

  $ leash unlock --force nightly-report
  revoked "nightly-report": it was held by 3f0c9a4e-1b2d-4c6f-8a9b-0c1d2e3f4a5b:1 (fence 1763800000123456); its holder is told, and no one else gets it before the holder acknowledges or within 27.3s
  $ leash unlock --force --now nightly-report
  unlocked "nightly-report": it was held by 3f0c9a4e-1b2d-4c6f-8a9b-0c1d2e3f4a5b:1 (fence 1763800000123456)`,
		run: runUnlock,
	}
}

func runUnlock(e *env, argv []string) int {
	c := cmdUnlock()
	var force, now bool
	sf, names, err := parseOperator(e, c, argv, func(fs *flag.FlagSet) {
		fs.BoolVar(&force, "force", false, "take the lock whoever holds it")
		fs.BoolVar(&now, "now", false, "delete it at once, without waiting for the holder to hear")
	})
	if err != nil {
		return exitParse(err)
	}
	switch {
	case len(names) != 1:
		return e.fail("unlock", usageErrorf("unlock takes one lock name, got %d: leash %s", len(names), c.usage))
	case !force:
		return e.fail("unlock", usageErrorf("unlock needs --force: it takes %q from whoever holds it", names[0]))
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
	holder := "another owner"
	if len(info.Owners) > 0 {
		holder = info.Owners[0].Owner
	}
	if !now && tailOnly(ctx, conn.store, info) {
		freed, err := releaseTail(ctx, conn.store, names[0], info)
		if err != nil {
			return e.fail("unlock", conn.fail(err))
		}
		if len(freed) == 0 {
			fmt.Fprintf(e.stdout, "lock %q was not held by %s any more: its lease ended, and a holder that came after is left alone\n",
				names[0], holder)
			return exitOK
		}
		fmt.Fprintf(e.stdout, "unlocked %q: it was held by %s (fence %d), whose work had ended\n", names[0], strings.Join(freed, ", "), info.Fence)
		return exitOK
	}
	if rv, ok := admin.(driver.Revoker); ok && !now {
		revoked, err := rv.Revoke(ctx, names[0])
		switch {
		case err == nil && revoked:
			fmt.Fprintf(e.stdout, "revoked %q: it was held by %s (fence %d); its holder is told, and no one else gets it before the holder acknowledges or within %v\n",
				names[0], holder, info.Fence, info.Remaining.Round(time.Millisecond))
			return exitOK
		case err == nil && len(info.Revoked) > 0:
			fmt.Fprintf(e.stdout, "lock %q is revoked already, waiting for %s to acknowledge or for %v more; --now frees it at once\n",
				names[0], strings.Join(info.Revoked, ", "), info.Remaining.Round(time.Millisecond))
			return exitOK
		case err == nil:
			fmt.Fprintf(e.stdout, "lock %q was not held\n", names[0])
			return exitOK
		case !errors.Is(err, driver.ErrUnsupported):
			return e.fail("unlock", conn.fail(err))
		}
		// Readers or permits: many holders, deleted at once.
	}
	deleted, err := admin.ForceRelease(ctx, names[0])
	if err != nil {
		return e.fail("unlock", conn.fail(err))
	}
	if !deleted {
		fmt.Fprintf(e.stdout, "lock %q was not held\n", names[0])
		return exitOK
	}
	fmt.Fprintf(e.stdout, "unlocked %q: it was held by %s (fence %d)\n", names[0], holder, info.Fence)
	return exitOK
}

// tailOnly reports whether every holder of info's lock has ended its work
// and only left the lock to expire (leash run's --at-least tail), by its
// Client's record: no one acts under the lock, so it can be freed at once
// (releaseTail) rather than revoked, which would wait for an acknowledgement
// that a holder whose process has exited never sends.
func tailOnly(ctx context.Context, store driver.Store, info driver.Info) bool {
	if len(info.Owners) == 0 {
		return false
	}
	hs := readHolders(ctx, store, func(error) {}, info)
	for _, o := range info.Owners {
		h := hs[o.Owner]
		if h == nil || !h.listed || h.lock.TailSince.IsZero() {
			return false
		}
	}
	return true
}

// releaseTail frees a lock that tailOnly found left to expire, by releasing
// each holder's hold as that holder: a release names its owner, so it frees
// only what info listed. A tail may end, and someone else take the name,
// between the Inspect and here; a ForceRelease, which deletes whoever holds
// the name, would then delete the new holder's lock while it works under
// it. It returns the owners whose holds it released; an owner that held
// nothing any more is left out.
func releaseTail(ctx context.Context, store driver.Store, name string, info driver.Info) ([]string, error) {
	var freed []string
	for _, o := range info.Owners {
		err := store.Release(ctx, driver.Request{Kind: info.Kind, Name: name, Owner: o.Owner})
		switch {
		case err == nil:
			freed = append(freed, o.Owner)
		case !errors.Is(err, driver.ErrNotHeld):
			return freed, err
		}
	}
	return freed, nil
}
