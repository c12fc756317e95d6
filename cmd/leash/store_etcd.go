package main

// The etcd store registers etcd:// and etcds:// (see package etcdstore).
import _ "github.com/leash-go/leash/etcdstore"
