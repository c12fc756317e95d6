module github.com/leash-go/leash/mysqlstore

go 1.26.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/leash-go/leash v0.1.0
)

require filippo.io/edwards25519 v1.2.0 // indirect

