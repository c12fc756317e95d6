package schedule_test

import (
	"context"
	"fmt"
	"time"
	_ "time/tzdata" // the examples and tests name zones on machines without a zone database too

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/schedule"
)

// Three instances of a service run the same job every 100ms on one store;
// each tick runs once across them. (A real service shares a server-backed
// store such as redisstore; memstore shares only one process.)
func Example() {
	store := memstore.New()
	ctx, cancel := context.WithCancel(context.Background())
	runs := make(chan time.Time, 100)
	done := make(chan struct{})
	for range 3 {
		client, err := leash.New(store, nil)
		if err != nil {
			panic(err)
		}
		defer client.Close()
		s, err := schedule.New(client, nil)
		if err != nil {
			panic(err)
		}
		err = s.Add("report", "@every 100ms", func(ctx context.Context, run schedule.Run) error {
			runs <- run.Tick // write with run.Fence where it matters
			return nil
		}, nil)
		if err != nil {
			panic(err)
		}
		go func() {
			defer func() { done <- struct{}{} }()
			_ = s.Run(ctx) // until ctx ends
		}()
	}
	seen := map[time.Time]int{}
	for len(seen) < 5 {
		seen[<-runs]++
	}
	cancel()
	for range 3 {
		<-done
	}
	close(runs)
	for t := range runs {
		seen[t]++
	}
	once := true
	for _, n := range seen {
		once = once && n == 1
	}
	fmt.Println("every tick ran once:", once)
	// Output: every tick ran once: true
}

// The store keeps each job's last runs for every instance to read.
func ExampleScheduler_History() {
	client, err := leash.New(memstore.New(), nil)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	s, err := schedule.New(client, nil)
	if err != nil {
		panic(err)
	}
	ran := make(chan struct{}, 1)
	_ = s.Add("cleanup", "@every 50ms", func(ctx context.Context, run schedule.Run) error {
		select {
		case ran <- struct{}{}:
		default:
		}
		return fmt.Errorf("disk full")
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- s.Run(ctx) }()
	<-ran
	cancel()
	<-stopped
	st, err := s.History(context.Background(), "cleanup", 0)
	if err != nil {
		panic(err)
	}
	last := st.Runs[len(st.Runs)-1] // the oldest: the first run, ended
	fmt.Println(last.Outcome, last.Error, last.Attempt)
	// Output: failed disk full 1
}

// A job at 02:30 every night in Berlin, across the spring-forward change:
// 02:30 does not exist on 29 March 2026, and the job runs at 03:30 summer
// time that night.
func ExampleParse() {
	s, err := schedule.Parse("CRON_TZ=Europe/Berlin 0 30 2 * * *", nil)
	if err != nil {
		panic(err)
	}
	tick := time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC)
	for range 3 {
		tick = s.Next(tick)
		fmt.Println(tick.Format("Mon 2 Jan 15:04 MST"))
	}
	every, _ := schedule.Parse("@every 15m", nil)
	fmt.Println(every.Next(time.Date(2026, 3, 27, 12, 7, 0, 0, time.UTC)).Format("15:04"))
	// Output:
	// Sat 28 Mar 02:30 CET
	// Sun 29 Mar 03:30 CEST
	// Mon 30 Mar 02:30 CEST
	// 12:15
}
