package cli

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// flags returns a FlagSet for c whose errors go to e.stderr.
func flags(e *env, c *command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: leash %s\nRun 'leash help %s' for details.\n", c.usage, c.name)
	}
	return fs
}

// args is a command line split into flags and operands.
type args struct {
	// operands are the arguments that are not flags, before any "--".
	operands []string
	// dash reports whether there was a "--"; rest is what follows it.
	dash bool
	rest []string
}

// parseArgs parses the flags of fs wherever they stand before the first
// "--", so that "leash show NAME --json" works as well as "leash show --json
// NAME". On -h it prints c's full help on stdout and returns errHelp; on a
// bad flag the flag package has already printed the error and the usage.
func parseArgs(e *env, c *command, fs *flag.FlagSet, argv []string) (args, error) {
	var a args
	if i := slices.Index(argv, "--"); i >= 0 {
		a.dash, a.rest, argv = true, argv[i+1:], argv[:i]
	}
	for {
		if err := fs.Parse(argv); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printHelp(e.stdout, c)
				return a, errHelp
			}
			return a, errFlags
		}
		argv = fs.Args()
		if len(argv) == 0 {
			return a, nil
		}
		a.operands = append(a.operands, argv[0])
		argv = argv[1:]
	}
}

var (
	// errHelp: -h was given and the help printed; exit 0.
	errHelp = errors.New("help requested")
	// errFlags: a bad flag, already reported by the flag package.
	errFlags = withStatus(exitUsage, errors.New("bad flags"))
)

// exitParse returns the exit status for an error of parseArgs.
func exitParse(err error) int {
	if errors.Is(err, errHelp) {
		return exitOK
	}
	return exitUsage
}

// durationFlag is a non-negative duration flag that remembers whether it was
// given. It explains bad values better than flag.Duration.
type durationFlag struct {
	d   time.Duration
	set bool
}

func (f *durationFlag) String() string {
	if f == nil || !f.set && f.d == 0 {
		return ""
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return errors.New("a duration needs a unit, such as 30s, 5m or 1h")
		}
		return errors.New("not a duration: write it like 30s, 1m30s or 500ms")
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	f.d, f.set = d, true
	return nil
}

// durationVar defines a durationFlag with a default.
func durationVar(fs *flag.FlagSet, name string, def time.Duration, usage string) *durationFlag {
	f := &durationFlag{d: def}
	fs.Var(f, name, usage)
	return f
}

// parseOperator parses the command line of an operator command (ls, show,
// unlock): the store flags, the flags that extra defines, and the operands,
// those after a "--" included.
func parseOperator(e *env, c *command, argv []string, extra func(fs *flag.FlagSet)) (storeFlags, []string, error) {
	fs := flags(e, c)
	var sf storeFlags
	sf.register(fs)
	extra(fs)
	a, err := parseArgs(e, c, fs, argv)
	return sf, append(a.operands, a.rest...), err
}
