package zkstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/zkstore"
)

// renewHeld is how many locks renewScenario holds besides the ones it
// changes.
const renewHeld = 200

// A renewCase is what renewScenario did to the locks it holds, and what
// the second Renew said of each.
type renewCase struct {
	forced, retaken, foreign, reader, taker, other driver.Request
	kept                                           []driver.Request
	res                                            map[driver.Request]driver.RenewResult
	quiet, slow                                    int64 // requests the quiet Renew and the last one checked by reading their nodes
}

// renewScenario holds, through one Store and one client, renewHeld Mutexes,
// a read lease and a Mutex each to be changed, and renews them all twice
// (the first Renew sets the watches; the second, nothing changed, should
// read nothing). Then, through another Store (as `leash unlock --force`
// does): it force-releases one Mutex (forced); force-releases another and
// has a second owner of the same client take it (retaken, by taker);
// force-releases a third and has another client take it (foreign, by
// other); and force-releases the read lease. One more Renew checks them
// all. ignore makes the Store ignore its watches' events (the negative
// control).
func renewScenario(t *testing.T, ignore bool) renewCase {
	ctx := bg(t)
	s := sharedStore(t)
	if ignore {
		s.IgnoreWatchEvents()
	}
	admin := sharedStore(t)
	const client, otherClient = "0a0b0c0d-0000-4000-8000-0000000000b1", "0a0b0c0d-0000-4000-8000-0000000000b2"
	const lease = 10 * time.Second
	req := func(kind driver.Kind, name, owner string) driver.Request {
		return driver.Request{Kind: kind, Name: "test/" + t.Name() + "/" + name, Owner: owner, Lease: lease}
	}
	acquire := func(s *zkstore.Store, r driver.Request) {
		t.Helper()
		if g, err := s.Acquire(ctx, r); err != nil || !g.Acquired {
			t.Fatalf("Acquire(%q by %q) = %+v, %v", r.Name, r.Owner, g, err)
		}
		t.Cleanup(func() { _, _ = admin.ForceRelease(context.WithoutCancel(ctx), r.Name) })
	}
	force := func(r driver.Request) {
		t.Helper()
		if ok, err := admin.ForceRelease(ctx, r.Name); err != nil || !ok {
			t.Fatalf("ForceRelease(%q) = %v, %v", r.Name, ok, err)
		}
	}
	var c renewCase
	n := 0
	owner := func() string { n++; return fmt.Sprintf("%s:%d", client, n) }
	for i := range renewHeld {
		r := req(driver.KindMutex, fmt.Sprintf("held/%d", i), owner())
		acquire(s, r)
		c.kept = append(c.kept, r)
	}
	c.forced = req(driver.KindMutex, "forced", owner())
	c.retaken = req(driver.KindMutex, "retaken", owner())
	c.foreign = req(driver.KindMutex, "foreign", owner())
	c.reader = req(driver.KindRead, "reader", owner())
	all := append([]driver.Request{c.forced, c.retaken, c.foreign, c.reader}, c.kept...)
	for _, r := range all[:4] {
		acquire(s, r)
	}
	for round := range 2 {
		before := s.SlowChecks()
		for i, res := range s.Renew(ctx, all) {
			if res != (driver.RenewResult{Status: driver.Renewed}) {
				t.Fatalf("Renew %d of held lock %q = %+v, want Renewed", round+1, all[i].Name, res)
			}
		}
		c.quiet = s.SlowChecks() - before
	}
	force(c.forced)
	force(c.retaken)
	c.taker = c.retaken
	c.taker.Owner = owner()
	acquire(s, c.taker)
	force(c.foreign)
	c.other = c.foreign
	c.other.Owner = otherClient + ":1"
	acquire(s, c.other)
	force(c.reader)
	reqs := append(all, c.taker)
	before := s.SlowChecks()
	res := s.Renew(ctx, reqs)
	c.slow = s.SlowChecks() - before
	c.res = make(map[driver.Request]driver.RenewResult, len(reqs))
	for i, r := range reqs {
		c.res[r] = res[i]
	}
	return c
}

// TestRenewByWatch checks that a Renew of many locks settled by their hold
// nodes' watches (one write on the client's session) reports each changed
// lock on its own: a Mutex and a read lease forced free are gone; a Mutex
// forced free and taken by another owner of the same client, or by another
// client, is taken, and its new owner's renewed; every other lock is
// renewed without reading its node.
func TestRenewByWatch(t *testing.T) {
	c := renewScenario(t, false)
	if c.quiet != 0 {
		t.Errorf("a Renew with every watch set and nothing changed read %d nodes, want 0", c.quiet)
	}
	for what, w := range map[string]struct {
		r    driver.Request
		want driver.RenewStatus
	}{
		"forced free":                       {c.forced, driver.RenewGone},
		"read lease forced free":            {c.reader, driver.RenewGone},
		"retaken by an owner of its client": {c.retaken, driver.RenewTaken},
		"the owner that retook it":          {c.taker, driver.Renewed},
		"taken by another client":           {c.foreign, driver.RenewTaken},
	} {
		if got := c.res[w.r]; got != (driver.RenewResult{Status: w.want}) {
			t.Errorf("Renew of the lock %s (%q by %q) = %+v, want status %v", what, w.r.Name, w.r.Owner, got, w.want)
		}
	}
	for _, r := range c.kept {
		if got := c.res[r]; got != (driver.RenewResult{Status: driver.Renewed}) {
			t.Errorf("Renew of held lock %q = %+v, want Renewed", r.Name, got)
		}
	}
	if c.slow > 5 {
		t.Errorf("Renew read %d of %d nodes, want at most the 5 changed", c.slow, len(c.res))
	}
}

// TestRenewByWatchControl is TestRenewByWatch's negative control: a Store
// that takes a set watch as proof without its events reports the Mutex
// forced free as Renewed, which TestRenewByWatch would catch.
func TestRenewByWatchControl(t *testing.T) {
	c := renewScenario(t, true)
	if got := c.res[c.forced]; got.Err != nil || got.Status != driver.Renewed {
		t.Fatalf("Renew ignoring watch events of the lock forced free = %+v; the control expected it wrongly Renewed", got)
	}
}
