// Package cli implements the leash command. main.go only wires the process's
// arguments and output into Main, so every command can be tested in process.
package cli

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// A command is one subcommand, in the manner of cmd/go's base.Command.
type command struct {
	name  string
	usage string // the line after "leash "
	short string
	long  string
	// run runs the command with its arguments; it returns the exit status.
	run    func(e *env, args []string) int
	hidden bool
}

// env is what a command may touch: its output streams.
type env struct {
	stdout, stderr io.Writer
}

func (e *env) errorf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "leash: "+format+"\n", args...)
}

// fail prints err as one line for the command cmd and returns its exit status.
func (e *env) fail(cmd string, err error) int {
	e.errorf("%s: %s", cmd, strings.TrimPrefix(err.Error(), "leash: "))
	return statusOf(err)
}

func commands() []*command {
	return []*command{cmdRun(), cmdCron(), cmdJobs(), cmdLs(), cmdShow(), cmdUnlock(), cmdMarkFresh(), cmdDemo(), cmdVersion(), cmdDemoHolder()}
}

// silenceRedis keeps go-redis's own log lines (one per failed dial) off
// stderr: leash reports each failure in one line of its own.
var silenceRedis sync.Once

type discard struct{}

func (discard) Printf(context.Context, string, ...any) {}

// A topic is a help page that is not a command.
type topic struct {
	name, short string
	text        func(w io.Writer)
}

func topics() []topic {
	return []topic{
		{"store", "store URLs, mem://, TLS, ACL users, Sentinel and Cluster", func(w io.Writer) {
			fmt.Fprintln(w, strings.TrimSpace(storeHelp))
			fmt.Fprintln(w)
			fmt.Fprintln(w, strings.TrimSpace(aclHelp))
			fmt.Fprintln(w)
			fmt.Fprintln(w, strings.TrimSpace(graceHelp))
		}},
		{"exit-status", "what leash's exit statuses mean", func(w io.Writer) {
			fmt.Fprintln(w, "Exit statuses of leash:")
			fmt.Fprintln(w)
			printExitStatuses(w)
		}},
	}
}

// Main runs the leash command with args (without the program name) and
// returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	silenceRedis.Do(func() { redis.SetLogger(discard{}) })
	e := &env{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return help(e, rest)
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(e, rest)
		}
	}
	e.errorf("unknown command %q; run 'leash help' for the list", name)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `leash runs work under distributed locks held in Redis (or another store): a
distributed flock.

Usage:

	leash <command> [arguments]

Commands:

`)
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(w, "\t%-12s %s\n", c.name, c.short)
		}
	}
	fmt.Fprint(w, "\nHelp topics:\n\n")
	for _, t := range topics() {
		fmt.Fprintf(w, "\t%-12s %s\n", t.name, t.short)
	}
	fmt.Fprint(w, `
Examples:

	export LEASH_STORE=redis://127.0.0.1:6379/0
	leash run --no-wait --at-least 10m nightly-report -- ./report.sh
	leash ls 'billing/*'
	leash show nightly-report --json
	leash unlock --force nightly-report

Run 'leash help <command>' or 'leash help <topic>' for more.
`)
}

func help(e *env, args []string) int {
	if len(args) == 0 {
		usage(e.stdout)
		return exitOK
	}
	if len(args) > 1 {
		e.errorf("help takes one command or topic, got %q", args)
		return exitUsage
	}
	for _, c := range commands() {
		if c.name == args[0] {
			printHelp(e.stdout, c)
			return exitOK
		}
	}
	for _, t := range topics() {
		if t.name == args[0] {
			t.text(e.stdout)
			return exitOK
		}
	}
	e.errorf("unknown help topic %q; run 'leash help'", args[0])
	return exitUsage
}

// printHelp prints a command's full help.
func printHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: leash %s\n\n%s\n", c.usage, strings.TrimSpace(c.long))
}

func cmdVersion() *command {
	return &command{
		name:  "version",
		usage: "version",
		short: "print the leash version",
		long: `
Version prints the version of leash and of the Go toolchain that built it.

Example:

  $ leash version
  leash v0.3.0 (go1.26.8)`,
		run: func(e *env, args []string) int {
			if len(args) != 0 {
				e.errorf("version takes no arguments")
				return exitUsage
			}
			version, goVersion := "(devel)", "unknown"
			if bi, ok := debug.ReadBuildInfo(); ok {
				goVersion = bi.GoVersion
				if bi.Main.Version != "" {
					version = bi.Main.Version
				}
			}
			fmt.Fprintf(e.stdout, "leash %s (%s)\n", version, goVersion)
			return exitOK
		},
	}
}
