package leash

import (
	"context"

	"github.com/leash-go/leash/driver"
)

// RWMutex is a readers-writer lock on one name, obtained from
// [Client.RWMutex]: any number of readers, or one writer.
//
// Each reader holds a lease of its own, renewed by the watchdog like a lock,
// so a reader that crashes frees its share alone, within one lease. Writers
// are not starved by a stream of readers: while a writer waits, new readers
// wait too (the writer's waiting mark is a short lease, QueueOptions). The
// last reader's release wakes one waiting writer; a writer's release wakes
// the next writer if one waits, and otherwise every waiting reader.
//
// A writer may downgrade: RLock with the write hold's context (or the same
// [WithOwner] owner) takes a read lease at once, a tenure of its own, and
// after the write Unlock it remains a reader. The reverse is refused: Lock
// with a read hold's context (or owner) returns an error matching ErrUpgrade
// instead of waiting for itself. Re-entry through the context works for both
// sides, as for [Mutex].
type RWMutex struct{ r, w locker }

// RWMutex returns the readers-writer lock called name. opts, at most one,
// overrides the Client's lock options for both sides; q configures the
// writers' waiting marks (nil for defaults).
func (c *Client) RWMutex(name string, q *QueueOptions, opts ...*LockOptions) *RWMutex {
	rw := &RWMutex{r: c.newLocker(driver.KindRead, name, opts), w: c.newLocker(driver.KindWrite, name, opts)}
	wait, err := queueLease(q) // readers never take a place; writers mark that they wait
	if rw.w.err == nil {
		rw.w.wait, rw.w.err = wait, err
	}
	if rw.r.err == nil {
		rw.r.err = err
	}
	return rw
}

// Name returns the lock name.
func (rw *RWMutex) Name() string { return rw.w.name }

// RLock takes a read lease, waiting while a writer holds the lock or waits
// for it. See [Mutex.Lock] for ctx, re-entry and errors; with a write hold's
// context it downgrades.
func (rw *RWMutex) RLock(ctx context.Context) (*Hold, error) { return rw.r.lock(ctx, true) }

// TryRLock makes one attempt at a read lease. See [Mutex.TryLock].
func (rw *RWMutex) TryRLock(ctx context.Context) (*Hold, error) { return rw.r.lock(ctx, false) }

// Lock takes the write lock, waiting while readers or another writer hold
// it; while it waits, new readers wait too. With a read hold's context it
// returns an error matching ErrUpgrade. See [Mutex.Lock].
func (rw *RWMutex) Lock(ctx context.Context) (*Hold, error) { return rw.w.lock(ctx, true) }

// TryLock makes one attempt at the write lock, without marking itself as a
// waiting writer. See [Mutex.TryLock].
func (rw *RWMutex) TryLock(ctx context.Context) (*Hold, error) { return rw.w.lock(ctx, false) }
