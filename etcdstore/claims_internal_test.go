package etcdstore

import (
	"testing"

	"github.com/leash-go/leash/driver"
)

// TestClaimsProve walks the record Renew trusts a lock key's presence by
// through the orders a client's acquires of one name can take: presence
// proves an owner's hold only while its grant is the last the client made
// of the name and nothing of the name is in flight or unknown.
func TestClaimsProve(t *testing.T) {
	const client = "0a0b0c0d-0000-4000-8000-0000000000c1"
	r := func(n string) []driver.Request {
		return []driver.Request{{Kind: driver.KindMutex, Name: "n", Owner: client + ":" + n}}
	}
	a, b := r("1"), r("2")
	type step struct {
		what             string
		do               func(c *claims)
		provesA, provesB bool
	}
	for name, steps := range map[string][]step{
		"granted, then another owner's try in flight, refused": {
			{"a granted at 10", func(c *claims) { c.begin(a); c.end(a, []int64{10}, false) }, true, false},
			{"b's try in flight", func(c *claims) { c.begin(b) }, false, false},
			{"b refused", func(c *claims) { c.end(b, nil, false) }, true, false},
		},
		"lost and retaken by another owner, answers in either order": {
			{"a and b in flight", func(c *claims) { c.begin(a); c.begin(b) }, false, false},
			{"b granted at 20 answers first", func(c *claims) { c.end(b, []int64{20}, false) }, false, false},
			{"a granted at 10 answers late", func(c *claims) { c.end(a, []int64{10}, false) }, false, true},
		},
		"an unknown outcome is never proof again": {
			{"a granted at 10", func(c *claims) { c.begin(a); c.end(a, []int64{10}, false) }, true, false},
			{"b unknown", func(c *claims) { c.begin(b); c.end(b, nil, true) }, false, false},
			{"a released, b granted at 30", func(c *claims) { c.drop(a[0]); c.begin(b); c.end(b, []int64{30}, false) }, false, false},
		},
		"released, then taken by another owner": {
			{"a granted at 10", func(c *claims) { c.begin(a); c.end(a, []int64{10}, false) }, true, false},
			{"a released", func(c *claims) { c.drop(a[0]) }, false, false},
			{"b granted at 20", func(c *claims) { c.begin(b); c.end(b, []int64{20}, false) }, false, true},
			{"b found gone, dropped", func(c *claims) { c.drop(b[0]) }, false, false},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var c claims
			for _, s := range steps {
				s.do(&c)
				if got := c.proves(a[0]); got != s.provesA {
					t.Errorf("after %s: proves(a) = %v, want %v", s.what, got, s.provesA)
				}
				if got := c.proves(b[0]); got != s.provesB {
					t.Errorf("after %s: proves(b) = %v, want %v", s.what, got, s.provesB)
				}
			}
		})
	}
	var c claims
	c.begin(a)
	c.end(a, []int64{10}, false)
	c.drop(a[0])
	if len(c.m) != 0 {
		t.Errorf("claims after the only grant was released = %v, want none kept", c.m)
	}
}
