module github.com/leash-go/leash/cmd/leash

go 1.26.0

require (
	github.com/leash-go/leash v0.1.0
	github.com/leash-go/leash/redisstore v0.1.0
	github.com/leash-go/leash/zkstore v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
	golang.org/x/sys v0.48.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-zookeeper/zk v1.0.4 // indirect
	go.uber.org/atomic v1.12.0 // indirect
)
