// Package schedule runs scheduled jobs on many instances of a service so
// that each tick of a job runs once across all of them: not once per
// instance, not twice when their clocks or start times differ, and not never
// when the instance running it hangs.
//
// Every instance creates a [Scheduler] on a leash Client whose store keeps
// job records (a driver.JobStore: memstore, redisstore, pgstore,
// mysqlstore and zkstore do), adds the same jobs with [Scheduler.Add], and
// calls [Scheduler.Run]:
//
//	s, err := schedule.New(client, nil)
//	err = s.Add("billing/nightly", "CRON_TZ=Europe/Berlin 0 30 2 * * *", report, nil)
//	err = s.Run(ctx) // until ctx ends; then running jobs get a grace to finish
//
// # How a tick runs once
//
// A tick is claimed, not a time window locked. Each tick of a job is the
// instant its schedule names (see [Parse]): the same on every instance,
// whatever its clock says. When an instance's clock reaches a tick, it asks
// the store to claim it, and the store decides by its own clock, in one
// atomic step:
//
//   - the tick is granted once, and only while no later tick of the job was
//     claimed: an instance whose clock runs behind and fires late finds the
//     tick taken and skips it;
//   - an instance whose clock runs ahead is told to wait until the store's
//     clock reaches the tick (less Options.Tolerance), and asks again;
//   - a tick is not granted once the store's clock passes its Lateness
//     (default: the next tick): the instance that later claims a newer tick
//     records it missed (unless the job's schedule changed in between:
//     the new schedule's ticks before were never the job's).
//
// The instance granted a tick then takes the job's run lock — a leash lock
// named after the job, with a lease renewed by the Client's watchdog and a
// fencing token ([Run.Fence]) — calls the job's function, releases the lock
// and records how the run ended. A tick that comes while the previous run
// still holds the lock (on any instance) is handled by the job's Overlap
// policy: skipped (the default), queued until its window ends, or run
// beside it up to a limit. The function's context is cancelled when the
// lock is lost (its lease ran out while the instance was paused or cut
// off, or an operator force-unlocked it), when MaxRun passes, and on
// shutdown after the grace. A force-unlocked run's lock keeps its name
// from every other run until its function returns (or the lease it had
// runs out): the run locks are taken with
// leash.LockOptions.AckRevokeOnUnlock.
//
// # The guarantee
//
// Let X be how far an instance's clock is from the store's. With every
// instance's X ahead of the store's clock by any amount, and behind it by
// less than the job's Lateness (default: the interval to the next tick)
// minus a claim's round trip:
//
//   - every tick is claimed exactly once, while any instance runs the job,
//     or recorded missed (no instance ran, or every one was too far
//     behind); no clock skew, start time or restart makes a second claim of
//     a tick, because the store refuses a tick once it or a later one was
//     claimed;
//   - no tick is claimed earlier than Options.Tolerance before its instant,
//     by the store's clock;
//   - a claimed tick runs at most once per attempt (a retry is a new
//     attempt of a run whose function returned an error, claimed the same
//     way, within the tick's window; a function that returned nil is never
//     run again for its tick); a run whose instance dies or pauses past its lease is not run
//     again: its record reads lost, its context is cancelled if the
//     instance resumes, and the next tick runs elsewhere once the lease has
//     run out (with Overlap skip, ticks that come before are skipped);
//   - runs of one job do not overlap while they hold their lock. A run
//     paused past its lease no longer holds it while it still believes it
//     does until it looks (Hold semantics): what the job writes should carry
//     [Run.Fence], which grows with every run.
//
// So X is bounded on one side only: by Lateness, which defaults to the
// job's interval. An instance further behind claims nothing (another
// instance runs the tick, or it is recorded missed); one ahead costs an
// extra round trip per tick. The lease bounds how long a dead instance's run
// keeps the next ticks from running; Tolerance is how early a run may start.
// The store's clock must not step back (Redis TIME, the database's now()).
// A claim is as durable as the store's memory of it: a Redis that loses
// acknowledged writes (a restart without appendfsync always, a failover to
// a lagging replica) may forget a claim and grant its tick again within the
// tick's window. redisstore's restart grace (no lock granted for a lease
// after a restart) makes such a tick's run lock refused, and the tick is
// recorded skipped, for ticks in that first lease.
//
// # History
//
// Every claim is recorded in the store beside the job's lock, with the
// instance (host, process id, Client id), the start and end by the store's
// clock, the outcome (ok, failed, skipped, missed, cancelled, lost) and the
// error: the last Options.Keep runs of each job, readable from any instance
// with [Scheduler.History] and from the leash CLI.
package schedule
