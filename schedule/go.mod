module github.com/leash-go/leash/schedule

go 1.26.0

require (
	github.com/leash-go/leash v0.1.0
	github.com/netresearch/go-cron v0.9.1
)

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/leash-go/leash/pgstore v0.1.0
	github.com/leash-go/leash/redisstore v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
)
