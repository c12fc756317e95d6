package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leash-go/leash"
	"github.com/redis/go-redis/v9"
)

// replicaGuard is the replication guard (Options.Replicas): a WAIT at the end
// of every pipeline that grants or renews. The zero value is off.
type replicaGuard struct {
	replicas int
	timeout  time.Duration
}

// initGuard checks the guard's options against rdb and sets s.guard.
func (s *Store) initGuard(rdb redis.UniversalClient) error {
	n, d := s.opts.Replicas, s.opts.ReplicaTimeout
	switch {
	case n < 0:
		return fmt.Errorf("redisstore: Options.Replicas = %d: must be zero (no guard) or positive", n)
	case d < 0:
		return fmt.Errorf("redisstore: Options.ReplicaTimeout = %v: must be positive (zero means %v)", d, DefaultReplicaTimeout)
	case n == 0:
		return nil
	}
	if d == 0 {
		d = DefaultReplicaTimeout
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		// WAIT counts the acknowledgements of the writes made on its own
		// connection; go-redis's cluster pipelines send a keyless command
		// to whichever node they choose.
		return errors.New("redisstore: Options.Replicas is not supported on Cluster: WAIT must follow the writes on the same node's connection")
	case *redis.Client:
		if rt := c.Options().ReadTimeout; rt > 0 && d >= rt {
			return fmt.Errorf("redisstore: Options.ReplicaTimeout = %v: must be shorter than the redis client's ReadTimeout (%v), or a slow replica reads as a broken connection", d, rt)
		}
	}
	s.guard = replicaGuard{replicas: n, timeout: d}
	return nil
}

// on reports whether the guard is on.
func (g replicaGuard) on() bool { return g.replicas > 0 }

// add appends the guard's WAIT to pipe, if the guard is on.
func (g replicaGuard) add(ctx context.Context, pipe redis.Pipeliner) *redis.IntCmd {
	if !g.on() {
		return nil
	}
	// A pipeline reads its replies with the client's ReadTimeout, which
	// initGuard checked is longer than the WAIT's own timeout.
	cmd := redis.NewIntCmd(ctx, "wait", g.replicas, g.timeout.Milliseconds())
	_ = pipe.Process(ctx, cmd)
	return cmd
}

// verdict is nil when the writes before wait (a command add returned, nil
// when the guard is off) were acknowledged by enough replicas, and the
// reason otherwise: ErrNotReplicated, or the error WAIT itself returned.
func (g replicaGuard) verdict(wait *redis.IntCmd) error {
	if wait == nil {
		return nil
	}
	n, err := wait.Result()
	switch {
	case err != nil:
		return fmt.Errorf("WAIT for %d replicas: %w", g.replicas, err)
	case n < int64(g.replicas):
		return fmt.Errorf("%w: %d of %d acknowledged within %v", ErrNotReplicated, n, g.replicas, g.timeout)
	}
	return nil
}

// runGrant runs an acquire script and returns its reply: through the
// pipeliner, or, with the guard on, in a pipeline of its own that ends with
// WAIT, when verdict is the guard's on the script's writes.
func (s *Store) runGrant(ctx context.Context, script *redis.Script, keys []string, args []any) (v any, verdict, err error) {
	if !s.guard.on() {
		v, err = s.pipe.run(ctx, script, keys, args...)
		return v, nil, err
	}
	cmds, verdict := evalPipelined(ctx, s.rdb, s.guard, 1, func(int) (*redis.Script, []string, []any) {
		return script, keys, args
	})
	v, err = cmds[0].Result()
	return v, verdict, err
}

// isGrant reports whether an acquire script's reply grants: {1, ...}.
func isGrant(v any) bool {
	a, ok := v.([]any)
	return ok && len(a) > 0 && a[0] == int64(1)
}

// undoGrant gives back what an acquire for reqs may have granted, whose
// acknowledgement by the replicas failed (cause: the guard's verdict) or is
// unknown (cause: the transport's error, when the reply was lost), and
// returns the error the acquire fails with. ReleaseOne drops exactly the hold
// the acquire added: the whole lock when it was fresh, one hold of a
// re-entry. The release has a context of its own: the caller's may have
// ended while WAIT waited.
func (s *Store) undoGrant(ctx context.Context, reqs []leash.Request, cause error) error {
	what := "granted, but %w; the grant was undone"
	if !errors.Is(cause, ErrNotReplicated) {
		what = "%w (with the replication guard on: the lock, if granted, was released)"
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.guard.timeout+time.Second)
	defer cancel()
	for _, r := range reqs {
		if _, err := s.Release(rctx, r, leash.ReleaseOne); err != nil && !errors.Is(err, leash.ErrNotHeld) {
			return fmt.Errorf(what+"; releasing it failed too, and it frees itself within its lease: %w", cause, err)
		}
	}
	return fmt.Errorf(what, cause)
}

// isReply reports whether err is an error reply from Redis (the script ran
// and failed), as against a transport or context error (the outcome is
// unknown).
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
