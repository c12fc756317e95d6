package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leash-go/leash"
	"github.com/redis/go-redis/v9"
)

// NoRestartGrace, as Options.RestartGrace, turns the restart grace off.
const NoRestartGrace time.Duration = -1

// epochKey is the restart marker on a single server. On Cluster each hash
// slot has its own, "leash:epoch:{<tag>}", so that acquire.lua touches one slot.
const epochKey = "leash:epoch"

var (
	//go:embed lua/epoch.lua
	epochLua    string
	epochScript = redis.NewScript(epochLua)
)

// markerKey returns the restart marker that guards name.
func (s *Store) markerKey(name string) string {
	marker := s.opts.KeyPrefix + epochKey
	if !s.cluster {
		return marker
	}
	return marker + ":{" + slotTag(slot(s.key(name))) + "}"
}

// graceArg is acquire.lua's ARGV[3]: the grace for a lock of this lease in
// microseconds, or "0" when the grace is off.
func (s *Store) graceArg(lease time.Duration) string {
	g := s.opts.RestartGrace
	switch {
	case g == NoRestartGrace:
		return "0"
	case g < lease:
		g = lease
	}
	return strconv.FormatInt(g.Microseconds(), 10)
}

// parseGrace recognises acquire.lua's grace reply {0, ms, created, start}.
func parseGrace(v any) (left time.Duration, created bool, start int64, ok bool) {
	a, isArr := v.([]any)
	if !isArr || len(a) != 4 {
		return 0, false, 0, false
	}
	var n [4]int64
	for i, x := range a {
		if n[i], isArr = x.(int64); !isArr {
			return 0, false, 0, false
		}
	}
	if n[0] != 0 || n[1] <= 0 || (n[2] != 0 && n[2] != 1) {
		return 0, false, 0, false
	}
	return time.Duration(n[1]) * time.Millisecond, n[2] == 1, n[3], true
}

// lowerEpoch replaces the pessimistic start time that acquire.lua wrote
// (created, "the server started now") with the start time the server reports
// (INFO server: server_time_usec - uptime_in_seconds), so that a server that
// has been up longer than the grace, and merely never saw leash before (or
// had the marker deleted), grants at once. It reports whether it lowered the
// marker. Any failure, such as an ACL without INFO, keeps the pessimistic
// value: the grace then runs in full.
func (s *Store) lowerEpoch(ctx context.Context, marker string, created int64) bool {
	var node redis.Cmdable = s.rdb
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, marker)
		if err != nil {
			return false
		}
		node = n
	}
	info, err := node.Info(ctx, "server").Result()
	if err != nil {
		return false
	}
	start, ok := serverStart(info)
	if !ok || start >= created {
		return false
	}
	n, err := epochScript.Run(ctx, s.rdb, []string{marker}, strconv.FormatInt(created, 10), strconv.FormatInt(start, 10)).Int()
	return err == nil && n == 1
}

// serverStart returns the latest time the server may have started, in
// microseconds by its own clock, from an INFO server reply. Redis computes
// uptime_in_seconds as a difference of whole seconds (now and start time
// both truncated), so the real uptime is within a second of it either way;
// taking the later bound means the grace never ends early.
func serverStart(info string) (int64, bool) {
	var now, up int64 = -1, -1
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "server_time_usec":
			now, _ = strconv.ParseInt(v, 10, 64)
		case "uptime_in_seconds":
			up, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if now <= 0 || up < 0 {
		return 0, false
	}
	return now - (up-1)*1_000_000, true
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
// its first grants: it sets the restart marker to 0 (on Cluster, every
// slot's marker, through the node that serves it). Call it only for a server
// known to be new; after a restart without persistence, it would bring back
// the double grants the grace prevents.
func (s *Store) MarkFresh(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	marker := s.opts.KeyPrefix + epochKey
	if !s.cluster {
		return s.rdb.Set(ctx, marker, 0, 0).Err()
	}
	pipe := s.rdb.Pipeline()
	for sl := range 16384 {
		pipe.Set(ctx, marker+":{"+slotTag(sl)+"}", 0, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("redisstore: mark fresh: %w", err)
	}
	return nil
}

// runAcquire runs an acquire script for reqs (one request, or a MultiLock
// group) with the restart marker of the first name and the grace for its
// lease appended (the marker last in KEYS, the grace last in ARGV, unless
// markerFirst puts the marker first, as acquire_many.lua wants). A refusal
// inside the grace, by a marker this very call created, is retried once
// after lowering the marker from the server's real uptime: a server that has
// been up longer than the grace and merely never saw leash grants at once.
// It returns the script's reply, or, in the grace, ok false and the time
// left. With the replication guard on, a grant too few replicas
// acknowledged, or one whose outcome is unknown, is undone by releasing
// undo, the holds the script grants, and the error says why.
func (s *Store) runAcquire(ctx context.Context, script *redis.Script, undo []leash.Request,
	keys []string, args []any, markerFirst bool) (v any, left time.Duration, ok bool, err error) {
	marker := s.markerKey(undo[0].Name)
	if markerFirst {
		keys = append([]string{marker}, keys...)
	} else {
		keys = append(keys, marker)
	}
	args = append(args, s.graceArg(undo[0].Lease))
	for attempt := 0; ; attempt++ {
		var verdict error
		v, verdict, err = s.runGrant(ctx, script, keys, args)
		switch {
		case err != nil && s.guard.on() && !isReply(err):
			// The reply, or WAIT's, was lost: a grant may stand unreplicated.
			return nil, 0, false, s.undoGrant(ctx, undo, err)
		case err != nil:
			return nil, 0, false, err
		case verdict != nil && isGrant(v):
			return nil, 0, false, s.undoGrant(ctx, undo, verdict)
		}
		left, created, start, inGrace := parseGrace(v)
		if !inGrace {
			return v, 0, true, nil
		}
		if attempt > 0 || !created || !s.lowerEpoch(ctx, marker, start) {
			return nil, left, false, nil
		}
	}
}
