package testserver

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is a server's running process, which every server type embeds:
// its signals, and its end.
type process struct {
	name string // the server binary, for messages

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
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
		return errors.New("testserver: " + p.name + " is not running")
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

func (p *process) end(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	if cmd == nil {
		p.mu.Unlock()
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process ignores SIGTERM
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
