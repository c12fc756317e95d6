package driver

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// Errors a store returns. Package leash exports the same values, so users
// match them there.
var (
	// ErrNotHeld means the owner does not hold the lock it tried to release
	// or renew.
	ErrNotHeld = errors.New("leash: lock not held")

	// ErrNotALock means a lock name holds something that is not a lock of
	// the kind asked for: another application's data, or a semaphore where
	// a lock is asked for and the reverse. Nothing was granted and nothing
	// was changed. Return it as a [*NotALockError].
	ErrNotALock = errors.New("leash: not a lock")

	// ErrUpgrade is returned when the holder of a read lock asks for the
	// write lock on the same name: it would wait for itself.
	ErrUpgrade = errors.New("leash: cannot upgrade a read lock to a write lock")

	// ErrUnsupported means the store lacks a capability: a lock kind, a
	// semaphore resize, administration. Nothing was sent to the server.
	ErrUnsupported = errors.New("leash: not supported by this store")

	// ErrBadURL means a store URL cannot open a store, whatever the server
	// does: it has no scheme or one no store registered, or it is malformed,
	// has an unknown or repeated parameter, a bad parameter value, or names
	// a file that cannot be read. Nothing was sent to any server. [Open]
	// returns it, and an [Opener] returns an error that matches it (with
	// errors.Is), so that callers tell a usage error from a server that
	// cannot be reached: retrying cannot help.
	ErrBadURL = errors.New("leash: bad store URL")
)

// NotALockError is returned when a lock name holds something other than a
// lock of the kind asked for (see ErrNotALock); errors.Is(err, ErrNotALock)
// reports true for it.
type NotALockError struct {
	// Name is the lock name.
	Name string
	// Found says in a few words what the name holds, as the store sees it:
	// "a string", "a hash without lock fields", "a zset that is not a
	// semaphore", "a semaphore, not a mutex or readers-writer lock"; or, for
	// a key the store keeps beside the lock (redisstore's fencing counter,
	// say), what that key holds and its name.
	Found string
}

func (e *NotALockError) Error() string {
	return fmt.Sprintf("leash: %q is not a lock leash can use: it holds %s, which leash leaves untouched", e.Name, e.Found)
}

// Is reports whether target is ErrNotALock.
func (e *NotALockError) Is(target error) bool { return target == ErrNotALock }

// Supports reports whether s grants locks of kind k.
func Supports(s Store, k Kind) bool {
	if k == KindMutex {
		return true
	}
	ks, ok := s.(KindStore)
	return ok && slices.Contains(ks.Kinds(), k)
}

// IsNil reports whether s is nil, or a nil pointer (or map, slice, func or
// channel) in a Store: a store none of whose methods can be called.
func IsNil(s Store) bool {
	if s == nil {
		return true
	}
	rv := reflect.ValueOf(s)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// Describe names s in messages: its String method when it is a
// fmt.Stringer, its type otherwise.
func Describe(s Store) string {
	if str, ok := s.(fmt.Stringer); ok {
		return str.String()
	}
	return fmt.Sprintf("%T", s)
}

// Unsupported returns the error for a capability s lacks, what being its
// name ("fair locks", "administration"): it matches ErrUnsupported and names
// the store.
func Unsupported(s Store, what string) error {
	return fmt.Errorf("%w: %s has no %s", ErrUnsupported, Describe(s), what)
}
