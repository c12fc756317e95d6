package etcdstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/etcdstore"
)

// renewHeld is how many locks renewScenario holds besides the ones it
// changes.
const renewHeld = 300

// A renewCase is what renewScenario did to the locks it holds, and what
// Renew said of each.
type renewCase struct {
	forced, retaken, foreign, reader, taker, other driver.Request
	kept                                           []driver.Request
	res                                            map[driver.Request]driver.RenewResult
	slow                                           int64 // requests checked by reading their keys
}

// renewScenario holds, through one Store and one client, renewHeld Mutexes,
// a read lease and a Mutex each to be changed, then, behind the Store's
// back (as `leash unlock --force` does, from another Store): force-releases
// one Mutex (forced); force-releases another and has a second owner of the
// same client take it (retaken, by taker: the key is back on the client's
// lease, with another owner in it); force-releases a third and has another
// client take it (foreign, by other); and force-releases the read lease.
// Then one Renew checks them all. trust makes the Store take presence on
// the lease as proof (the negative control).
func renewScenario(t *testing.T, trust bool) renewCase {
	cli := sharedCli(t)
	ctx := bg(t)
	s := etcdstore.New(cli, nil)
	if trust {
		s.TrustPresence()
	}
	admin := etcdstore.New(cli, nil)
	const client, otherClient = "0a0b0c0d-0000-4000-8000-0000000000a1", "0a0b0c0d-0000-4000-8000-0000000000a2"
	const lease = 10 * time.Second
	req := func(kind driver.Kind, name, owner string) driver.Request {
		return driver.Request{Kind: kind, Name: lockName(t) + "/" + name, Owner: owner, Lease: lease}
	}
	acquire := func(s *etcdstore.Store, r driver.Request) {
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
	for _, r := range []driver.Request{c.forced, c.retaken, c.foreign, c.reader} {
		acquire(s, r)
	}
	if err := s.KeepAlive(ctx, client); err != nil {
		t.Fatal(err)
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
	if err := s.KeepAlive(ctx, client); err != nil {
		t.Fatal(err)
	}
	reqs := append([]driver.Request{c.forced, c.retaken, c.foreign, c.reader, c.taker}, c.kept...)
	before := s.SlowChecks()
	res := s.Renew(ctx, reqs)
	c.slow = s.SlowChecks() - before
	c.res = make(map[driver.Request]driver.RenewResult, len(reqs))
	for i, r := range reqs {
		c.res[r] = res[i]
	}
	return c
}

// TestRenewFromLease checks that a Renew of many locks settled from the
// client's lease (one LeaseTimeToLive) reports each changed lock on its own:
// a Mutex and a read lease forced free are gone; a Mutex forced free and
// taken by another owner of the same client, whose key is back on the same
// lease, is taken, and its new owner's renewed; one taken by another client
// is taken; and every other lock is renewed without reading its key.
func TestRenewFromLease(t *testing.T) {
	c := renewScenario(t, false)
	want := map[string]struct {
		r    driver.Request
		want driver.RenewStatus
	}{
		"forced free":                       {c.forced, driver.RenewGone},
		"read lease forced free":            {c.reader, driver.RenewGone},
		"retaken by an owner of its client": {c.retaken, driver.RenewTaken},
		"the owner that retook it":          {c.taker, driver.Renewed},
		"taken by another client":           {c.foreign, driver.RenewTaken},
	}
	for what, w := range want {
		if got := c.res[w.r]; got != (driver.RenewResult{Status: w.want}) {
			t.Errorf("Renew of the lock %s (%q by %q) = %+v, want status %v", what, w.r.Name, w.r.Owner, got, w.want)
		}
	}
	for _, r := range c.kept {
		if got := c.res[r]; got != (driver.RenewResult{Status: driver.Renewed}) {
			t.Errorf("Renew of held lock %q = %+v, want Renewed", r.Name, got)
		}
	}
	// The locks read one by one: those not on the lease (forced, foreign,
	// reader) and those whose owner presence cannot prove (retaken, taker).
	if c.slow > 5 {
		t.Errorf("Renew read %d of %d keys one by one, want at most the 5 changed", c.slow, len(c.res))
	}
}

// TestRenewFromLeaseControl is TestRenewFromLease's negative control: a
// Store that takes a key's presence on its client's lease as proof of
// ownership reports the lock forced free and retaken by another owner of
// the same client as Renewed, which TestRenewFromLease would catch.
func TestRenewFromLeaseControl(t *testing.T) {
	c := renewScenario(t, true)
	if got := c.res[c.retaken]; got.Err != nil || got.Status != driver.Renewed {
		t.Fatalf("presence-only Renew of the lock retaken by another owner of its client = %+v; "+
			"the control expected it wrongly Renewed", got)
	}
	if got := c.res[c.forced]; got != (driver.RenewResult{Status: driver.RenewGone}) {
		t.Errorf("presence-only Renew of the lock forced free = %+v, want RenewGone", got)
	}
}
