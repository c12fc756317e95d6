package testkit

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TB is the part of testing.TB that StartSelf uses. It is declared here so
// that the package does not import testing (the demo uses it too).
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// Child is a running process whose stdout is read line by line. Its methods
// are safe for use by one goroutine at a time (a test's own).
type Child struct {
	name  string
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{} // closed once stdout is read to its end and the process has exited
	stop  chan struct{} // closed by Kill: lines nobody will read are dropped
	once  sync.Once
}

// Start starts cmd and reads its stdout line by line. Each line goes first
// to onLine, if not nil, as it arrives, then to Next and Await. name says
// which child an error is about ("holder", "worker w1"). cmd's Stderr is
// left as the caller set it. The caller ends the child with Kill.
func Start(name string, cmd *exec.Cmd, onLine func(string)) (*Child, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &Child{name: name, cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{}), stop: make(chan struct{})}
	// Owner: this Child. Stops when the child's stdout closes (it exited,
	// or Kill killed it) and the process is reaped.
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if onLine != nil {
				onLine(sc.Text())
			}
			select {
			case c.lines <- sc.Text():
			case <-c.stop:
			}
		}
		close(c.lines)
		_, _ = io.Copy(io.Discard, out) // past a line too long to scan, the child must not block
		_ = cmd.Wait()
	}()
	return c, nil
}

// Self returns a command that runs the test binary again with env added to
// this process's environment, running no test (-test.run=^$), its stderr
// shared with this process: its TestMain, finding env set, plays the child's
// part instead of running tests.
func Self(env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// StartSelf starts Self(env...) for the test as the child called name, and
// kills it at cleanup (SIGCONT first, so a paused child never leaks). It
// fails the test if the process does not start.
func StartSelf(t TB, name string, env ...string) *Child {
	t.Helper()
	c, err := Start(name, Self(env...), nil)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(c.Kill)
	return c
}

// Next returns the child's next line. It waits at most within, counted from
// the call, and fails if the child exits first.
func (c *Child) Next(within time.Duration) (string, error) {
	select {
	case l, ok := <-c.lines:
		if !ok {
			return "", fmt.Errorf("%s exited", c.name)
		}
		return l, nil
	case <-time.After(within):
		return "", fmt.Errorf("%s silent for %v", c.name, within)
	}
}

// Await returns the child's next line that starts with prefix, passing over
// the others. It waits at most within, counted from the call, and fails if
// the child exits first or says a line that starts with "error" (how a
// child reports that it cannot play its part).
func (c *Child) Await(prefix string, within time.Duration) (string, error) {
	timeout := time.After(within)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				return "", fmt.Errorf("%s exited while awaiting %q", c.name, prefix)
			}
			if strings.HasPrefix(l, "error") {
				return "", fmt.Errorf("%s: %s", c.name, l)
			}
			if strings.HasPrefix(l, prefix) {
				return l, nil
			}
		case <-timeout:
			return "", fmt.Errorf("%s silent for %v awaiting %q", c.name, within, prefix)
		}
	}
}

// Acquired reads the first line of a holder child, "acquired <fence>", and
// returns the fencing token. It waits at most within, as Next does.
func (c *Child) Acquired(within time.Duration) (int64, error) {
	line, err := c.Next(within)
	if err != nil {
		return 0, err
	}
	f, ok := strings.CutPrefix(line, "acquired ")
	if !ok {
		return 0, fmt.Errorf("%s said %q, want acquired", c.name, line)
	}
	fence, err := strconv.ParseInt(f, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s said %q, want acquired <fence>: %w", c.name, line, err)
	}
	return fence, nil
}

// Drain discards the lines the child has said so far.
func (c *Child) Drain() {
	for {
		select {
		case _, ok := <-c.lines:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// Pid returns the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Signal sends sig to the child, such as SIGKILL for a crash that the test
// then observes from outside.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Pause freezes the child with SIGSTOP.
func (c *Child) Pause() error { return c.Signal(syscall.SIGSTOP) }

// Resume continues a paused child with SIGCONT.
func (c *Child) Resume() error { return c.Signal(syscall.SIGCONT) }

// Kill ends the child with SIGKILL (after a SIGCONT, since it may be
// paused) and waits until it has exited. Lines it said and nobody read are
// dropped. It is safe to call more than once, and after the child exited.
func (c *Child) Kill() {
	c.once.Do(func() { close(c.stop) })
	_ = c.cmd.Process.Signal(syscall.SIGCONT)
	_ = c.cmd.Process.Kill()
	<-c.done
}

// Wait waits at most within, counted from the call, for the child to exit on
// its own, having said all its lines.
func (c *Child) Wait(within time.Duration) error {
	select {
	case <-c.done:
		return nil
	case <-time.After(within):
		return fmt.Errorf("%s still running after %v", c.name, within)
	}
}
