package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/redis/go-redis/v9"
)

// NoRestartGrace, as Options.RestartGrace, turns the restart grace off.
const NoRestartGrace time.Duration = -1

// ErrStaleView reports that an acquire's scripts kept running on another
// server process than the one the Store's view names: on Cluster, a node
// other than the one the client's slot map gave for the lock's slot (a slot
// migration or a failover the map has not caught up with), or a master that
// restarted after the Store read its INFO. The restart grace cannot be
// judged on a stale view, so each such attempt was refused before it wrote
// anything; the Store reloaded the slot map, read the node's INFO again and
// retried for about 1.3 s. Nothing was granted. It is transient, but Lock
// and TryLock return it (wrapped) rather than wait on: the caller may try
// again, and if it persists, check that the Cluster's nodes agree on the
// slot map (CLUSTER SLOTS) and that the client can reach every node.
var ErrStaleView = errors.New("redisstore: the server that ran the acquire is not the one the store read, even after reloading the slot map and the server's INFO")

// epochKey is the restart marker on a single server. On Cluster each hash
// slot has its own, "leash:epoch:{<tag>}", so that acquire.lua touches one slot.
const epochKey = "leash:epoch"

var (
	//go:embed lua/grace.lua
	graceLua    string
	graceScript = withLib(graceLua)
	//go:embed lua/mark_fresh.lua
	markFreshLua    string
	markFreshScript = withLib(markFreshLua)
)

// markerKey returns the restart marker that guards name.
func (s *Store) markerKey(name string) string {
	marker := s.opts.KeyPrefix + epochKey
	if !s.cluster {
		return marker
	}
	return marker + ":{" + slotTag(slot(s.key(name))) + "}"
}

// graceArg is the acquire scripts' grace argument: "0" when the grace is
// off; otherwise the grace for a lock of this lease in microseconds, "@",
// and the view of the server process f describes (see grace_at in lib.lua),
// preceded, when the view has a start, by the end of a grace counted from
// it and "=": what lets a script tell the grace is over in two comparisons.
func (s *Store) graceArg(lease time.Duration, f *serverFacts) string {
	g := s.opts.RestartGrace
	switch {
	case g == NoRestartGrace:
		return "0"
	case g < lease:
		g = lease
	}
	us := strconv.FormatInt(g.Microseconds(), 10)
	switch {
	case s.markerOnly:
		return us
	case f.startUS > 0:
		return strconv.FormatInt(f.startUS+g.Microseconds(), 10) + "=" + us + "@" + f.view
	}
	return us + "@" + f.view
}

// parseGrace recognises an acquire script's grace reply {0, ms, "grace"}.
func parseGrace(v any) (left time.Duration, ok bool) {
	a, isArr := v.([]any)
	if !isArr || len(a) != 3 || a[0] != int64(0) || a[2] != "grace" {
		return 0, false
	}
	ms, isInt := a[1].(int64)
	if !isInt || ms <= 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// isStale reports whether v is an acquire script's {0, 0, "stale"}: its
// grace argument named another server process or Cluster node than the one
// that ran it (see grace_at in lua/lib.lua), and it wrote nothing.
func isStale(v any) bool {
	a, ok := v.([]any)
	return ok && len(a) == 3 && a[0] == int64(0) && a[2] == "stale"
}

// staleRetry paces the attempts of a script refused for a stale view: the
// first again at once, then after tryAgainFirst, each later one after twice
// the wait before, none once the wait would pass tryAgainLast (about 1.3 s
// in all, as for TRYAGAIN).
type staleRetry struct{ wait time.Duration }

// again is called when an attempt was refused for a stale view of the
// server behind marker. It reloads the Cluster slot map and reads the INFO
// (and node id) of the node the map now names, waits its turn, and returns
// nil when the attempt may be made again: ErrStaleView when the retries are
// spent, ctx's error when ctx ends first.
func (r *staleRetry) again(ctx context.Context, s *Store, marker string) error {
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx) // in the background: an attempt made before it ends retries
	}
	switch {
	case r.wait > tryAgainLast:
		return ErrStaleView
	case r.wait == 0:
		r.wait = tryAgainFirst
	default:
		t := time.NewTimer(r.wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		r.wait *= 2
	}
	if key, c, err := s.node(ctx, marker); err == nil {
		s.watch.refresh(ctx, key, c)
	}
	return ctx.Err()
}

// slotTags caches, per Cluster hash slot, a short string that hashes to it.
var slotTags struct {
	once sync.Once
	tags []string
}

// slotTag returns a hash tag whose slot is sl.
func slotTag(sl int) string {
	slotTags.once.Do(func() {
		tags := make([]string, 16384)
		left := len(tags)
		for i := 0; left > 0; i++ {
			t := strconv.FormatInt(int64(i), 36)
			if s := crc16(t) % 16384; tags[s] == "" {
				tags[s] = t
				left--
			}
		}
		slotTags.tags = tags
	})
	return slotTags.tags[sl]
}

// MarkFresh records that the server holds no lease from before its start,
// as for a newly provisioned server, so that the restart grace does not delay
// its first grants: it sets the restart marker to 0 and the server's run id
// (on Cluster, every slot's marker, through the node that serves it, with
// that node's run id). Call it only for a server known to be new; after a
// restart that lost data, it would bring back the double grants the grace
// prevents. A marker key that holds an application's data (anything but a
// marker) is left as it is, and MarkFresh returns an error matching
// driver.ErrNotALock that says what it holds.
func (s *Store) MarkFresh(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	marker := s.opts.KeyPrefix + epochKey
	mark := func(c redis.UniversalClient, keys []string) error {
		info, err := c.Info(ctx, "server", "replication").Result()
		var f serverFacts
		if err == nil {
			parseFacts(&f, info)
		}
		if err == nil && f.runID == "" {
			err = errors.New("INFO server shows no run_id")
		}
		if err != nil {
			return fmt.Errorf("redisstore: mark fresh: %w", err)
		}
		for chunk := range slices.Chunk(keys, 500) { // each round trip well within a timeout
			cmds, _ := evalPipelined(ctx, c, replicaGuard{}, len(chunk), func(i int) (*redis.Script, []string, []any) {
				return markFreshScript, chunk[i : i+1], []any{"0:" + f.id}
			})
			for i, cmd := range cmds {
				switch what, err := cmd.Text(); {
				case errors.Is(err, redis.Nil): // set
				case err != nil:
					return fmt.Errorf("redisstore: mark fresh: %w", err)
				default:
					// A marker key that holds an application's data is
					// left as it is (see lua/mark_fresh.lua).
					return fmt.Errorf("redisstore: mark fresh: %w", &driver.NotALockError{Name: chunk[i], Found: what})
				}
			}
		}
		return nil
	}
	cc, ok := s.rdb.(*redis.ClusterClient)
	if !ok {
		return mark(s.rdb, []string{marker})
	}
	byNode := map[*redis.Client][]string{}
	for sl := range 16384 {
		k := marker + ":{" + slotTag(sl) + "}"
		n, err := cc.MasterForKey(ctx, k)
		if err != nil {
			return fmt.Errorf("redisstore: mark fresh: %w", err)
		}
		byNode[n] = append(byNode[n], k)
	}
	for n, keys := range byNode {
		if err := mark(n, keys); err != nil {
			return err
		}
	}
	return nil
}

// GraceLeft returns how long the restart grace still refuses fresh grants of
// name with leases up to lease (0: none), as the next acquire would find it.
// It fails as an acquire would on a server the Store refuses (ErrEvictable,
// ErrNotDurable, ErrNoServerInfo).
func (s *Store) GraceLeft(ctx context.Context, name string, lease time.Duration) (time.Duration, error) {
	if s.err != nil {
		return 0, s.err
	}
	marker := s.markerKey(name)
	key, c, err := s.node(ctx, marker)
	if err != nil {
		return 0, err
	}
	f, err := s.usable(ctx, key, c, s.watch.facts(ctx, key, c))
	if err != nil {
		return 0, err
	}
	if s.opts.RestartGrace == NoRestartGrace {
		return 0, nil
	}
	var retry staleRetry
	for {
		v, err := graceScript.Run(ctx, s.rdb, []string{marker}, s.graceArg(lease, f)).Result()
		if e := notALock(name, v); err == nil && e != nil {
			err = e // the marker's key holds an application's data
		}
		if err != nil {
			return 0, fmt.Errorf("redisstore: restart grace of %q: %w", name, err)
		}
		ms, ok := v.(int64)
		if !ok {
			return 0, fmt.Errorf("redisstore: restart grace of %q: unexpected reply %v", name, v)
		}
		if ms >= 0 {
			return time.Duration(ms) * time.Millisecond, nil
		}
		// -1: the view names another process or node (see grace.lua).
		if err := retry.again(ctx, s, marker); err != nil {
			return 0, fmt.Errorf("redisstore: restart grace of %q: %w", name, err)
		}
		if key, c, err = s.node(ctx, marker); err == nil {
			f, err = s.usable(ctx, key, c, s.watch.facts(ctx, key, c))
		}
		if err != nil {
			return 0, err
		}
	}
}

// runAcquire runs an acquire script for reqs (one request, or a MultiLock
// group) with the restart marker of the first name and the grace for its
// lease appended (the marker last in KEYS, the grace last in ARGV, unless
// markerFirst puts the marker first, as acquire_many.lua wants). It returns
// the script's reply, or, in the grace, ok false and the time left.
//
// The grace names the server process the Store believes it talks to (see
// serverWatch). When a connection was dialed while the script ran, the
// script may have run on a process the Store had not yet read: a grant is
// then kept only if INFO still names the same process; otherwise it is given
// back, unused, and the acquire runs again with the new process's identity.
// The view may also be stale where no dial shows it (a Cluster slot that
// moved to another node under the client's slot map): the script then
// refuses before writing anything, and runAcquire reloads the view and runs
// it again (see staleRetry), or fails with ErrStaleView. With the
// replication guard on, a grant too few replicas acknowledged, or one whose
// outcome is unknown, is undone by releasing undo, the holds the script
// grants, and the error says why.
func (s *Store) runAcquire(ctx context.Context, script *redis.Script, undo []driver.Request,
	keys []string, args []any, markerFirst bool) (v any, left time.Duration, ok bool, err error) {
	marker := s.markerKey(undo[0].Name)
	if markerFirst {
		keys = append([]string{marker}, keys...)
	} else {
		keys = append(keys, marker)
	}
	args = append(args, nil)
	var retry staleRetry
	for {
		key, c, err := s.node(ctx, marker)
		if err != nil {
			return nil, 0, false, err
		}
		f, err := s.usable(ctx, key, c, s.watch.facts(ctx, key, c))
		if err != nil {
			return nil, 0, false, err
		}
		args[len(args)-1] = s.graceArgs.get(graceKey{undo[0].Lease, f}, func(k graceKey) any { return s.graceArg(k.lease, k.f) })
		var verdict error
		v, verdict, err = s.runGrant(ctx, script, keys, args)
		s.reloadSlots(ctx, err)
		switch {
		case err != nil && s.guard.on() && !isReply(err):
			// The reply, or WAIT's, was lost: a grant may stand unreplicated.
			return nil, 0, false, s.undoGrant(ctx, undo, err)
		case err != nil:
			return nil, 0, false, err
		case verdict != nil && isGrant(v):
			return nil, 0, false, s.undoGrant(ctx, undo, verdict)
		}
		if left, inGrace := parseGrace(v); inGrace {
			return nil, left, false, nil
		}
		if isStale(v) {
			if err := retry.again(ctx, s, marker); err != nil {
				return nil, 0, false, err
			}
			continue
		}
		if keep, err := s.confirm(ctx, marker, f, v, undo); keep || err != nil {
			return v, 0, err == nil, err
		}
	}
}

// confirm reports whether an acquire's reply v, run with the view of the
// server process f describes, may be kept. A grant made while a connection
// was dialed may have run on a process the Store had not read yet: unless
// INFO still names f's process, the grant is given back (its holds in undo
// released, unused) and confirm reports false, so that the acquire runs
// again under the new process's grace. Every hold of undo's owners goes
// (mode "all"), not only the one this attempt meant to add: a resend of the
// script whose reply was lost (go-redis sends a command again when its
// connection ends) re-entered the lock and added one more, and a hold left
// behind would be re-entered by the acquire's next run, which checks no
// grace for an owner that holds the lock already: a grant inside the new
// process's grace. The core's tenures each have an owner of their own, so
// every hold is this attempt's; a caller of the store that re-entered a lock
// it held before loses the earlier holds too, which its next renewal
// reports (the server changed under it). Failing to give it back is an
// error: the grant then ends with its lease, unused.
func (s *Store) confirm(ctx context.Context, marker string, f *serverFacts, v any, undo []driver.Request) (bool, error) {
	if !isGrant(v) || f.runID == "" || s.watch.dials.Load() == f.gen {
		return true, nil
	}
	if key, c, err := s.node(ctx, marker); err == nil && s.watch.refresh(ctx, key, c).id == f.id {
		return true, nil
	}
	g, _ := parseGrant(v)
	for _, r := range undo {
		// Given back without a hand-off: a grant made by this release's
		// step would go to the next waiter on a process the Store has not
		// vouched for. The grant may have been a hand-off that this
		// acquire picked up, whose wake-up is still on its way to the
		// owner's waiter (a subscriber connection that lags): recorded
		// first, so that the wake-up is not taken for a grant (see
		// givenBack).
		if g.Acquired {
			s.givenBack.add(r.Owner, g.Fence)
		}
		r.Wait = 0
		if _, err := s.release(ctx, r, "all"); err != nil && !errors.Is(err, leash.ErrNotHeld) {
			return false, fmt.Errorf("the server changed while granting, and giving the unused grant back failed (it ends with its lease): %w", err)
		}
	}
	return false, nil
}
