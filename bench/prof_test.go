package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
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
	if _, err := runUncontended(l, srv.Addr, *profG, 300*time.Millisecond, "warm"); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	rdb.ConfigResetStat(context.Background())
	var ru0, ru1 syscall.Rusage
	srv0 := serverCPU(t, srv)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	r, err := runUncontended(l, srv.Addr, *profG, 3*time.Second, "x")
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("client cpu %v = %v per op\n", cpu, cpu/time.Duration(r.opsPerSec*3))
	fmt.Printf("%-16s g=%-3d %8.0f ops/s p50 %v p99 %v\n", l.name, *profG, r.opsPerSec, r.p50, r.p99)
	srv1 := serverCPU(t, srv)
	fmt.Printf("redis-server cpu %v = %v per op\n", srv1-srv0, (srv1-srv0)/time.Duration(r.opsPerSec*3))
	info, _ := rdb.Info(context.Background(), "commandstats").Result()
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_eval") {
			fmt.Println(strings.TrimSpace(line))
		}
	}
}

// serverCPU is redis-server's CPU time since it started.
func serverCPU(t *testing.T, srv *testserver.Redis) time.Duration {
	d, err := srv.CPU()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
