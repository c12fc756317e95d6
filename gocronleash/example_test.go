package gocronleash_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/leash-go/leash"
	"github.com/leash-go/leash/gocronleash"
	"github.com/leash-go/leash/memstore"
)

// Every instance of a service makes its gocron scheduler with a Locker on
// the shared store, and names the job's schedule so that each tick runs
// once. (A real service shares a server-backed store such as redisstore;
// memstore shares only one process.)
func ExampleLocker() {
	client, err := leash.New(memstore.New(), nil)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	locker, err := gocronleash.NewLocker(client, &gocronleash.Options{
		Schedules: map[string]string{"billing/report": "0 */5 * * * *"}, // as the gocron job below
	})
	if err != nil {
		panic(err)
	}
	// Schedules are read in UTC, and so must gocron read the job's spec.
	s, err := gocron.NewScheduler(gocron.WithLocation(time.UTC), gocron.WithDistributedLocker(locker))
	if err != nil {
		panic(err)
	}
	_, err = s.NewJob(gocron.CronJob("0 */5 * * * *", true),
		gocron.NewTask(locker.Task("billing/report", func(ctx context.Context) error {
			run, _ := gocronleash.RunOf(ctx)
			return report(ctx, run.Tick, run.Fence) // ctx ends if the lock is lost
		})),
		gocron.WithName("billing/report"))
	if err != nil {
		panic(err)
	}
	s.Start()
	defer func() { _ = s.Shutdown() }()
	fmt.Println("scheduled")
	// Output: scheduled
}

func report(context.Context, time.Time, int64) error { return nil }

// A host whose clock runs behind fires a tick after another host ran it:
// its Lock is refused, and gocron skips the run.
func ExampleLocker_lateHost() {
	store := memstore.New()
	tick := time.Now().Truncate(time.Hour)
	host := func(clock time.Duration) *gocronleash.Locker {
		c, err := leash.New(store, nil)
		if err != nil {
			panic(err)
		}
		l, err := gocronleash.NewLocker(c, &gocronleash.Options{
			Schedules: map[string]string{"hourly": "@every 1h"},
			Now:       func() time.Time { return tick.Add(clock) },
		})
		if err != nil {
			panic(err)
		}
		return l
	}
	ctx := context.Background()
	lk, err := host(5*time.Millisecond).Lock(ctx, "hourly")
	fmt.Println("first host:", err)
	_ = lk.Unlock(ctx)
	_, err = host(2*time.Second).Lock(ctx, "hourly")
	fmt.Println("late host:", errors.Is(err, gocronleash.ErrTickTaken))
	// Output:
	// first host: <nil>
	// late host: true
}
