package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/internal/testserver"
	"github.com/redis/go-redis/v9"
)

var (
	profLib = flag.Int("lib", 0, "library index")
	profG   = flag.Int("g", 16, "goroutines")
)

// TestProfile runs one uncontended scenario, for profiling:
//
//	BENCH_PROFILE=1 GOWORK=off go test -run TestProfile -cpuprofile cpu.out -args -lib 0 -g 16
func TestProfile(t *testing.T) {
	if os.Getenv("BENCH_PROFILE") == "" {
		t.Skip("set BENCH_PROFILE=1 to run")
	}
	srv, err := testserver.StartRedis(testserver.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	l := libs()[*profLib]
	if _, err := runUncontended(l, srv.Addr, *profG, 300*time.Millisecond, "warm", nil); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	rdb.ConfigResetStat(context.Background())
	r, err := runUncontended(l, srv.Addr, *profG, 3*time.Second, "x", srv.CPU)
	if err != nil {
		t.Fatal(err)
	}
	client, server := r.cpuPerLock()
	fmt.Printf("client cpu %v = %v per op\n", r.clientCPU, client)
	fmt.Printf("%-16s g=%-3d %8.0f ops/s p50 %v p99 %v\n", l.name, *profG, r.opsPerSec, r.p50, r.p99)
	fmt.Printf("redis-server cpu %v = %v per op\n", r.serverCPU, server)
	info, _ := rdb.Info(context.Background(), "commandstats").Result()
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_eval") {
			fmt.Println(strings.TrimSpace(line))
		}
	}
}
