package leash_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/memstore"
)

// TestHolderSeesDeadlineBeforeScheduler checks that every way a holder can
// ask "do I still hold it?" consults the validity deadline itself, so that a
// process resuming from a pause learns of the loss on its first look, even
// before the scheduler goroutine runs.
func TestHolderSeesDeadlineBeforeScheduler(t *testing.T) {
	for name, look := range map[string]func(c *leash.Client, h *leash.Hold) bool{
		"Err":           func(_ *leash.Client, h *leash.Hold) bool { return errors.Is(h.Err(), leash.ErrLost) },
		"Context().Err": func(_ *leash.Client, h *leash.Hold) bool { return h.Context().Err() != nil },
		"Lost": func(_ *leash.Client, h *leash.Hold) bool {
			select {
			case <-h.Lost():
				return true
			default:
				return false
			}
		},
		"Lock re-entry": func(c *leash.Client, h *leash.Hold) bool {
			_, err := c.Mutex("paused").TryLock(h.Context())
			return err != nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			// An hour's lease: the scheduler's own timer is far away.
			c := newClient(t, memstore.New(), &leash.Options{Lease: time.Hour})
			defer c.Close()
			h := mustLock(t, c.Mutex("paused"), context.Background())
			leash.ExpireLocally(h)
			if !look(c, h) {
				t.Fatalf("%s after the deadline passed reports the lock held", name)
			}
			var le *leash.LostError
			if !errors.As(h.Err(), &le) || le.Reason != leash.ReasonExpired {
				t.Errorf("Err = %v, want lost: expired", h.Err())
			}
		})
	}
}
