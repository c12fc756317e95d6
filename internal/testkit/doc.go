// Package testkit holds the helpers that leash's tests share across its
// modules (redisstore, cmd/leash, reliability), and that the leash demo
// uses too: a child process read line by line (most often the test binary
// run again to play a lock holder that can be paused and killed for real),
// and the fenced resource that holders write to.
//
// Like testserver it needs no driver and no leash type, so the root module
// keeps no dependency: callers run FenceLua with their own Redis client.
package testkit
