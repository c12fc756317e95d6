package leash

import (
	"fmt"

	"github.com/leash-go/leash/driver"
)

// caps are the optional capabilities of the Client's store, discovered once
// by New. A nil field is a capability the store lacks.
type caps struct {
	store    driver.Store
	watch    driver.Watcher
	withdraw driver.Withdrawer
	multi    driver.MultiStore
	admin    driver.Admin
	permits  driver.PermitSetter
	session  driver.SessionStore
	drift    driver.Drifter
	revoke   driver.Revoker
	starve   bool                        // a driver.StarvationStore that keeps starving waiters' marks
	handoff  bool                        // a driver.HandoffStore: releases hand the lock to the first waiter (handoff.go)
	kinds    [driver.KindPermit + 1]bool // the kinds the store grants
}

// discover finds store's capabilities, and refuses a store whose claims do
// not hold together.
func discover(store driver.Store) (caps, error) {
	c := caps{store: store}
	c.watch, _ = store.(driver.Watcher)
	c.withdraw, _ = store.(driver.Withdrawer)
	c.multi, _ = store.(driver.MultiStore)
	c.admin, _ = store.(driver.Admin)
	c.permits, _ = store.(driver.PermitSetter)
	c.session, _ = store.(driver.SessionStore)
	c.drift, _ = store.(driver.Drifter)
	c.revoke, _ = store.(driver.Revoker)
	if ss, ok := store.(driver.StarvationStore); ok && c.withdraw != nil {
		c.starve = ss.Starvation() // a mark needs withdrawing when its waiter gives up
	}
	if hs, ok := store.(driver.HandoffStore); ok && c.withdraw != nil && c.watch != nil && c.session == nil {
		// A waiter that gives up must be able to give back a grant it has
		// not picked up (Withdraw), and hears of grants by watching; a
		// session store's Renew extends nothing, so it could not pick one up.
		c.handoff = hs.Handoff()
	}
	for k := range c.kinds {
		c.kinds[k] = driver.Supports(store, driver.Kind(k))
	}
	for _, k := range []driver.Kind{driver.KindFair, driver.KindWrite} {
		if c.kinds[k] && c.withdraw == nil {
			return caps{}, fmt.Errorf("%w: leash.New: %s grants %s locks but is not a driver.Withdrawer: its waiters' places could not be removed",
				ErrInvalidArgument, driver.Describe(store), k)
		}
	}
	if c.kinds[driver.KindRead] != c.kinds[driver.KindWrite] {
		return caps{}, fmt.Errorf("%w: leash.New: %s lists only one of the read and write kinds; an RWMutex needs both",
			ErrInvalidArgument, driver.Describe(store))
	}
	return c, nil
}

// kind returns an error matching ErrUnsupported when the store does not
// grant locks of kind k. It asks the kinds found by discover: a store's
// Kinds may build its list on every call.
func (c *caps) kind(k driver.Kind) error {
	if int(k) < len(c.kinds) && c.kinds[k] {
		return nil
	}
	return driver.Unsupported(c.store, k.String()+" locks")
}

// adminOp returns the store's administration, or an error matching
// ErrUnsupported when it has none.
func (c *caps) adminOp() (driver.Admin, error) {
	if c.admin == nil {
		return nil, driver.Unsupported(c.store, "administration (inspect, list, force release)")
	}
	return c.admin, nil
}

// floor raises a lock configuration's safety margin to the store's drift
// allowance (see driver.Drifter), and refuses a configuration that leaves
// no room for renewals once it is raised. prefix names the options struct
// in the error.
func (c *caps) floor(cfg lockConfig, prefix string) (lockConfig, error) {
	if c.drift == nil {
		return cfg, nil
	}
	d := c.drift.Drift(cfg.lease)
	if d <= cfg.margin {
		return cfg, nil
	}
	if d >= cfg.lease {
		return lockConfig{}, fmt.Errorf("%w: %s.Lease = %v: %s keeps %v of each lease in reserve (its drift allowance), which leaves the lock no validity",
			ErrInvalidOptions, prefix, cfg.lease, driver.Describe(c.store), d)
	}
	cfg.margin = d
	if cfg.interval != 0 && cfg.interval >= cfg.lease-d {
		return lockConfig{}, fmt.Errorf("%w: %s.RenewInterval = %v: must be shorter than the lease %v minus the drift allowance %v of %s",
			ErrInvalidOptions, prefix, cfg.interval, cfg.lease, d, driver.Describe(c.store))
	}
	return cfg, nil
}
