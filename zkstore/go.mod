module github.com/leash-go/leash/zkstore

go 1.26.0

require (
	github.com/go-zookeeper/zk v1.0.4
	github.com/leash-go/leash v0.1.0
)
