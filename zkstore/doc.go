// Package zkstore is a leash store on ZooKeeper, through
// github.com/go-zookeeper/zk. The package documentation is completed in a
// later commit.
package zkstore
