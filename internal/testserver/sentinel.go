package testserver

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// Sentinel is a redis-server in Sentinel mode.
type Sentinel struct {
	// Addr is "127.0.0.1:<port>".
	Addr string
	cmd  *exec.Cmd
}

// NewSentinel starts a Sentinel for the test that monitors master under
// name, alone (quorum 1), with failure detection fast enough for tests: the
// master is down after 300 ms without a reply, and a failover may take 3 s.
// It returns once the Sentinel answers PING and stops it at cleanup. The
// Sentinel learns the master's replicas from the master itself, within a
// moment of starting; a test that fails over should wait until it lists
// them (SENTINEL REPLICAS).
func NewSentinel(t TB, master *Redis, name string) *Sentinel {
	t.Helper()
	bin, err := RedisBinary()
	if err != nil {
		t.Fatalf("%v", err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatalf("testserver: sentinel port: %v", err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it as it learns
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
		"sentinel monitor %[4]s 127.0.0.1 %[5]d 1\n"+
		"sentinel down-after-milliseconds %[4]s 300\nsentinel failover-timeout %[4]s 3000\n",
		port, dir, filepath.Join(dir, "sentinel.log"), name, master.Port)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatalf("testserver: sentinel config: %v", err)
	}
	cmd := exec.Command(bin, conf, "--sentinel")
	cmd.SysProcAttr = serverProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("testserver: start sentinel: %v", err)
	}
	s := &Sentinel{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if !eventually(func() bool { return ping(s.Addr) == nil }) {
		t.Fatalf("testserver: sentinel not answering PING on %s after %v", s.Addr, startTimeout)
	}
	return s
}
