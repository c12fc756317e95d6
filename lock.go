package leash

import (
	"context"
	"fmt"
	"time"

	"github.com/leash-go/leash/driver"
)

// A locker is what every acquiring method of every lock type runs: the name,
// the kind and the resolved options. It holds no state and may be copied.
type locker struct {
	c       *Client
	kind    driver.Kind
	name    string
	cfg     *lockConfig
	wait    time.Duration // how long a queue place or waiting-writer mark lasts
	permits int           // semaphore size, for driver.KindPermit
	err     error         // construction error, returned by every call
}

// newLocker resolves the options of a lock called name.
func (c *Client) newLocker(kind driver.Kind, name string, opts []*LockOptions) locker {
	l := locker{c: c, kind: kind, name: name}
	var o *LockOptions
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		l.err = fmt.Errorf("%w: %q takes at most one *LockOptions, got %d", ErrInvalidOptions, truncate(name), len(opts))
		return l
	}
	if err := checkName(c.store, name); err != nil {
		l.err = err
		return l
	}
	if err := c.caps.kind(kind); err != nil {
		l.err = fmt.Errorf("leash: lock %q: %w", truncate(name), err)
		return l
	}
	l.cfg, l.err = c.lockConfig(o)
	return l
}

// lockConfig resolves per-lock options against the Client's.
// Locks without options share the Client's.
func (c *Client) lockConfig(o *LockOptions) (*lockConfig, error) {
	if o == nil {
		return &c.cfg.lock, nil
	}
	base := Options{Lease: c.cfg.lock.lease, RenewInterval: c.cfg.lock.interval, SafetyMargin: c.cfg.lock.margin,
		MaxHold: c.cfg.lock.maxHold, Liveness: c.cfg.lock.liveness}
	if base.RenewInterval == 0 {
		base.RenewInterval = NoRenewal
	}
	cfg, err := resolve(&base, o)
	if err == nil {
		cfg, err = c.caps.floor(cfg, "LockOptions")
	}
	if err != nil {
		return nil, err
	}
	return &cfg, nil
}

// lock takes or re-enters the lock; wait says whether to wait for it.
func (l locker) lock(ctx context.Context, wait bool) (*Hold, error) {
	c := l.c
	if l.err != nil {
		return nil, l.err
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, &NotAcquiredError{Name: l.name, Remaining: -1, Err: err}
	}
	explicit, hasOwner := ownerFrom(ctx)
	if hasOwner {
		if err := validateOwner(explicit); err != nil {
			return nil, err
		}
	}
	if l.kind == driver.KindPermit {
		// Every Acquire takes one more permit, a lease of its own: there is
		// no re-entry, and explicit owners do not apply.
		return l.acquire(ctx, c.newTenure(l.kind, []string{l.name}, "", l.cfg), wait)
	}
	h, t, err := l.reentry(ctx)
	if h != nil || err != nil {
		return h, err
	}
	if hasOwner {
		return c.lockOwned(ctx, l, explicit, wait)
	}
	nt := c.newTenure(l.kind, []string{l.name}, "", l.cfg)
	if t != nil && l.kind == driver.KindRead && t.kind == driver.KindWrite {
		// A downgrade: the store grants the read lease despite the write
		// lock because the request names the writer as its parent.
		nt.parent = t
	}
	return l.acquire(ctx, nt, wait)
}

// reentry applies the re-entry rules to the tenure on l's name carried by
// ctx, if any. It returns a new hold on a re-entered tenure; or the write
// tenure a read lock downgrades from; or an error for a request that would
// wait for itself.
func (l locker) reentry(ctx context.Context) (*Hold, *tenure, error) {
	t := tenureIn(ctx, l.c, l.name)
	for ; t != nil && !t.alive(); t = t.parent {
	}
	if t == nil {
		return nil, nil, nil
	}
	return l.relate(ctx, t)
}

// relate applies the re-entry rules to t, a live tenure that the caller
// already holds on l's name (through its context, or as the same explicit
// owner): see reentry.
func (l locker) relate(ctx context.Context, t *tenure) (*Hold, *tenure, error) {
	exclusive := func(k driver.Kind) bool { return k == driver.KindMutex || k == driver.KindFair }
	switch {
	case len(t.parts) > 1:
		return nil, nil, fmt.Errorf("%w: %q is held through this context as part of a MultiLock; locking it again would wait for itself",
			ErrInvalidArgument, l.name)
	case exclusive(l.kind) && exclusive(t.kind), l.kind == t.kind:
		if h := t.reenter(ctx); h != nil {
			return h, nil, nil
		}
		return nil, nil, nil
	case l.kind == driver.KindWrite && t.kind == driver.KindRead:
		for w := t.parent; w != nil; w = w.parent {
			if w.kind == driver.KindWrite {
				if h := w.reenter(ctx); h != nil {
					return h, nil, nil
				}
			}
		}
		return nil, nil, fmt.Errorf("leash: lock %q: %w", l.name, ErrUpgrade)
	case l.kind == driver.KindRead && t.kind == driver.KindWrite:
		return nil, t, nil
	}
	return nil, nil, fmt.Errorf("%w: %q is held through this context or owner as a %s lock; a %s lock on the same name would wait for itself",
		ErrInvalidArgument, l.name, t.kind, l.kind)
}
