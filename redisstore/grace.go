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
	if !s.cluster {
		return epochKey
	}
	return epochKey + ":{" + slotTag(slot(name)) + "}"
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

// graceGrant turns a grace reply into a refusal, after trying once to lower
// a marker this call created. It returns ok false for any other reply.
func (s *Store) graceGrant(ctx context.Context, req leash.Request, v any) (g leash.Grant, retry bool, ok bool) {
	left, created, start, ok := parseGrace(v)
	if !ok {
		return leash.Grant{}, false, false
	}
	if created && s.lowerEpoch(ctx, s.markerKey(req.Name), start) {
		return leash.Grant{}, true, true
	}
	return leash.Grant{Remaining: left}, false, true
}

func (s *Store) acquireOnce(ctx context.Context, req leash.Request) (any, error) {
	keys := []string{req.Name, tokenKey(req.Name), s.markerKey(req.Name)}
	v, err := acquireScript.Run(ctx, s.rdb, keys, ms(req.Lease), req.Owner, s.graceArg(req.Lease)).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: acquire %q: %w", req.Name, err)
	}
	return v, nil
}
