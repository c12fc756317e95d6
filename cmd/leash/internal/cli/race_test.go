//go:build race

package cli

// raceBuild: the tests build the leash binary with the race detector too.
const raceBuild = true
