package testserver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// EtcdOptions configures an etcd server.
type EtcdOptions struct {
	// Dir is the data directory (the server's files are in Dir/data, its
	// log is Dir/etcd.log). Empty means a new temporary directory, removed
	// by Close.
	Dir string
	// Args are extra etcd arguments, such as "--heartbeat-interval", "50".
	Args []string
}

// Etcd is an etcd server process: a single-member cluster from StartEtcd,
// or one member of an EtcdCluster.
type Etcd struct {
	// Endpoint is the client URL, "http://127.0.0.1:<port>".
	Endpoint string
	// ClientPort and PeerPort are the TCP ports, kept across restarts.
	ClientPort, PeerPort int
	// Name is the member name.
	Name string
	// Dir is the member's directory: data in Dir/data, log in Dir/etcd.log.
	Dir string

	opts    EtcdOptions
	cluster string // the --initial-cluster value

	process
}

// EtcdBinary returns the path of etcd or ErrNotInstalled.
func EtcdBinary() (string, error) {
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("%w: etcd not found on PATH (apt-get install etcd-server)", ErrNotInstalled)
	}
	return p, nil
}

// StartEtcd starts a single-member etcd cluster on free loopback ports
// (client and peer) and waits until it reports itself healthy.
func StartEtcd(opts EtcdOptions) (*Etcd, error) {
	c, err := startEtcds(1, opts)
	if err != nil {
		return nil, err
	}
	return c.Members[0], nil
}

// EtcdCluster is a cluster of etcd members on loopback.
type EtcdCluster struct {
	Members []*Etcd
}

// Endpoints returns every member's client URL.
func (c *EtcdCluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.Endpoint
	}
	return eps
}

// Close kills every member and removes the directories Start made.
func (c *EtcdCluster) Close() {
	for _, m := range c.Members {
		m.Close()
	}
}

// Restart kills every member (like a crash of the whole cluster) and starts
// them all again on their ports and data directories, and waits until each
// reports itself healthy: the cluster keeps its data, revisions and leases.
func (c *EtcdCluster) Restart() error {
	for _, m := range c.Members {
		if err := m.Kill(); err != nil {
			return err
		}
	}
	for _, m := range c.Members {
		if err := m.launch(); err != nil {
			return err
		}
	}
	for _, m := range c.Members {
		if err := m.waitHealthy(); err != nil {
			return err
		}
	}
	return nil
}

// Leader returns the running member that says it is the leader (its
// etcd_server_is_leader metric is 1), or nil when none does.
func (c *EtcdCluster) Leader() *Etcd {
	for _, m := range c.Members {
		if m.PID() != 0 && m.isLeader() {
			return m
		}
	}
	return nil
}

// isLeader asks the member's /metrics whether it is the leader.
func (e *Etcd) isLeader() bool {
	_, body, err := e.get("/metrics", 1<<24)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.TrimSpace(line) == "etcd_server_is_leader 1" {
			return true
		}
	}
	return false
}

// StartEtcdCluster starts an etcd cluster of n members on free loopback
// ports, each in its own temporary directory (under dir when it is not
// empty), and waits until every member reports itself healthy (which etcd
// does once the cluster has a leader).
func StartEtcdCluster(n int, dir string, args ...string) (*EtcdCluster, error) {
	return startEtcds(n, EtcdOptions{Dir: dir, Args: args})
}

// NewEtcdCluster starts an etcd cluster of n members for the test and kills
// it at cleanup. When etcd is not installed it skips the test, or fails it
// under LEASH_REQUIRE_SERVERS=1.
func NewEtcdCluster(t TB, n int, args ...string) *EtcdCluster {
	t.Helper()
	c, err := StartEtcdCluster(n, t.TempDir(), args...)
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(c.Close)
	return c
}

// NewEtcd starts a single-member etcd for the test and kills it at cleanup
// (SIGCONT first, so a paused server never leaks). When etcd is not
// installed it skips the test, or fails it under LEASH_REQUIRE_SERVERS=1.
func NewEtcd(t TB, opts EtcdOptions) *Etcd {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	e, err := StartEtcd(opts)
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(e.Close)
	return e
}

// startEtcds starts n members that form one cluster. Under opts.Dir (or a
// new temporary directory) each member gets its own directory.
func startEtcds(n int, opts EtcdOptions) (*EtcdCluster, error) {
	if _, err := EtcdBinary(); err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 { // another process may take a free port before etcd binds it
		c, err := tryEtcds(n, opts)
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func tryEtcds(n int, opts EtcdOptions) (*EtcdCluster, error) {
	c := &EtcdCluster{}
	var peers []string
	for i := range n {
		m := &Etcd{opts: opts, Name: fmt.Sprintf("m%d", i), process: process{name: "etcd"}}
		var err error
		if opts.Dir == "" {
			m.Dir, err = os.MkdirTemp("", "leash-etcd-")
			m.removeDir = m.Dir
		} else {
			m.Dir, err = os.MkdirTemp(opts.Dir, "etcd-"+m.Name+"-")
		}
		if err == nil {
			m.ClientPort, err = FreePort()
		}
		if err == nil {
			m.PeerPort, err = FreePort()
		}
		if err != nil {
			c.Close()
			return nil, err
		}
		m.Endpoint = "http://127.0.0.1:" + strconv.Itoa(m.ClientPort)
		peers = append(peers, fmt.Sprintf("%s=http://127.0.0.1:%d", m.Name, m.PeerPort))
		c.Members = append(c.Members, m)
	}
	for _, m := range c.Members {
		m.cluster = strings.Join(peers, ",")
		if err := m.launch(); err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, m := range c.Members {
		if err := m.waitHealthy(); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Start starts the member again on its ports and directory, if it is not
// running, and waits until it reports itself healthy: in a cluster, that
// needs a quorum of members running.
func (e *Etcd) Start() error {
	if err := e.launch(); err != nil {
		return err
	}
	return e.waitHealthy()
}

// launch starts the process without waiting for it to be ready.
func (e *Etcd) launch() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cmd != nil {
		return nil
	}
	bin, err := EtcdBinary()
	if err != nil {
		return err
	}
	peerURL := "http://127.0.0.1:" + strconv.Itoa(e.PeerPort)
	args := []string{
		"--name", e.Name, "--data-dir", filepath.Join(e.Dir, "data"),
		"--listen-client-urls", e.Endpoint, "--advertise-client-urls", e.Endpoint,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", e.cluster, "--initial-cluster-state", "new",
		"--initial-cluster-token", "leash-test",
		// The log goes to stderr, redirected to Dir/etcd.log: --log-outputs
		// takes a comma-separated list, so it cannot name a path with a
		// comma (a test's temporary directory has its name in it).
		"--logger", "zap", "--log-outputs", "stderr",
	}
	args = append(args, e.opts.Args...)
	logf, err := os.OpenFile(filepath.Join(e.Dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	exited, err := spawn(cmd)
	if err != nil {
		return fmt.Errorf("testserver: start etcd: %w", err)
	}
	e.cmd, e.exited = cmd, exited
	return nil
}

// waitHealthy waits until GET /health on the client URL says the member is
// healthy, for up to startTimeout.
func (e *Etcd) waitHealthy() error {
	e.mu.Lock()
	exited := e.exited
	e.mu.Unlock()
	var err error
	ok := eventually(func() bool {
		select {
		case <-exited:
			err = errors.New("exited")
			return true
		default:
		}
		err = e.health()
		return err == nil
	})
	if !ok || err != nil {
		_ = e.Kill()
		return fmt.Errorf("testserver: etcd %s on %s not healthy: %v: %s", e.Name, e.Endpoint, err, logTail(filepath.Join(e.Dir, "etcd.log")))
	}
	return nil
}

// health asks the member's /health endpoint.
func (e *Etcd) health() error {
	resp, body, err := e.get("/health", 1<<10)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"health":"true"`) {
		return fmt.Errorf("/health answered %s %s", resp.Status, strings.TrimSpace(body))
	}
	return nil
}

// get fetches path from the member's client URL, reading at most limit
// bytes of the body.
func (e *Etcd) get(path string, limit int64) (*http.Response, string, error) {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(e.Endpoint + path)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	return resp, string(body), err
}

// Addr returns "127.0.0.1:<client port>".
func (e *Etcd) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(e.ClientPort)) }

// Restart kills the server (like a crash) and starts it again on the same
// ports and data directory: it keeps its data, revisions and leases (etcd
// extends every lease by its time to live when a leader takes over).
func (e *Etcd) Restart() error {
	if err := e.Kill(); err != nil {
		return err
	}
	return e.Start()
}

// SharedEtcd is an etcd server that a test package starts on first use and
// stops in TestMain, for the tests that inject no faults into the server
// itself. The zero value is ready to use.
type SharedEtcd struct{ shared[*Etcd] }

// Etcd returns the server, starting it on the first call. When etcd is not
// installed it skips the test, or fails it under LEASH_REQUIRE_SERVERS=1,
// like NewEtcd.
func (s *SharedEtcd) Etcd(t TB) *Etcd {
	t.Helper()
	return s.get(t, func() (*Etcd, error) { return StartEtcd(EtcdOptions{}) })
}
