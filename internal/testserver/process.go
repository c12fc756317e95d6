package testserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is the running process of a server the package started: nil
// cmd while it does not run. A server type embeds it for PID, Pause,
// Resume and Kill.
type process struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
	what   string        // the server, for messages ("redis-server")
}

// spawn starts cmd so that it dies with this process, even on a crash, and
// returns a channel closed when it exits. The caller records both with
// p.mu held once the server is ready.
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
		return fmt.Errorf("testserver: %s is not running", p.what)
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

// end sends sig (after SIGCONT: a stopped process ignores SIGTERM) and
// waits for the server to exit, killing it after 10 s.
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
