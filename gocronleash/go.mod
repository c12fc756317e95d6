module github.com/leash-go/leash/gocronleash

go 1.26.0

require (
	github.com/go-co-op/gocron/v2 v2.21.2
	github.com/jonboulle/clockwork v0.5.0
	github.com/leash-go/leash v0.1.0
	github.com/leash-go/leash/redisstore v0.1.0
	github.com/leash-go/leash/schedule v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/netresearch/go-cron v0.9.1 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
