package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
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
	if _, cluster := rdb.(*redis.ClusterClient); cluster {
		// WAIT counts the acknowledgements of the writes made on its own
		// connection; go-redis's cluster pipelines send a keyless command
		// to whichever node they choose.
		return errors.New("redisstore: Options.Replicas is not supported on Cluster: WAIT must follow the writes on the same node's connection")
	}
	// A pipeline reads WAIT's reply with the client's ReadTimeout: the WAIT
	// must end first, or a slow replica reads as a broken connection.
	var rt time.Duration
	if c, ok := rdb.(*redis.Client); ok {
		rt = c.Options().ReadTimeout
	}
	if d == 0 {
		d = DefaultReplicaTimeout
		if rt > 0 && d >= rt {
			d = rt / 2
		}
	}
	switch {
	case d < time.Millisecond: // WAIT's unit; WAIT n 0 would wait forever
		return fmt.Errorf("redisstore: Options.ReplicaTimeout = %v: must be at least 1ms (with the client's ReadTimeout of %v)", d, rt)
	case rt > 0 && d >= rt:
		return fmt.Errorf("redisstore: Options.ReplicaTimeout = %v: must be shorter than the redis client's ReadTimeout (%v), or a slow replica reads as a broken connection", d, rt)
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
	// initGuard checked that the timeout is a whole millisecond or more and
	// ends before the client's ReadTimeout.
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
		return fmt.Errorf("WAIT (for %d of the replicas): %w", g.replicas, err)
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
// re-entry. (A resend of the script whose reply was lost re-entered the
// lock once more: that hold stays, and the core's background release of an
// acquire whose outcome is unknown, which this error is, takes every hold
// of the tenure's owner.) The release has a context of its own: the
// caller's may have ended while WAIT waited. An acquire that never reached
// the server (it could not connect) has nothing to give back.
func (s *Store) undoGrant(ctx context.Context, reqs []driver.Request, cause error) error {
	replicated := errors.Is(cause, ErrNotReplicated)
	if !replicated && neverSent(cause) {
		return cause
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.guard.timeout+time.Second)
	defer cancel()
	var undoErr error
	for _, r := range reqs {
		if _, err := s.release(rctx, r, "one"); err != nil && !errors.Is(err, leash.ErrNotHeld) {
			undoErr = err
			break
		}
	}
	switch {
	case replicated && undoErr == nil:
		return fmt.Errorf("granted, but %w; the grant was undone", cause)
	case replicated:
		return fmt.Errorf("granted, but %w; giving it back failed too (it ends with its lease): %w", cause, undoErr)
	case undoErr == nil:
		return fmt.Errorf("%w (the lock, in case it was granted, was given back)", cause)
	}
	return fmt.Errorf("%w (the lock may have been granted and could not be given back, so it ends with its lease)", cause)
}

// neverSent reports whether err shows that a command never reached the
// server: the connection could not be made.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// isReply reports whether err is an error reply from Redis (the script ran
// and failed), as against a transport or context error (the outcome is
// unknown).
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
