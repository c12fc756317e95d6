package testserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is the running process of a test server: started, signalled and
// ended by the server type that embeds it. The zero value is not running.
type process struct {
	name string // the server, for messages ("zookeeper"); may be empty
	// removeDir is a directory the server type made for itself, which
	// Close removes; empty when the caller gave the directory.
	removeDir string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// spawn starts cmd so that it dies with this process, even on a crash, and
// returns a channel closed when it exits. A server that starts its process
// itself (not through run) records both in its process once it is ready.
func spawn(cmd *exec.Cmd) (chan struct{}, error) {
	cmd.SysProcAttr = serverProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	// Owner: the server's process value. Stops when the process exits.
	go func() { _ = cmd.Wait(); close(exited) }()
	return exited, nil
}

// run starts cmd (unless a process is running), made to die with this
// process, and waits until ready reports nil. It fails when the process
// exits first or ready has not succeeded within timeout, and then says
// what logTail returns. what names the server in messages.
func (p *process) run(what string, cmd *exec.Cmd, ready func() error, timeout time.Duration, logTail func() string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return nil
	}
	exited, err := spawn(cmd)
	if err != nil {
		return fmt.Errorf("testserver: start %s: %w", what, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			break
		}
		select {
		case <-exited:
			return fmt.Errorf("testserver: %s exited at start: %s", what, logTail())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("testserver: %s not ready after %v (%v): %s", what, timeout, err, logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.cmd, p.exited = cmd, exited
	return nil
}

// running reports whether a process is running.
func (p *process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// PID returns the server's process id, or 0 when it is not running.
func (p *process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// signal sends sig to the running server.
func (p *process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		if p.name != "" {
			return errors.New("testserver: " + p.name + " is not running")
		}
		return errors.New("testserver: the server is not running")
	}
	return p.cmd.Process.Signal(sig)
}

// Pause freezes the server with SIGSTOP. Clients can still connect (the
// kernel accepts), but nothing is answered until Resume.
func (p *process) Pause() error { return p.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (p *process) Resume() error { return p.signal(syscall.SIGCONT) }

// Kill ends the server with SIGKILL, as a crash would, and waits for it.
func (p *process) Kill() error { return p.end(syscall.SIGKILL) }

// end sends sig to the server (SIGCONT first: a stopped process ignores
// SIGTERM) and waits for it to exit, killing it after 10s.
func (p *process) end(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	if cmd == nil {
		p.mu.Unlock()
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	err := cmd.Process.Signal(sig)
	p.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	p.mu.Lock()
	p.cmd, p.exited = nil, nil
	p.mu.Unlock()
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// Close kills the server and removes its directory if the server type
// made it. It is safe to call more than once.
func (p *process) Close() {
	_ = p.Kill()
	if p.removeDir != "" {
		_ = os.RemoveAll(p.removeDir)
	}
}

// logTail returns the last lines of the log file at path, joined.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}
