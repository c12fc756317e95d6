// Command leash runs commands under distributed locks, inspects locks, and
// demonstrates leash. Run "leash help" for the commands.
package main

import (
	"os"

	"github.com/leash-go/leash/cmd/leash/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
