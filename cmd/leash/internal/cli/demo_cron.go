package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leash-go/leash/schedule"
)

// lateHost is scene 5: a tick skipped by a host whose clock is behind.
func (d *demo) lateHost(ctx context.Context) error {
	d.tl.scene(5, "two hosts run a job every second; host-b's clock is 300ms behind, so it fires late")
	name := d.prefix + "cron:heartbeat"
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu      sync.Mutex
		ran     = map[time.Time][]string{}
		skipped int
		done    = make(chan struct{})
		wg      sync.WaitGroup
	)
	for _, h := range []struct {
		who string
		off time.Duration
	}{{"host-a", 0}, {"host-b", -300 * time.Millisecond}} {
		c, err := d.client(nil)
		if err != nil {
			return err
		}
		defer c.Close()
		log := slog.New(&skipLog{say: func(tick time.Time) {
			mu.Lock()
			skipped++
			mu.Unlock()
			d.tl.say(h.who, "fired for %s by its clock: already claimed, skipped", tick.UTC().Format("15:04:05"))
		}})
		off := h.off
		s, err := schedule.New(c, &schedule.Options{Now: func() time.Time { return time.Now().Add(off) }, Logger: log,
			Grace: schedule.NoGrace})
		if err != nil {
			return err
		}
		err = s.Add(name, "@every 1s", func(ctx context.Context, run schedule.Run) error {
			mu.Lock()
			defer mu.Unlock()
			ran[run.Tick] = append(ran[run.Tick], h.who)
			d.tl.say(h.who, "claimed and ran %s  fence %d", run.Tick.UTC().Format("15:04:05"), run.Fence)
			if len(ran) == 3 && skipped > 0 {
				select {
				case <-done:
				default:
					close(done)
				}
			}
			return nil
		}, nil)
		if err != nil {
			return err
		}
		// Owner: this scene. Stops when stop is called.
		wg.Go(func() { _ = s.Run(ctx) })
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		stop()
		wg.Wait()
		return errors.New("three ticks with a skip did not come within 30s")
	}
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for tick, who := range ran {
		if len(who) > 1 {
			return fmt.Errorf("tick %s ran on %v", tick.UTC().Format(time.RFC3339Nano), who)
		}
	}
	d.tl.say("demo", "%d ticks, each run once; the late host skipped what another host had run", len(ran))
	return nil
}

// skipLog is a slog handler that reports the scheduler's claims refused
// because the tick was taken.
type skipLog struct {
	say func(tick time.Time)
}

func (*skipLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *skipLog) Handle(_ context.Context, r slog.Record) error {
	var (
		taken bool
		tick  time.Time
	)
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "status":
			taken = a.Value.String() == "taken"
		case "tick":
			if a.Value.Kind() == slog.KindTime {
				tick = a.Value.Time()
			}
		}
		return true
	})
	if taken {
		l.say(tick)
	}
	return nil
}

func (l *skipLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *skipLog) WithGroup(string) slog.Handler      { return l }
