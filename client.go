package leash

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leash-go/leash/driver"
)

// Log attribute keys.
const (
	attrLock   = "lock"
	attrOwner  = "owner"
	attrToken  = "token"
	attrReason = "reason"
	attrError  = "error"
	attrCount  = "count"
	attrKind   = "kind"
)

// Client takes and renews locks on one store. Create one per process with
// [New] and share it: it is safe for concurrent use by any number of
// goroutines, and it runs one renewal goroutine however many locks it holds.
// Close it to release every lock it still holds.
type Client struct {
	store driver.Store
	caps  caps
	cfg   clientConfig
	log   *slog.Logger
	id    string
	epoch time.Time
	seq   atomic.Uint64

	closed    atomic.Bool
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	closeErr  error

	sched   scheduler
	waiters waiters
	rec     recorder
	owners  owners
	retries retries
	revokes revokes
	bounds  bounds
}

// New returns a Client that takes locks on store. A nil opts means all
// defaults; see [Options]. New starts the Client's renewal goroutine; Close
// stops it. New returns an error matching ErrInvalidArgument for a nil store
// or bad options, and makes no round trip.
func New(store driver.Store, opts *Options) (*Client, error) {
	if driver.IsNil(store) {
		return nil, fmt.Errorf("%w: leash.New: store is nil; pass one such as redisstore.New(rdb, nil) or memstore.New()", ErrInvalidArgument)
	}
	if v, ok := store.(driver.Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("%w: leash.New: %w", ErrInvalidArgument, err)
		}
	}
	caps, err := discover(store)
	if err != nil {
		return nil, err
	}
	cfg, err := newClientConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.lock, err = caps.floor(cfg.lock, "Options"); err != nil {
		return nil, err
	}
	c := &Client{
		store: store,
		caps:  caps,
		cfg:   cfg,
		log:   cfg.logger,
		id:    newClientID(),
		epoch: time.Now(),
		done:  make(chan struct{}),
	}
	c.owners.m = make(map[ownedKey]*owned)
	c.revokes.listening = make(chan struct{})
	c.waiters.init(c)
	c.rec.init(c, opts)
	c.sched.start(c)
	return c, nil
}

// ID returns the Client's random 128-bit id, the first part of every owner it
// records in the store.
func (c *Client) ID() string { return c.id }

// Store returns the store the Client was made with. Recipes built on the
// core use it to reach a capability the Client does not wrap (package
// schedule reaches a [driver.JobStore] so); locks taken on it directly
// bypass the Client's watchdog and bookkeeping.
func (c *Client) Store() driver.Store { return c.store }

// debugOn reports whether the logger takes debug records. The hot paths ask
// before building their attributes, which would otherwise be allocated for
// nothing on every Lock and Unlock.
func (c *Client) debugOn() bool { return c.log.Enabled(context.Background(), slog.LevelDebug) }

// now returns the Client's monotonic clock in nanoseconds.
func (c *Client) now() int64 { return int64(time.Since(c.epoch)) }

// Inspect reports the state of the lock name as the store sees it. It is
// meant for operators and tests; a decision taken on its answer can be stale
// by the time it is acted on.
func (c *Client) Inspect(ctx context.Context, name string) (driver.Info, error) {
	if c.closed.Load() {
		return driver.Info{}, ErrClosed
	}
	if err := checkName(c.store, name); err != nil {
		return driver.Info{}, err
	}
	a, err := c.caps.adminOp()
	if err != nil {
		return driver.Info{}, fmt.Errorf("leash: inspect %q: %w", name, err)
	}
	info, err := a.Inspect(ctx, name)
	if err != nil {
		return driver.Info{}, fmt.Errorf("leash: inspect %q: %w", name, err)
	}
	return info, nil
}

// ForceUnlock takes the lock name from whoever holds it: an operator's tool
// for a lock whose holder is stuck or gone. It reports whether there was a
// lock to take.
//
// On a store that can revoke (a [driver.Revoker]: redisstore and memstore),
// the holder is told at once: its Lost fires and its Err is a *LostError
// with ReasonRevoked (errors.Is(err, ErrRevoked)). The name is granted to
// no one else until the holder's Client has heard of it and acknowledged,
// which takes a few round trips (or, for a lock taken with
// LockOptions.AckRevokeOnUnlock, until the holder has also unlocked), or
// until the lease the holder had runs out, whichever comes first: a holder
// that is paused or cut off keeps the name out of use until its lease
// would have ended, as it would have without the force. A name held by
// readers or permits (many holders) is freed at once instead, as by
// ForceUnlockNow. On a store that cannot revoke, ForceUnlock is
// ForceUnlockNow.
//
// A name that holds something other than a lock (another application's
// data) is never changed: ForceUnlock returns an error matching
// ErrNotALock.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	a, err := c.forceOp(name)
	if err != nil {
		return false, err
	}
	if rv := c.caps.revoke; rv != nil {
		ok, err := rv.Revoke(ctx, name)
		if !errors.Is(err, ErrUnsupported) {
			if err != nil {
				return false, fmt.Errorf("leash: force unlock %q: %w", name, err)
			}
			return ok, nil
		}
	}
	ok, err := a.ForceRelease(ctx, name)
	if err != nil {
		return false, fmt.Errorf("leash: force unlock %q: %w", name, err)
	}
	return ok, nil
}

// ForceUnlockNow deletes the lock name whoever holds it and wakes its
// waiters, at once. It reports whether there was a lock to delete. The
// name may be granted to another at once, while the old holder, which
// hears of it at once on a [driver.Revoker] store and otherwise at its
// next renewal (ReasonReleasedElsewhere either way), may still be acting
// on it: use it only
// when the holder is known to be gone, or when freeing the name matters
// more than the overlap; otherwise use ForceUnlock. A name that holds
// something other than a lock is never deleted: ForceUnlockNow returns an
// error matching ErrNotALock.
func (c *Client) ForceUnlockNow(ctx context.Context, name string) (bool, error) {
	a, err := c.forceOp(name)
	if err != nil {
		return false, err
	}
	ok, err := a.ForceRelease(ctx, name)
	if err != nil {
		return false, fmt.Errorf("leash: force unlock %q: %w", name, err)
	}
	return ok, nil
}

// forceOp checks a force unlock's name and returns the store's
// administration.
func (c *Client) forceOp(name string) (driver.Admin, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if err := checkName(c.store, name); err != nil {
		return nil, err
	}
	a, err := c.caps.adminOp()
	if err != nil {
		return nil, fmt.Errorf("leash: force unlock %q: %w", name, err)
	}
	return a, nil
}

// Close releases every lock the Client still holds, after telling their
// holders (ReasonClosed), so that others need not wait out a lease. It wakes
// every waiting Lock (which returns ErrClosed), stops the renewal goroutine
// and waits for it, and closes the store if the store has a Close method.
// Each release is bounded by Options.ReleaseTimeout. With a store that keeps
// holder records (see [driver.ClientRecorder]), Close deletes the Client's record,
// or, while a lock it left to expire (UnlockAfter) still runs, leaves it
// listing only those locks, until they end. Close returns the release
// errors, if any; calling it again returns the same result. After Close,
// every method returns ErrClosed.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Client) close() error {
	c.closed.Store(true)
	close(c.done)
	c.waiters.close()
	var reqs []driver.Request
	for _, t := range c.sched.stop() {
		// A hold whose validity passed before the watchdog looked (the
		// process paused) was lost then, not by this Close.
		reason, cause, passed := t.expiry()
		if !passed {
			reason, cause = ReasonClosed, nil
		}
		if t.lose(reason, cause) {
			reqs = t.appendRequests(reqs)
		}
	}
	for _, r := range c.retries.rest() {
		reqs = append(reqs, r.req)
	}
	// The releases and the record share one ReleaseTimeout. The scheduler
	// has stopped: an unknown outcome here is not retried.
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.releaseTimeout)
	defer cancel()
	var (
		errs    []error
		notHeld []driver.Request
	)
	for i, err := range c.release(ctx, reqs, 0) {
		switch {
		case errors.Is(err, ErrNotHeld):
			notHeld = append(notHeld, reqs[i]) // perhaps revoked unheard: see Unlock
		case unknown(err):
			errs = append(errs, fmt.Errorf("leash: release %q on close: %w", reqs[i].Name, err))
		}
	}
	c.closeRevokes(ctx, notHeld)
	c.rec.close(ctx, c)
	if cl, ok := c.store.(io.Closer); ok {
		if err := cl.Close(); err != nil {
			errs = append(errs, fmt.Errorf("leash: close store: %w", err))
		}
	}
	return errors.Join(errs...)
}
