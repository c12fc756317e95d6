package leash

import (
	"context"
	"fmt"
	"time"

	"github.com/leash-go/leash/driver"
)

// DefaultQueueLease is how long a FairMutex waiter's place in the queue, or an
// RWMutex writer's waiting mark, lasts without the waiter renewing it.
const DefaultQueueLease = 3 * time.Second

// QueueOptions configures the waiting places of a FairMutex or an RWMutex.
// A nil *QueueOptions or a zero field means the default.
type QueueOptions struct {
	// QueueLease is how long a waiter's place lasts without renewal, by the
	// server's clock. A waiting Lock renews its place every QueueLease/3, so
	// a waiter that dies leaves the queue within one QueueLease, and one that
	// gives up leaves it at once. Default DefaultQueueLease (3s).
	//
	// On a store that hands a released lock to the first waiter (Redis,
	// memstore: see driver.HandoffStore), the first waiter's place ends with
	// the grant it is handed, which lasts DefaultQueueLease at most until the
	// waiter takes it. So a waiting Lock there renews its place at least
	// every DefaultQueueLease/2, whatever QueueLease, so that a waiter whose
	// wake-up was lost still takes its grant in time; and a waiter paused
	// (or cut off) for longer than that as its turn comes loses its turn,
	// however long QueueLease is.
	QueueLease time.Duration
}

func queueLease(o *QueueOptions) (time.Duration, error) {
	if o == nil || o.QueueLease == 0 {
		return DefaultQueueLease, nil
	}
	if o.QueueLease < 3*time.Millisecond || o.QueueLease > MaxLease {
		return 0, fmt.Errorf("%w: QueueOptions.QueueLease = %v: must be between 3ms and %v (zero means %v)",
			ErrInvalidOptions, o.QueueLease, MaxLease, DefaultQueueLease)
	}
	return o.QueueLease, nil
}

// FairMutex is an exclusive, reentrant lock that serves waiters in arrival
// order, obtained from [Client.FairMutex]. A release hands the lock to the
// head of the queue and wakes only that waiter, so there is no herd and the
// longest wait stays near (waiters ahead × hold time).
//
// Each waiter's place is itself a short lease (QueueOptions.QueueLease),
// renewed by the waiting Lock: a waiter that dies leaves the queue within one
// queue lease, and one whose context ends leaves it at once. Every deadline
// is measured by the server's clock. Re-entry, fencing, renewal and loss are
// as for [Mutex]; a FairMutex and a Mutex on the same name are the same lock,
// and their waiters share one line: a starving Mutex waiter's mark (see
// Options.Starvation) is a place in it, and on a store that keeps the marks
// a Mutex is not granted past a queued FairMutex waiter either.
type FairMutex struct{ l locker }

// FairMutex returns the fair lock called name. opts, at most one, overrides
// the Client's lock options; q configures the queue (nil for defaults).
func (c *Client) FairMutex(name string, q *QueueOptions, opts ...*LockOptions) *FairMutex {
	l := c.newLocker(driver.KindFair, name, opts)
	if l.err == nil {
		l.wait, l.err = queueLease(q)
	}
	return &FairMutex{l: l}
}

// Name returns the lock name.
func (m *FairMutex) Name() string { return m.l.name }

// Lock takes a place in the queue and waits until the lock is granted to it,
// or ctx ends (the place is then given up at once). Everything else is as
// for [Mutex.Lock].
func (m *FairMutex) Lock(ctx context.Context) (*Hold, error) { return m.l.lock(ctx, true) }

// TryLock takes the lock only if it is free and nobody is queued for it. It
// never takes a place in the queue. See [Mutex.TryLock].
func (m *FairMutex) TryLock(ctx context.Context) (*Hold, error) { return m.l.lock(ctx, false) }
