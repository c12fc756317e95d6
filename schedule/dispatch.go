package schedule

import (
	"container/heap"
	"context"
	"time"
)

// The dispatcher is the Scheduler's one timer: a goroutine that sleeps until
// the earliest next tick of any job, fires every tick that is due, and
// queues each job's following tick. Jobs cost no goroutine between their
// ticks; each fired tick has one until it is claimed and run, or not.

// A dueTick is a job's next tick.
type dueTick struct {
	at time.Time
	j  *job
}

// dueHeap orders the started jobs' next ticks, earliest first. The
// Scheduler's mutex guards it.
type dueHeap []dueTick

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, k int) bool { return h[i].at.Before(h[k].at) }
func (h dueHeap) Swap(i, k int)      { h[i], h[k] = h[k], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueTick)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = dueTick{}
	*h = old[:len(old)-1]
	return x
}

// poke wakes the dispatcher to look at the earliest tick again. The caller
// holds s.mu.
func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// dispatch fires the jobs' ticks as they come due, until ctx ends.
func (s *Scheduler) dispatch(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		wait := s.fireDueLocked()
		s.mu.Unlock()
		if wait >= 0 {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// fireDueLocked fires every tick due by the instance's clock and queues each
// job's next one, dropping removed jobs; it returns how long until the
// earliest queued tick, or -1 when none is queued. The caller holds s.mu.
func (s *Scheduler) fireDueLocked() time.Duration {
	now := s.now()
	for s.due.Len() > 0 {
		d := s.due[0]
		if d.j.ctx.Err() != nil {
			heap.Pop(&s.due) // removed, or Run is ending
			continue
		}
		if d.at.After(now) {
			return d.at.Sub(now)
		}
		heap.Pop(&s.due)
		// After a pause (a stopped process, a suspended machine) only the
		// latest tick due is tried; the ones before it are reported missed
		// by whoever claims a later tick, if no one claimed them.
		tick := d.at
		for n := d.j.sched.Next(tick); !n.IsZero() && !n.After(now); n = d.j.sched.Next(n) {
			tick = n
		}
		s.fire(d.j.ctx, d.j, tick, false)
		if n := d.j.sched.Next(tick); !n.IsZero() {
			heap.Push(&s.due, dueTick{n, d.j})
		}
	}
	return -1
}
