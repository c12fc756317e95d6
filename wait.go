package leash

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// waiters groups the Client's waiting Lock calls by lock name, so that one
// store subscription per name serves every local waiter, and each release
// notification wakes exactly one of them.
type waiters struct {
	c      *Client
	mu     sync.Mutex
	groups map[string]*waitGroup
}

// A waitGroup is the local waiters for one name and their shared watch.
type waitGroup struct {
	name  string
	ready chan struct{} // closed once the watch is established or failed
	err   error         // why the watch failed; set before ready is closed
	stop  func()        // ends the watch; set before ready is closed
	list  []*waiter     // in arrival order
}

// A waiter is one waiting Lock call. ch holds at most one pending wake-up, so
// a notification that arrives while the waiter is busy trying is kept.
type waiter struct {
	g  *waitGroup
	ch chan struct{}
}

func (ws *waiters) init(c *Client) {
	ws.c = c
	ws.groups = make(map[string]*waitGroup)
}

// join adds a waiter for name and returns once the store's watch for name is
// established, so that any release from then on wakes someone.
func (ws *waiters) join(ctx context.Context, name string) (*waiter, error) {
	for {
		ws.mu.Lock()
		g := ws.groups[name]
		creator := g == nil
		if creator {
			g = &waitGroup{name: name, ready: make(chan struct{})}
			ws.groups[name] = g
		}
		w := &waiter{g: g, ch: make(chan struct{}, 1)}
		g.list = append(g.list, w)
		ws.mu.Unlock()

		if creator {
			stop, err := ws.c.store.Watch(ctx, name, func() { ws.wake(g) })
			ws.mu.Lock()
			g.stop, g.err = stop, err
			close(g.ready)
			if err != nil && ws.groups[name] == g {
				delete(ws.groups, name)
			}
			ws.mu.Unlock()
			if err != nil {
				ws.leave(w)
				return nil, err
			}
			return w, nil
		}
		select {
		case <-g.ready:
		case <-ctx.Done():
			ws.leave(w)
			return nil, ctx.Err()
		}
		if g.err != nil {
			ws.leave(w)
			if errors.Is(g.err, context.Canceled) || errors.Is(g.err, context.DeadlineExceeded) {
				continue // the first waiter gave up while subscribing; try ourselves
			}
			return nil, g.err
		}
		return w, nil
	}
}

// leave removes a waiter. A wake-up it received but did not use passes to the
// next waiter; the last waiter out ends the watch.
func (ws *waiters) leave(w *waiter) {
	g := w.g
	ws.mu.Lock()
	if i := slices.Index(g.list, w); i >= 0 {
		g.list = slices.Delete(g.list, i, i+1)
	}
	select {
	case <-w.ch:
		ws.wakeLocked(g)
	default:
	}
	var stop func()
	if len(g.list) == 0 && ws.groups[g.name] == g {
		select {
		case <-g.ready:
			delete(ws.groups, g.name)
			stop = g.stop
		default: // the creator is still subscribing and will clean up
		}
	}
	ws.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// wake wakes one waiter of g: the longest-waiting one without a pending
// wake-up. It never blocks, as Store.Watch requires.
func (ws *waiters) wake(g *waitGroup) {
	ws.mu.Lock()
	ws.wakeLocked(g)
	ws.mu.Unlock()
}

func (ws *waiters) wakeLocked(g *waitGroup) {
	for _, w := range g.list {
		select {
		case w.ch <- struct{}{}:
			return
		default:
		}
	}
}
