package leash

import (
	"context"
	"fmt"
	"sync"

	"github.com/leash-go/leash/driver"
)

// owners is the Client's registry of explicit owners' tenures (see
// [WithOwner]): within one Client, every Lock whose context carries the same
// owner re-enters the same tenure, whichever goroutine calls it. The
// registry owns the fields below its mutex.
type owners struct {
	mu sync.Mutex
	m  map[ownedKey]*owned
}

type ownedKey struct {
	name, owner string
	kind        driver.Kind // family(kind): a writer and a reader of one owner are two tenures
}

// owned is one explicit owner's tenure on one name.
type owned struct {
	t *tenure
	// pending is closed when t's acquire resolves, and nil once it has:
	// calls for the same owner meanwhile wait for it, then re-enter.
	pending chan struct{}
}

// forget drops an explicit-owner tenure from the registry once it has ended.
func (c *Client) forget(t *tenure) {
	explicit := t.explicit()
	if explicit == "" {
		return
	}
	reg := &c.owners
	k := ownedKey{t.name(), explicit, family(t.kind)}
	reg.mu.Lock()
	if o := reg.m[k]; o != nil && o.t == t {
		delete(reg.m, k)
	}
	reg.mu.Unlock()
}

// lockOwned takes or re-enters a lock for an explicit owner. Concurrent calls
// for the same owner wait for the first one's acquire and then re-enter.
func (c *Client) lockOwned(ctx context.Context, l locker, owner string, wait bool) (*Hold, error) {
	reg := &c.owners
	k := ownedKey{l.name, owner, family(l.kind)}
	for {
		reg.mu.Lock()
		cur := reg.m[k]
		if cur == nil {
			// The owner may hold the name as another kind: a write lock it
			// downgrades, or a read lock it may not upgrade. The store cannot
			// tell, since every tenure has an owner of its own.
			var parent *tenure
			if o := reg.other(k); o != nil {
				if p := o.pending; p != nil {
					reg.mu.Unlock()
					if err := c.await(ctx, l.name, p); err != nil {
						return nil, err
					}
					continue
				}
				reg.mu.Unlock()
				if o.t.alive() {
					h, downgradeFrom, err := l.relate(ctx, o.t)
					if h != nil || err != nil {
						return h, err
					}
					parent = downgradeFrom
				}
				reg.mu.Lock()
				// Decide again if anything changed while reg.mu was free.
				if reg.m[k] != nil || reg.other(k) != o || (parent != nil && !parent.held()) {
					reg.mu.Unlock()
					continue
				}
			}
			t := c.newTenure(l.kind, []string{l.name}, owner, l.cfg)
			t.parent = parent
			cur = &owned{t: t, pending: make(chan struct{})}
			reg.m[k] = cur
			reg.mu.Unlock()
			h, err := l.acquire(ctx, t, wait)
			reg.mu.Lock()
			close(cur.pending)
			cur.pending = nil
			if err != nil && reg.m[k] == cur {
				delete(reg.m, k)
			}
			reg.mu.Unlock()
			return h, err
		}
		if p := cur.pending; p != nil {
			reg.mu.Unlock()
			if err := c.await(ctx, l.name, p); err != nil {
				return nil, err
			}
			continue
		}
		reg.mu.Unlock()
		if h := cur.t.reenter(ctx); h != nil {
			return h, nil
		}
		c.forget(cur.t) // ended: start a new tenure
	}
}

// other returns the explicit owner's tenure on k's name of another family
// than k's that is being acquired or is still held, if any. reg.mu must be
// held.
func (reg *owners) other(k ownedKey) *owned {
	for _, f := range [...]driver.Kind{driver.KindMutex, driver.KindRead, driver.KindWrite} {
		if f != k.kind {
			if o := reg.m[ownedKey{k.name, k.owner, f}]; o != nil && (o.pending != nil || o.t.held()) {
				return o
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
