package driver

import "context"

// ClientWatcher is implemented by a [Watcher] that sends a wake-up meant
// for one queue head (a [Wake] for WakeHead, a hand-off's included) to that
// head's client alone, instead of to every client watching the name: with
// many clients waiting on one name, each release then wakes one process,
// not all of them. The core watches through WatchClient when the store has
// it, naming its own client id: the part of each owner it sends before the
// first ':' ("<client>:<n>"). The rules, on top of Watch's:
//
//   - WatchClient hears every notification Watch hears for kind on name,
//     and the WakeHead notifications for the owners of client.
//   - A WakeHead notification may reach only the WatchClient watches of the
//     head's client: a plain Watch need not hear it at all. A caller that
//     waits in a fair queue (KindFair, or a starving waiter's KindMutex mark;
//     see [StarvationStore]) must therefore watch through WatchClient.
//
// A wrapper around another store that passes Watch through passes
// WatchClient through too (see the function WatchClient), or it hides the
// head wake-ups from the core.
type ClientWatcher interface {
	Watcher
	// WatchClient is Watch for the waiters of one client (see above).
	WatchClient(ctx context.Context, kind Kind, name, client string, wake func(Wake)) (stop func(), err error)
}

// WatchClient watches kind on name for client through w: w's WatchClient
// when w is a [ClientWatcher], otherwise its Watch, which then hears every
// wake-up of the name. A wrapper whose Watch passes through to an inner
// Watcher implements WatchClient with it, so that a ClientWatcher inside
// keeps its rules.
func WatchClient(ctx context.Context, w Watcher, kind Kind, name, client string, wake func(Wake)) (stop func(), err error) {
	if cw, ok := w.(ClientWatcher); ok {
		return cw.WatchClient(ctx, kind, name, client, wake)
	}
	return w.Watch(ctx, kind, name, wake)
}
