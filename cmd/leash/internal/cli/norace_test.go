//go:build !race

package cli

const raceBuild = false
