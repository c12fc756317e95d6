package main

import _ "github.com/leash-go/leash/zkstore" // registers zk:// URLs
