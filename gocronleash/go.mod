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
