package leash

import (
	"context"
	"fmt"

	"github.com/leash-go/leash/driver"
)

type ownedKey struct {
	name, owner string
	kind        driver.Kind // family(kind): a writer and a reader of one owner are two tenures
}

// forget drops an explicit-owner tenure from the registry once it has ended.
func (c *Client) forget(t *tenure) {
	if t.explicit == "" {
		return
	}
	k := ownedKey{t.name(), t.explicit, family(t.kind)}
	c.mu.Lock()
	if c.owned[k] == t {
		delete(c.owned, k)
	}
	c.mu.Unlock()
}

// lockOwned takes or re-enters a lock for an explicit owner. Concurrent calls
// for the same owner wait for the first one's acquire and then re-enter.
func (c *Client) lockOwned(ctx context.Context, l locker, owner string, wait bool) (*Hold, error) {
	k := ownedKey{l.name, owner, family(l.kind)}
	for {
		c.mu.Lock()
		t := c.owned[k]
		if t == nil {
			// The owner may hold the name as another kind: a write lock it
			// downgrades, or a read lock it may not upgrade. The store cannot
			// tell, since every tenure has an owner of its own.
			var parent *tenure
			if o := c.ownedOther(k); o != nil {
				if p := o.pending; p != nil {
					c.mu.Unlock()
					if err := c.await(ctx, l.name, p); err != nil {
						return nil, err
					}
					continue
				}
				c.mu.Unlock()
				if o.alive() {
					h, downgradeFrom, err := l.relate(ctx, o)
					if h != nil || err != nil {
						return h, err
					}
					parent = downgradeFrom
				}
				c.mu.Lock()
				// Decide again if anything changed while c.mu was free.
				if c.owned[k] != nil || c.ownedOther(k) != o || (parent != nil && !parent.held()) {
					c.mu.Unlock()
					continue
				}
			}
			t = c.newTenure(l.kind, []string{l.name}, owner, l.cfg)
			t.parent = parent
			t.pending = make(chan struct{})
			c.owned[k] = t
			c.mu.Unlock()
			h, err := l.acquire(ctx, t, wait)
			c.mu.Lock()
			close(t.pending)
			t.pending = nil
			if err != nil && c.owned[k] == t {
				delete(c.owned, k)
			}
			c.mu.Unlock()
			return h, err
		}
		if p := t.pending; p != nil {
			c.mu.Unlock()
			if err := c.await(ctx, l.name, p); err != nil {
				return nil, err
			}
			continue
		}
		c.mu.Unlock()
		if h := t.reenter(ctx); h != nil {
			return h, nil
		}
		c.forget(t) // ended: start a new tenure
	}
}

// ownedOther returns the explicit owner's tenure on k's name of another
// family than k's that is being acquired or is still held, if any. c.mu
// must be held.
func (c *Client) ownedOther(k ownedKey) *tenure {
	for _, f := range [...]driver.Kind{driver.KindMutex, driver.KindRead, driver.KindWrite} {
		if f != k.kind {
			if t := c.owned[ownedKey{k.name, k.owner, f}]; t != nil && (t.pending != nil || t.held()) {
				return t
			}
		}
	}
	return nil
}

// await waits for an explicit owner's acquire in flight (pending) to end.
func (c *Client) await(ctx context.Context, name string, pending <-chan struct{}) error {
	select {
	case <-pending:
		return nil
	case <-ctx.Done():
		return &NotAcquiredError{Name: name, Remaining: -1, Err: ctx.Err()}
	case <-c.done:
		return ErrClosed
	}
}

// family maps kinds that are the same lock in the store to one: a Mutex and
// a FairMutex on one name are the same exclusive lock.
func family(k driver.Kind) driver.Kind {
	if k == driver.KindFair {
		return driver.KindMutex
	}
	return k
}

type ownerKey struct{}

// WithOwner returns a copy of ctx that names an explicit owner, such as a job
// id, for the locks taken with it. Within one Client, every Lock on a name
// whose context carries the same owner re-enters the same hold, whichever
// goroutine calls it: use it for a logical owner that spans goroutines.
// Without it, re-entry needs the held lock's own context (see [Mutex.Lock]).
// The rules between kinds are those of re-entry through a context: an owner
// holding an RWMutex's write lock takes a read lock at once (a downgrade);
// one holding only a read lock gets ErrUpgrade from Lock; one holding a
// Mutex gets ErrInvalidArgument from the RWMutex of the same name. A call
// made while the same owner's Lock of another kind is still waiting waits
// for that one to end first.
//
// An owner names who may re-enter, not the store record: each tenure (first
// Lock to last Unlock) has a store owner of its own, "<client-id>:<n>@owner"
// (see [Hold.Owner]), so the next tenure never inherits anything from the
// last one.
//
// Owners are scoped to the Client: two processes using the same owner string
// still exclude each other. An owner must be 1 to MaxOwnerLen bytes of
// printable UTF-8; Lock rejects others with ErrInvalidArgument.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// ownerFrom returns the explicit owner carried by ctx, if any.
func ownerFrom(ctx context.Context) (string, bool) {
	o, ok := ctx.Value(ownerKey{}).(string)
	return o, ok
}

func validateOwner(owner string) error {
	if err := validText(owner, MaxOwnerLen); err != nil {
		return fmt.Errorf("%w: owner %q: %s", ErrInvalidArgument, truncate(owner), err)
	}
	return nil
}
