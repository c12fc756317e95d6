module github.com/leash-go/leash/bench

go 1.26.0

replace (
	github.com/leash-go/leash => ../
	github.com/leash-go/leash/redisstore => ../redisstore
)

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/leash-go/leash v0.1.0
	github.com/leash-go/leash/redisstore v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redis/rueidis v1.0.79
	golang.org/x/image v0.47.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
