package etcdstore

import (
	"sync"

	"github.com/leash-go/leash/driver"
)

// claims is the Store's record, per client and name, of which of the
// client's owners holds the name's lock key (the key every exclusive kind
// shares): what lets Renew take a lock key's presence on the client's lease
// as proof that a given owner holds it (see Renew). Its state is its own,
// under its own mutex; a caller that also holds Store.mu takes that first.
//
// A lock key on a client's lease was put there by one of that client's
// exclusive acquires, but the key alone does not say whose: two owners of one
// client (two goroutines' holds, a hold that lost the lock and the one that
// took it next) put the same key on the same lease. So each exclusive
// acquire transaction is recorded: begun before it is sent, ended when it
// answers, with the create revision of what it granted. A name's claim
// names the owner of the grant with the highest create revision; it proves
// that owner's hold only while no acquire of the name is in flight and no
// acquire of it ended with an unknown outcome (which may still be applied
// later: the name is then never proved by presence again while the client
// has a session).
type claims struct {
	mu sync.Mutex
	m  map[string]*clientClaims // client id → its claims
}

// clientClaims are one client's claims.
type clientClaims struct {
	inflight int              // acquires of any name in flight
	names    map[string]claim // lock name → its claim
}

// A claim is what is known of one name's lock key on its client's leases.
type claim struct {
	owner    string // the owner of the grant with the highest create revision
	rev      int64  // that grant's create revision (0: none ended granted)
	inflight int32  // acquires of the name in flight
	tainted  bool   // an acquire ended with an unknown outcome
}

// begin records that the exclusive acquire of reqs (one client's) is about
// to be sent. Every begin is followed by one end.
func (c *claims) begin(reqs []driver.Request) {
	client := driver.OwnerClient(reqs[0].Owner)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*clientClaims)
	}
	cc := c.m[client]
	if cc == nil {
		cc = &clientClaims{names: make(map[string]claim)}
		c.m[client] = cc
	}
	cc.inflight++
	for _, r := range reqs {
		cl := cc.names[r.Name]
		cl.inflight++
		cc.names[r.Name] = cl
	}
}

// end records the answer to an acquire begun with begin: fences, one per
// request, the create revisions it granted (nil when it granted nothing);
// unknown, an outcome the caller cannot tell (the transaction may have been
// applied, or may be yet).
func (c *claims) end(reqs []driver.Request, fences []int64, unknown bool) {
	client := driver.OwnerClient(reqs[0].Owner)
	c.mu.Lock()
	defer c.mu.Unlock()
	cc := c.m[client]
	if cc == nil {
		return // forgotten with the client's session meanwhile
	}
	cc.inflight--
	for i, r := range reqs {
		cl, ok := cc.names[r.Name]
		if !ok {
			continue
		}
		cl.inflight--
		switch {
		case unknown:
			cl.tainted = true
		case fences != nil && fences[i] >= cl.rev:
			cl.owner, cl.rev = r.Owner, fences[i]
		}
		cc.names[r.Name] = cl
		cc.tidy(r.Name, cl)
	}
	c.tidy(client, cc)
}

// proves reports whether the presence of r's lock key on its client's lease
// proves that r's owner holds it: a Renew's answer about the lease came
// after the transaction that granted the owner (and the owner's acquire has
// ended before any Renew of it), so a key there is the owner's grant unless
// a later grant of the name by the same client, or one whose outcome is
// unknown, may have put it. Read keys and permit keys name their owner, and
// an owner never takes a second one: their presence is always proof.
func (c *claims) proves(r driver.Request) bool {
	if r.Kind == driver.KindRead || r.Kind == driver.KindPermit {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cc := c.m[driver.OwnerClient(r.Owner)]
	if cc == nil {
		return false
	}
	cl, ok := cc.names[r.Name]
	return ok && !cl.tainted && cl.inflight == 0 && cl.owner == r.Owner
}

// drop forgets r's owner's claim on its lock key, which it no longer holds
// (released, or found gone or taken by a read of the key): the name is then
// unclaimed, unless an acquire of it is in flight or ended unknown.
func (c *claims) drop(r driver.Request) {
	if r.Kind == driver.KindRead || r.Kind == driver.KindPermit {
		return
	}
	client := driver.OwnerClient(r.Owner)
	c.mu.Lock()
	defer c.mu.Unlock()
	cc := c.m[client]
	if cc == nil {
		return
	}
	cl, ok := cc.names[r.Name]
	if !ok || cl.owner != r.Owner {
		return
	}
	cl.owner = ""
	cc.names[r.Name] = cl
	cc.tidy(r.Name, cl)
	c.tidy(client, cc)
}

// forget drops every claim of client, whose session has ended: each lease
// the Store kept for it is gone, so no later key on a lease of the client
// can have been put by an acquire recorded here, unless one is in flight.
func (c *claims) forget(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc := c.m[client]; cc != nil && cc.inflight == 0 {
		delete(c.m, client)
	}
}

// tidy deletes name's claim when it says nothing: no owner, nothing in
// flight, no unknown outcome. Call with claims.mu held.
func (cc *clientClaims) tidy(name string, cl claim) {
	if cl.owner == "" && cl.inflight == 0 && !cl.tainted {
		delete(cc.names, name)
	}
}

// tidy deletes client's claims when it has none. Call with claims.mu held.
func (c *claims) tidy(client string, cc *clientClaims) {
	if cc.inflight == 0 && len(cc.names) == 0 {
		delete(c.m, client)
	}
}
