package driver

import "context"

// Revoker is implemented by a store that can revoke a lock: take it from a
// live holder and tell the holder at once, without letting anyone else take
// the name before that holder was told or its lease ran out. An operator's
// force unlock (leash unlock --force, leash.Client.ForceUnlock) uses it when
// the store has it. The rules:
//
//   - Revoke ends the exclusive hold on name (a KindMutex, KindFair or
//     KindWrite tenure, a Redisson lock): the holder's Renew reports
//     RenewRevoked from then on, its Release ErrNotHeld. In its place it
//     leaves a tombstone that keeps the name from being granted to anyone,
//     of any kind, until the holder acknowledges (AckRevoke) or the lease
//     the holder had when revoked runs out, by the server's clock. It
//     publishes a [Revocation] to the holder's client (see WatchRevokes).
//     A name held by readers or permits, which have many holders, is not
//     revoked: Revoke returns ErrUnsupported and changes nothing (use
//     ForceRelease). Revoking a free name, or one already revoked, changes
//     nothing and reports false.
//   - AckRevoke removes req.Owner from req.Name's tombstone; the last
//     acknowledgement deletes it and wakes every waiter. It is not an
//     error when there is no tombstone, or it does not name req.Owner.
//   - ForceRelease on a Revoker also publishes a Revocation to each holder
//     it deleted (readers and permits included), so that they learn at
//     once; it keeps nothing back: the name is free at once, while the old
//     holders may still be acting on it. It deletes a tombstone too.
//
// Tombstones keep the store's layout for other clients: on Redis, the lock
// hash stays (Redisson sees the name held) without its owner field (a
// Redisson holder's watchdog stops renewing it).
type Revoker interface {
	// Revoke revokes the exclusive hold on name (see above), and reports
	// whether there was one.
	Revoke(ctx context.Context, name string) (bool, error)
	// WatchRevokes arranges for revoked to be called with each Revocation
	// of a lock held by an owner of client (the id that starts its owner
	// strings, see [OwnerClient]) until stop is called. It returns once
	// revocations are flowing. revoked must not block. A revocation can be
	// lost (a reconnect): the holder then learns at its next renewal
	// (RenewRevoked), and the tombstone still holds the name until then.
	WatchRevokes(ctx context.Context, client string, revoked func(Revocation)) (stop func(), err error)
	// AckRevoke acknowledges the revocation of req.Owner's lock on
	// req.Name (see above). The core calls it once the holder was told.
	AckRevoke(ctx context.Context, req Request) error
}

// Revocation tells a client that a lock of one of its owners was revoked
// or force-released.
type Revocation struct {
	// Name is the lock name.
	Name string
	// Owner is the revoked owner, "<client-id>:<n>[@owner]".
	Owner string
	// Freed reports that the name was freed at once (ForceRelease), not
	// kept by a tombstone: there is nothing to acknowledge.
	Freed bool
}
