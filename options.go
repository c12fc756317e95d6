package leash

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults for the fields of [Options] and [LockOptions].
const (
	// DefaultLease is the lease of a lock: in watchdog mode it is renewed
	// every DefaultLease/3 while held.
	DefaultLease = 30 * time.Second
	// DefaultReleaseTimeout bounds the round trip of an Unlock.
	DefaultReleaseTimeout = 5 * time.Second
	// MaxLease is the longest lease leash accepts.
	MaxLease = 7 * 24 * time.Hour
	// MinLease is the shortest lease leash accepts.
	MinLease = 10 * time.Millisecond
	// DefaultStarvation is how long a Mutex waiter waits before it is
	// starving (see Options.Starvation): about three hand-offs of a hot lock
	// on one Redis over loopback (a hand-off takes 0.3–0.5 ms there), as
	// Go's sync.Mutex uses 1 ms.
	DefaultStarvation = time.Millisecond
)

// Named values for "off" in duration fields, where zero means the default.
const (
	// NoRenewal, as RenewInterval, gives a fixed lease: the watchdog never
	// renews the lock, which expires Lease after the grant unless the holder
	// calls [Hold.Renew].
	NoRenewal time.Duration = -1
	// NoLimit, as MaxHold or Liveness in LockOptions, turns off a limit that
	// Options sets for the whole Client.
	NoLimit time.Duration = -1
	// NoStarvation, as Options.Starvation, turns the Mutex's starvation
	// mode off: waiters are never marked, and the Mutex is unfair as
	// Redisson's RLock is.
	NoStarvation time.Duration = -1
)

// Options configures a [Client]. A nil *Options means all defaults, and a zero
// field means that field's default. The lock fields are the defaults of
// every lock of the Client; [LockOptions] overrides them per lock. New copies
// the struct and never writes to it.
type Options struct {
	// Lease is the lock lease. Default DefaultLease (30s).
	Lease time.Duration

	// RenewInterval is how often the watchdog renews a held lock. Default
	// Lease/3. It must be shorter than Lease minus SafetyMargin. NoRenewal
	// turns the watchdog off: a fixed lease.
	RenewInterval time.Duration

	// SafetyMargin is how long before the server could expire a lock the
	// holder is told it lost it: the hold is valid until the send time of the
	// last successful acquire or renewal plus Lease minus SafetyMargin. It
	// covers clock-rate drift between client and server and the holder's
	// reaction time. Default Lease/20, at least 1ms. A store that allows
	// for more drift (a driver.Drifter, such as a redlock quorum) raises it
	// to its allowance.
	SafetyMargin time.Duration

	// MaxHold bounds how long a lock may be held in total, renewals included,
	// so that a hung holder cannot keep it forever. When reached, the holder
	// is told (ReasonMaxHold) and renewal stops; the lease then runs out on
	// the server (on a session store, which would keep it alive, the Client
	// releases it). Default 0: no bound.
	MaxHold time.Duration

	// Liveness, when set, opts into fake-alive detection: the holder must call
	// Hold.Touch at least this often, or it is told (ReasonStalled) and
	// renewal stops. Default 0: off.
	Liveness time.Duration

	// Starvation is how long a waiting Mutex Lock waits before it is starving,
	// as in Go's sync.Mutex: from then on its attempts keep a mark on the name
	// (a place in line, with a lease of DefaultQueueLease that the waiting Lock
	// renews, so a dead waiter's mark lapses), and every other Mutex or
	// FairMutex acquirer of the name, TryLock included, waits behind the marks,
	// which are served in the order they were made; a Lock that finds marks
	// queued marks the name at once, and so does a Lock of a name on which a
	// Lock of the same Client started starving less than a second ago (the
	// name is hot: an attempt to barge in first would most likely find marks
	// queued). Once no waiter is starving, waiters and newcomers race for
	// the lock again, which costs fewer round trips than serving them in order.
	// It needs a store that keeps the marks (a [driver.StarvationStore]:
	// memstore and the Redis store do); with any other, the Mutex is unfair. A
	// MultiLock, and clients that know nothing of the marks (Redisson's RLock),
	// are still excluded, only not made to wait in line; while marks are queued
	// a release wakes only the first marked waiter, so a Redisson waiter learns
	// of releases from its own timer until the line drains. Default
	// DefaultStarvation (1ms); NoStarvation turns it off (other clients' marks
	// are still respected).
	Starvation time.Duration

	// ReleaseTimeout bounds each Unlock round trip, whatever the caller's
	// context. Default DefaultReleaseTimeout (5s).
	ReleaseTimeout time.Duration

	// Logger receives leash's logs: Debug per round trip, Warn when a renewal
	// fails but the hold survives, Error when a hold is lost. Default: discard.
	Logger *slog.Logger

	// Observer receives every lock event (acquired, not acquired, released,
	// lost, a renewal round), for metrics; see the prom module for
	// Prometheus. Default: none.
	Observer Observer

	// Label names this Client for operators, such as "billing-worker
	// v1.4": with a store that keeps holder records (see
	// [driver.ClientRecorder]; the Redis store does), 'leash ls' and 'leash show'
	// print it beside the host and process id of the holder of each lock.
	// At most MaxLabelLen bytes of printable UTF-8. Default: none.
	Label string

	// Command is the command this Client holds locks for, recorded as
	// Label is; the leash CLI sets it to the command leash run runs. At most
	// MaxCommandLen bytes of printable UTF-8. Default: none.
	Command string
}

// LockOptions overrides the Client's lock defaults for one lock. A nil
// *LockOptions or a zero field means the Client's value.
type LockOptions struct {
	// Lease is the lock lease. See Options.Lease.
	Lease time.Duration
	// RenewInterval is the watchdog period; NoRenewal gives a fixed lease.
	// Zero means the Client's RenewInterval when the lease is the Client's,
	// and Lease/3 otherwise (or a fixed lease when the Client uses NoRenewal).
	RenewInterval time.Duration
	// SafetyMargin: see Options.SafetyMargin. Zero means the Client's value
	// when the lease is unchanged, and Lease/20 otherwise.
	SafetyMargin time.Duration
	// MaxHold: see Options.MaxHold. NoLimit turns off the Client's bound.
	MaxHold time.Duration
	// Liveness: see Options.Liveness. NoLimit turns off the Client's check.
	Liveness time.Duration
	// AckRevokeOnUnlock makes a force-unlocked (revoked) lock's Client wait
	// for Unlock before it acknowledges the revocation, instead of
	// acknowledging it as soon as the holder is told (Lost fires). Until it
	// is acknowledged, the store grants the name to no one else, for at most
	// the lease the holder had. Set it where the work done under the lock
	// takes a while to stop once told (a child process sent SIGTERM, say),
	// and Unlock once it has stopped: the next holder then never overlaps
	// it (Client.Close, which ends every hold, acknowledges too). Default
	// false: a holder that is told is taken to have stopped. Either way, an
	// Unlock that finds the lock revoked before the Client heard of it
	// acknowledges the revocation.
	AckRevokeOnUnlock bool
}

// lockConfig is the resolved, validated configuration of one lock.
type lockConfig struct {
	lease    time.Duration
	interval time.Duration // 0: fixed lease
	margin   time.Duration
	maxHold  time.Duration // 0: none
	liveness time.Duration // 0: off
	// ackOnUnlock: a revocation is acknowledged at Unlock, not at Lost.
	ackOnUnlock bool
}

// resolve merges client defaults (base) with per-lock overrides and validates
// the result. field prefixes name the struct in error messages.
func resolve(base *Options, o *LockOptions) (lockConfig, error) {
	var b Options
	if base != nil {
		b = *base
	}
	var l LockOptions
	if o != nil {
		l = *o
	}
	prefix := "Options"
	lease, interval, margin := b.Lease, b.RenewInterval, b.SafetyMargin
	if l.Lease != 0 {
		prefix = "LockOptions"
		if l.Lease != lease {
			// A per-lock lease does not inherit timings set for another lease,
			// but it does inherit the mode (watchdog or fixed).
			if interval != NoRenewal {
				interval = 0
			}
			margin = 0
		}
		lease = l.Lease
	}
	if l.RenewInterval != 0 {
		interval = l.RenewInterval
	}
	if l.SafetyMargin != 0 {
		margin = l.SafetyMargin
	}
	maxHold, liveness := b.MaxHold, b.Liveness
	if l.MaxHold != 0 {
		maxHold = l.MaxHold
	}
	if l.Liveness != 0 {
		liveness = l.Liveness
	}

	bad := func(field string, v time.Duration, why string) (lockConfig, error) {
		return lockConfig{}, fmt.Errorf("%w: %s.%s = %v: %s", ErrInvalidOptions, prefix, field, v, why)
	}
	switch {
	case lease == 0:
		lease = DefaultLease
	case lease < MinLease:
		return bad("Lease", lease, fmt.Sprintf("must be at least %v (zero means the default %v)", MinLease, DefaultLease))
	case lease > MaxLease:
		return bad("Lease", lease, fmt.Sprintf("must be at most %v; use the watchdog (the default) for long holds", MaxLease))
	}
	switch {
	case margin == 0:
		margin = max(lease/20, time.Millisecond)
	case margin < 0:
		return bad("SafetyMargin", margin, "must not be negative")
	case margin >= lease:
		return bad("SafetyMargin", margin, fmt.Sprintf("must be shorter than the lease %v", lease))
	}
	switch {
	case interval == NoRenewal:
		interval = 0
	case interval == 0:
		interval = lease / 3
	case interval < 0:
		return bad("RenewInterval", interval, "must be positive, or NoRenewal for a fixed lease")
	}
	if interval != 0 && interval >= lease-margin {
		return bad("RenewInterval", interval, fmt.Sprintf(
			"must be shorter than the lease %v minus the safety margin %v, or the hold would lapse between renewals; the default is Lease/3",
			lease, margin))
	}
	if interval != 0 && interval < time.Millisecond {
		return bad("RenewInterval", interval, "must be at least 1ms")
	}
	switch {
	case maxHold == NoLimit:
		maxHold = 0
	case maxHold < 0:
		return bad("MaxHold", maxHold, "must be positive, or NoLimit")
	}
	switch {
	case liveness == NoLimit:
		liveness = 0
	case liveness < 0:
		return bad("Liveness", liveness, "must be positive, or NoLimit")
	case liveness > 0 && liveness < time.Millisecond:
		return bad("Liveness", liveness, "must be at least 1ms")
	}
	return lockConfig{lease: lease, interval: interval, margin: margin, maxHold: maxHold, liveness: liveness,
		ackOnUnlock: l.AckRevokeOnUnlock}, nil
}

// clientConfig is the resolved configuration of a Client.
type clientConfig struct {
	lock           lockConfig
	releaseTimeout time.Duration
	logger         *slog.Logger
	observer       Observer
	starve         time.Duration // when a waiting Mutex is starving; 0: never
	// handoffFromReceipt counts a handed-off lock's validity from when its
	// wake-up arrived: unsafe, set only by the negative control's test.
	handoffFromReceipt bool
}

func newClientConfig(o *Options) (clientConfig, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.MaxHold == NoLimit || opts.Liveness == NoLimit {
		return clientConfig{}, fmt.Errorf("%w: NoLimit is for LockOptions; leave Options.MaxHold and Options.Liveness zero for no limit", ErrInvalidOptions)
	}
	lc, err := resolve(&opts, nil)
	if err != nil {
		return clientConfig{}, err
	}
	if opts.Label != "" {
		if err := validText(opts.Label, MaxLabelLen); err != nil {
			return clientConfig{}, fmt.Errorf("%w: Options.Label %q: %s", ErrInvalidOptions, truncate(opts.Label), err)
		}
	}
	if opts.Command != "" {
		if err := validText(opts.Command, MaxCommandLen); err != nil {
			return clientConfig{}, fmt.Errorf("%w: Options.Command %q: %s", ErrInvalidOptions, truncate(opts.Command), err)
		}
	}
	cfg := clientConfig{lock: lc, releaseTimeout: opts.ReleaseTimeout, logger: opts.Logger, observer: opts.Observer}
	switch {
	case cfg.releaseTimeout == 0:
		cfg.releaseTimeout = DefaultReleaseTimeout
	case cfg.releaseTimeout < 0:
		return clientConfig{}, fmt.Errorf("%w: Options.ReleaseTimeout = %v: must be positive", ErrInvalidOptions, cfg.releaseTimeout)
	}
	switch {
	case opts.Starvation == 0:
		cfg.starve = DefaultStarvation
	case opts.Starvation == NoStarvation:
	case opts.Starvation < 0:
		return clientConfig{}, fmt.Errorf("%w: Options.Starvation = %v: must be positive, or NoStarvation", ErrInvalidOptions, opts.Starvation)
	default:
		cfg.starve = opts.Starvation
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}
