package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/redisstore"
)

// graceHint is what an operator can do about the restart grace.
const graceHint = "if the server is new, or lost nothing, an operator can declare it with 'leash mark-fresh --force'; see 'leash help store'"

// graceHelp explains the restart grace, for the help pages.
const graceHelp = `
The restart grace. A Redis server that restarts without persistence, from an
RDB snapshot or from an AOF without appendfsync always, or a replica that is
promoted, may have lost locks whose holders still run. leash notices (the
server's INFO run_id differs from the one recorded in the leash:epoch key)
and grants no lock, of any kind, until every lease the old server could have
granted has run out: one lease (30s by default) after the server started or
was promoted. A brand-new server is judged the same way, since leash cannot
tell it from one that lost its data. A lock refused in the grace is reported
as such, never as "held by another owner": run waits it out, or with
--no-wait exits 75 and says so on stderr even with --quiet; show and ls
print how long it has left. A provisioning step that knows the server is new
can run 'leash mark-fresh --force'. leash also refuses a server that may
evict keys (maxmemory with a maxmemory-policy other than noeviction): run
CONFIG SET maxmemory-policy noeviction, or give locks a Redis of their own.`

// graceNote returns the restart grace left for fresh grants of name with
// the default lease, and a line about it when the store refuses fresh grants
// (the grace, an evicting or unsafe server), or "". The note is advice:
// other errors are left to the command's own calls.
func (c *conn) graceNote(ctx context.Context, name string) (time.Duration, string) {
	rs, ok := c.store.(redisStore)
	if !ok {
		return 0, "" // no restart grace: a Redis store's
	}
	left, err := rs.GraceLeft(ctx, name, leash.DefaultLease)
	switch {
	case errors.Is(err, redisstore.ErrEvictable), errors.Is(err, redisstore.ErrNotDurable), errors.Is(err, redisstore.ErrNoServerInfo):
		return 0, "warning: no lock can be taken: " + oneLine(strings.TrimPrefix(err.Error(), "redisstore: "))
	case err != nil || left <= 0:
		return 0, ""
	}
	return left, fmt.Sprintf("note: the lock server restarted, or is new, and may have forgotten leases that still run: no lock is granted for %v more, so that they run out (the restart grace; %s)",
		left.Round(100*time.Millisecond), graceHint)
}

func cmdMarkFresh() *command {
	return &command{
		name:  "mark-fresh",
		usage: "mark-fresh --force [store flags]",
		short: "declare a new lock server, so that it grants at once (no restart grace)",
		long: `
Mark-fresh declares that the store's server holds no lease granted before it
started: a server just provisioned, empty. leash then grants locks on it at
once, where it would otherwise wait out the restart grace of a new server
(see below). On Cluster it marks every slot, each with its node's run id.

WARNING: run it only on a server known to be new. After a restart that lost
data (no persistence, an RDB snapshot, appendfsync everysec, a promoted
replica), leases that still run are forgotten, and marking the server fresh
hands their locks to a second holder while the first still runs: the double
grant the grace exists to prevent. It is undone by the server's next restart.

  --force  required: declare the server new
` + graceHelp + `
` + storeHelp + `

Mark-fresh is for Redis stores only: other stores have no restart grace.

Exit status: 0 when marked; 64 without --force, for a bad URL or a store
that is not Redis, 69 when the store cannot be reached, 77 when it refuses
the credentials.

Example (a provisioning script, right after creating the server):

  leash mark-fresh --force --store redis://10.0.0.7:6379`,
		run: runMarkFresh,
	}
}

func runMarkFresh(e *env, argv []string) int {
	c := cmdMarkFresh()
	var force bool
	sf, names, err := parseOperator(e, c, argv, func(fs *flag.FlagSet) {
		fs.BoolVar(&force, "force", false, "declare the server new")
	})
	if err != nil {
		return exitParse(err)
	}
	switch {
	case len(names) != 0:
		return e.fail("mark-fresh", usageErrorf("mark-fresh takes no operands, got %q: leash %s", strings.Join(names, " "), c.usage))
	case !force:
		return e.fail("mark-fresh", usageErrorf("mark-fresh needs --force: on a server that lost data it brings back double grants; see 'leash help mark-fresh'"))
	}
	ctx := context.Background()
	var rs redisStore
	conn, err := openStore(ctx, sf, func(c *conn) (err error) {
		rs, err = c.redisOnly("mark-fresh")
		return err
	})
	if err != nil {
		return e.fail("mark-fresh", err)
	}
	defer conn.Close()
	if err := rs.MarkFresh(ctx); err != nil {
		return e.fail("mark-fresh", conn.fail(err))
	}
	fmt.Fprintf(e.stdout, "marked %s fresh: locks are granted at once, with no restart grace\n", conn.desc)
	return exitOK
}

// graceWhy explains a refusal in the restart grace.
func graceWhy(na *leash.NotAcquiredError) string {
	left := ""
	if na.Remaining >= 0 {
		left = fmt.Sprintf(" for %v more", na.Remaining.Round(100*time.Millisecond))
	}
	return fmt.Sprintf("the lock server restarted, or is new, and may have forgotten leases that still run, so no lock is granted%s (the restart grace, not another holder; %s)", left, graceHint)
}
