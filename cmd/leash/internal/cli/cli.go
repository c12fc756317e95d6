// Package cli implements the leash command. main.go only wires the process's
// arguments and output into Main, so every command can be tested in process.
package cli

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"sort"
	"strings"
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

func commands() []*command {
	return []*command{cmdDemo(), cmdVersion(), cmdDemoHolder()}
}

// Main runs the leash command with args (without the program name) and
// returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
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
	fmt.Fprint(w, "leash runs work under distributed locks.\n\nUsage:\n\n\tleash <command> [arguments]\n\nCommands:\n\n")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		if !c.hidden {
			fmt.Fprintf(w, "\t%-10s %s\n", c.name, c.short)
		}
	}
	fmt.Fprint(w, "\nRun 'leash help <command>' for more about a command.\n")
}

func help(e *env, args []string) int {
	if len(args) == 0 {
		usage(e.stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			fmt.Fprintf(e.stdout, "usage: leash %s\n\n%s\n", c.usage, strings.TrimSpace(c.long))
			return exitOK
		}
	}
	e.errorf("unknown help topic %q; run 'leash help'", args[0])
	return exitUsage
}

// flags returns a FlagSet for c whose errors go to e.stderr.
func flags(e *env, c *command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: leash %s\nRun 'leash help %s' for details.\n", c.usage, c.name)
	}
	return fs
}

func cmdVersion() *command {
	return &command{
		name:  "version",
		usage: "version",
		short: "print the leash version",
		long:  "Version prints the version of leash and of the Go toolchain that built it.",
		run: func(e *env, args []string) int {
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
