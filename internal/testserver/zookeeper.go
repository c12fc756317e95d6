package testserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ZooKeeper tick time of the servers this package starts: sessions may be as
// short as two ticks, so tests can let a session expire in well under a
// second.
const ZooKeeperTick = 100 * time.Millisecond

// ZooKeeperMaxSession is the longest session timeout the servers grant, so
// that a session can cover leash's 30 s default lease.
const ZooKeeperMaxSession = 60 * time.Second

// zookeeperJars are the jars of Debian's zookeeper package (under
// /usr/share/java) that the server needs on its class path.
var zookeeperJars = []string{
	"zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-simple.jar",
	"netty-handler.jar", "netty-common.jar", "netty-buffer.jar", "netty-transport.jar",
	"netty-codec.jar", "netty-resolver.jar", "netty-transport-native-epoll.jar",
	"netty-transport-native-unix-common.jar", "metrics-core.jar", "commons-io.jar",
	"snappy-java.jar",
}

// zookeeperStartTimeout bounds how long a ZooKeeper server may take to
// serve: a JVM starts slowly on a busy machine, and an ensemble member
// serves only once a quorum has elected a leader.
const zookeeperStartTimeout = time.Minute

// zookeeperJarDir is where Debian's zookeeper package puts its jars.
const zookeeperJarDir = "/usr/share/java"

// ZooKeeperClassPath returns the class path of a ZooKeeper server and the
// java binary, or ErrNotInstalled.
func ZooKeeperClassPath() (java, classPath string, err error) {
	java, err = exec.LookPath("java")
	if err != nil {
		return "", "", fmt.Errorf("%w: java not found on PATH (apt-get install zookeeper default-jre-headless)", ErrNotInstalled)
	}
	paths := make([]string, len(zookeeperJars))
	for i, j := range zookeeperJars {
		paths[i] = filepath.Join(zookeeperJarDir, j)
		if _, err := os.Stat(paths[i]); err != nil {
			return "", "", fmt.Errorf("%w: %s missing (apt-get install zookeeper)", ErrNotInstalled, paths[i])
		}
	}
	return java, strings.Join(paths, ":"), nil
}

// ZooKeeper is one ZooKeeper server process: standalone, or a member of an
// ensemble (see StartZooKeeperEnsemble).
type ZooKeeper struct {
	// Addr is the client address, "127.0.0.1:<port>".
	Addr string
	// Port is the client port, kept across restarts.
	Port int
	// Dir is the server's directory: its configuration zoo.cfg, its data
	// (data/) and its log zookeeper.log.
	Dir string
	// ID is the server's id in its ensemble (0 for a standalone server).
	ID int

	process
}

// StartZooKeeper starts a standalone ZooKeeper server on a free loopback port
// in dir (a new temporary directory, removed by Close, when dir is empty)
// and waits until it serves requests (the "srvr" four-letter word).
func StartZooKeeper(dir string) (*ZooKeeper, error) {
	if _, _, err := ZooKeeperClassPath(); err != nil {
		return nil, err
	}
	z := &ZooKeeper{Dir: dir, process: process{name: "zookeeper"}}
	if z.Dir == "" {
		d, err := os.MkdirTemp("", "leash-zookeeper-")
		if err != nil {
			return nil, err
		}
		z.Dir, z.removeDir = d, d
	}
	var lastErr error
	for range 5 { // another process may take the free port before the JVM binds it
		port, err := FreePort()
		if err != nil {
			z.Close()
			return nil, err
		}
		z.Port = port
		z.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = z.writeConfig(""); lastErr != nil {
			break
		}
		if lastErr = z.Start(); lastErr == nil {
			if lastErr = z.awaitServing(); lastErr == nil {
				return z, nil
			}
			_ = z.Kill()
		}
	}
	z.Close()
	return nil, lastErr
}

// writeConfig writes Dir/zoo.cfg; ensemble is the "server.N=…" lines of an
// ensemble member, empty for a standalone server.
func (z *ZooKeeper) writeConfig(ensemble string) error {
	data := filepath.Join(z.Dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	if z.ID > 0 {
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(z.ID)+"\n"), 0o644); err != nil {
			return err
		}
	}
	cfg := fmt.Sprintf(`tickTime=%d
minSessionTimeout=%d
maxSessionTimeout=%d
initLimit=100
syncLimit=30
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
forceSync=no
4lw.commands.whitelist=ruok,srvr,mntr,stat
admin.enableServer=false
maxClientCnxns=0
%s`, ZooKeeperTick.Milliseconds(), 2*ZooKeeperTick.Milliseconds(), ZooKeeperMaxSession.Milliseconds(),
		data, z.Port, ensemble)
	return os.WriteFile(filepath.Join(z.Dir, "zoo.cfg"), []byte(cfg), 0o644)
}

// Start starts the server process on its port and directory, if it is not
// running, without waiting for it to serve (a member of an ensemble serves
// only once a quorum has formed): see StartZooKeeper and Restart.
func (z *ZooKeeper) Start() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.cmd != nil {
		return nil
	}
	java, cp, err := ZooKeeperClassPath()
	if err != nil {
		return err
	}
	main := "org.apache.zookeeper.server.ZooKeeperServerMain"
	if z.ID > 0 {
		main = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
	}
	logf, err := os.OpenFile(filepath.Join(z.Dir, "zookeeper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(java, "-Xmx256m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djava.net.preferIPv4Stack=true", "-Dzookeeper.jmx.log4j.disable=true",
		"-cp", cp, main, filepath.Join(z.Dir, "zoo.cfg"))
	cmd.Stdout, cmd.Stderr = logf, logf
	// The JVM dies with the process that started it, even on a crash.
	cmd.SysProcAttr = serverProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testserver: start zookeeper: %w", err)
	}
	exited := make(chan struct{})
	// Owner: this ZooKeeper. Stops when the process exits.
	go func() { _ = cmd.Wait(); close(exited) }()
	z.cmd, z.exited = cmd, exited
	return nil
}

// awaitServing waits until the server answers "srvr" with its mode
// (standalone, leader or follower), or fails when it exits or does not
// within startTimeout.
func (z *ZooKeeper) awaitServing() error {
	z.mu.Lock()
	exited := z.exited
	z.mu.Unlock()
	if exited == nil {
		return errors.New("testserver: zookeeper is not running")
	}
	var mode string
	ok := eventuallyWithin(zookeeperStartTimeout, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		mode, _ = z.Mode()
		return mode != ""
	})
	select {
	case <-exited:
		return fmt.Errorf("testserver: zookeeper exited at start on port %d: %s", z.Port, z.logTail())
	default:
	}
	if !ok {
		return fmt.Errorf("testserver: zookeeper on %s not serving after %v: %s", z.Addr, zookeeperStartTimeout, z.logTail())
	}
	return nil
}

// Mode returns the server's mode as "srvr" reports it — "standalone",
// "leader" or "follower" — or "" when it does not serve requests.
func (z *ZooKeeper) Mode() (string, error) {
	out, err := FourLetterWord(z.Addr, "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode: "); ok {
			return m, nil
		}
	}
	return "", nil
}

// FourLetterWord sends a ZooKeeper four-letter word ("ruok", "srvr") to addr
// and returns the answer.
func FourLetterWord(addr, word string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(word)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(bufio.NewReader(c))
	if err != nil && len(b) == 0 {
		return "", err
	}
	return string(b), nil
}

func (z *ZooKeeper) logTail() string {
	b, err := os.ReadFile(filepath.Join(z.Dir, "zookeeper.log"))
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// Restart kills the server (like a crash) and starts it again on the same
// port and directory; its data survives. A standalone server is awaited
// until it serves; an ensemble member serves once it has rejoined a quorum
// (see Ensemble.AwaitServing).
func (z *ZooKeeper) Restart() error {
	if err := z.Kill(); err != nil {
		return err
	}
	if err := z.Start(); err != nil {
		return err
	}
	if z.ID > 0 {
		return nil
	}
	return z.awaitServing()
}

// Ensemble is a ZooKeeper ensemble of three servers on loopback, for
// failover tests.
type Ensemble struct {
	// Servers are the members, ids 1, 2 and 3.
	Servers []*ZooKeeper
	dir     string
	tempDir bool
}

// StartZooKeeperEnsemble starts three ZooKeeper servers on free loopback
// ports, each in its own directory under dir (a new temporary directory,
// removed by Close, when dir is empty), and waits until all three serve.
func StartZooKeeperEnsemble(dir string) (*Ensemble, error) {
	return StartZooKeeperEnsembleVia(dir, nil)
}

// StartZooKeeperEnsembleVia is StartZooKeeperEnsemble with each member's
// links to the others' quorum and election ports routed through peer
// (nil: direct): member from's configuration names member to's port addr
// ("127.0.0.1:port") as peer(from, to, addr), which must be a loopback
// address too (such as a fault proxy's), so that a test can cut one member off from the others while
// its clients still reach it.
func StartZooKeeperEnsembleVia(dir string, peer func(from, to int, addr string) (string, error)) (*Ensemble, error) {
	if _, _, err := ZooKeeperClassPath(); err != nil {
		return nil, err
	}
	e := &Ensemble{dir: dir}
	if e.dir == "" {
		d, err := os.MkdirTemp("", "leash-zookeeper-ensemble-")
		if err != nil {
			return nil, err
		}
		e.dir, e.tempDir = d, true
	}
	ports := make([]int, 9) // client, quorum and election port of each
	seen := map[int]bool{}
	for i := range ports {
		for {
			p, err := FreePort()
			if err != nil {
				e.Close()
				return nil, err
			}
			if !seen[p] {
				seen[p], ports[i] = true, p
				break
			}
		}
	}
	for id := 1; id <= 3; id++ {
		var lines strings.Builder
		for other := 1; other <= 3; other++ {
			quorum := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*(other-1)+1]))
			election := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*(other-1)+2]))
			if peer != nil && other != id {
				var err error
				if quorum, err = peer(id, other, quorum); err == nil {
					election, err = peer(id, other, election)
				}
				if err != nil {
					e.Close()
					return nil, err
				}
			}
			_, qp, err := net.SplitHostPort(quorum)
			if err == nil {
				_, ep, err2 := net.SplitHostPort(election)
				fmt.Fprintf(&lines, "server.%d=127.0.0.1:%s:%s\n", other, qp, ep)
				err = err2
			}
			if err != nil {
				e.Close()
				return nil, err
			}
		}
		z := &ZooKeeper{ID: id, Port: ports[3*(id-1)], Dir: filepath.Join(e.dir, "zk"+strconv.Itoa(id)), process: process{name: "zookeeper"}}
		z.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(z.Port))
		e.Servers = append(e.Servers, z)
		if err := z.writeConfig(lines.String()); err != nil {
			e.Close()
			return nil, err
		}
		if err := z.Start(); err != nil {
			e.Close()
			return nil, err
		}
	}
	if err := e.AwaitServing(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Addrs returns the client addresses of the members.
func (e *Ensemble) Addrs() []string {
	addrs := make([]string, len(e.Servers))
	for i, z := range e.Servers {
		addrs[i] = z.Addr
	}
	return addrs
}

// AwaitServing waits until every running member serves requests.
func (e *Ensemble) AwaitServing() error {
	for _, z := range e.Servers {
		if z.PID() == 0 {
			continue
		}
		if err := z.awaitServing(); err != nil {
			return err
		}
	}
	return nil
}

// Restart kills every member (like a crash of the whole ensemble), starts
// them all again on their ports and directories, and waits until each
// serves: the ensemble keeps its data and sessions (each session gets a
// full timeout from the restart).
func (e *Ensemble) Restart() error {
	for _, z := range e.Servers {
		if err := z.Kill(); err != nil {
			return err
		}
	}
	for _, z := range e.Servers {
		if err := z.Start(); err != nil {
			return err
		}
	}
	return e.AwaitServing()
}

// Leader returns the member that reports itself leader, or nil.
func (e *Ensemble) Leader() *ZooKeeper {
	for _, z := range e.Servers {
		if m, _ := z.Mode(); m == "leader" {
			return z
		}
	}
	return nil
}

// Close kills every member and removes the directory if
// StartZooKeeperEnsemble made it.
func (e *Ensemble) Close() {
	for _, z := range e.Servers {
		z.Close()
	}
	if e.tempDir {
		_ = os.RemoveAll(e.dir)
	}
}
