package leash

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/leash-go/leash/driver"
)

// undo releases a lock that was granted but will not be handed to the caller.
func (c *Client) undo(ctx context.Context, t *tenure) {
	t.mu.Lock()
	t.state = stateReleased
	t.mu.Unlock()
	c.releaseParts(ctx, t.requests(), t.grantAt+int64(t.cfg.lease))
}

// releaseParts releases reqs now, leaving any that fail to the background
// cleanup until until.
func (c *Client) releaseParts(ctx context.Context, reqs []driver.Request, until int64) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.releaseTimeout)
	defer cancel()
	for _, r := range reqs {
		if err := c.store.Release(rctx, r); err != nil && !errors.Is(err, ErrNotHeld) {
			c.sched.cleanup(r, until, false)
		}
	}
}

// releaseAll releases reqs with bounded parallelism and returns the errors
// other than ErrNotHeld.
func (c *Client) releaseAll(ctx context.Context, reqs []driver.Request) []error {
	const workers = 16
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range min(workers, len(reqs)) {
		// Owner: Close. Stops when every request has been tried.
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(reqs) {
					return
				}
				r := reqs[i]
				if err := c.store.Release(ctx, r); err != nil && !errors.Is(err, ErrNotHeld) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("leash: release %q on close: %w", r.Name, err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs
}
