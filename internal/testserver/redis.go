// Package testserver starts real servers (redis-server, …) on free loopback
// ports, each in its own directory, for leash's tests and demo. A server can
// be killed, paused (SIGSTOP), resumed and restarted on the same port and
// directory. Readiness is probed over the wire (PING), so the
// package needs no driver.
package testserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// RedisOptions configures a redis-server.
type RedisOptions struct {
	// Dir is the data directory. Empty means a new temporary directory,
	// removed by Close.
	Dir string
	// AOF turns on the append-only file with fsync on every write, so that
	// data survives a SIGKILL. Default: no persistence at all.
	AOF bool
	// Args are extra redis-server arguments, such as "--maxmemory", "10mb".
	Args []string
	// ReplicaOf makes the server a replica of the redis-server at this
	// address ("127.0.0.1:<port>"). A replica copies its primary's data,
	// restart marker included, so it is not marked fresh.
	ReplicaOf string
}

// Redis is a redis-server process.
type Redis struct {
	// Addr is "127.0.0.1:<port>".
	Addr string
	// Port is the TCP port, kept across restarts.
	Port int
	// Dir is the data directory; the server log is Dir/redis.log.
	Dir string

	opts RedisOptions

	process
}

// ErrNotInstalled reports that a server binary is not on PATH.
var ErrNotInstalled = errors.New("testserver: server binary not installed")

// RedisBinary returns the path of redis-server or ErrNotInstalled.
func RedisBinary() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("%w: redis-server not found on PATH (apt-get install redis-server)", ErrNotInstalled)
	}
	return p, nil
}

// StartRedis starts redis-server on a free loopback port and waits until it
// answers PING. It marks the new server as provisioned fresh (MarkFresh: no
// lease predates it), as a deployment script may, so that redisstore's
// restart grace does not hold the first grants back; Restart does not, since
// a restart that loses data is what the grace is for. A
// cluster-mode server serves no slot yet: its test calls redisstore's
// MarkFresh once the cluster is up.
func StartRedis(opts RedisOptions) (*Redis, error) {
	if _, err := RedisBinary(); err != nil {
		return nil, err
	}
	r := &Redis{opts: opts, Dir: opts.Dir, process: process{name: "redis-server"}}
	if r.Dir == "" {
		d, err := os.MkdirTemp("", "leash-redis-")
		if err != nil {
			return nil, err
		}
		r.Dir, r.removeDir = d, d
	}
	var lastErr error
	for range 5 { // another process may take the free port before redis binds it
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		r.Port = port
		r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = r.Start(); lastErr == nil {
			if r.cluster() || opts.ReplicaOf != "" {
				// A cluster serves no slots yet (the test calls redisstore's
				// MarkFresh); a replica is read-only and copies its primary.
				return r, nil
			}
			if lastErr = r.MarkFresh(); lastErr == nil {
				return r, nil
			}
			_ = r.Kill()
		}
	}
	r.Close()
	return nil, lastErr
}

// MarkFresh declares the running server new, as redisstore's MarkFresh does
// (SET leash:epoch "0:<run id>": no lease predates this server process), so
// that redisstore's restart grace does not hold its first grants back.
func (r *Redis) MarkFresh() error {
	field := func(section, name string) (string, error) {
		info, err := query(r.Addr, "INFO "+section)
		if err != nil {
			return "", err
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
				return v, nil
			}
		}
		return "", fmt.Errorf("testserver: INFO %s on %s shows no %s", section, r.Addr, name)
	}
	id, err := field("server", "run_id")
	if err != nil {
		return err
	}
	// redisstore adds the replication id for a process promoted from a
	// replica (see its identity); a server a test starts was never one.
	return command(r.Addr, "SET leash:epoch 0:"+id)
}

// cluster reports whether the server runs in cluster mode.
func (r *Redis) cluster() bool {
	for i, a := range r.opts.Args {
		if a == "--cluster-enabled" && i+1 < len(r.opts.Args) && r.opts.Args[i+1] == "yes" {
			return true
		}
	}
	return false
}

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts the server on its port and directory, if it is not running.
func (r *Redis) Start() error {
	if r.running() {
		return nil
	}
	bin, err := RedisBinary()
	if err != nil {
		return err
	}
	args := []string{
		"--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1",
		"--dir", r.Dir, "--logfile", filepath.Join(r.Dir, "redis.log"),
		"--daemonize", "no", "--save", "", "--protected-mode", "no",
		"--enable-debug-command", "local",
		// A replica's first sync starts at once, not after Redis's default
		// 5 s wait for more replicas to join it.
		"--repl-diskless-sync-delay", "0",
	}
	if r.opts.AOF {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if r.opts.ReplicaOf != "" {
		host, port, err := net.SplitHostPort(r.opts.ReplicaOf)
		if err != nil {
			return fmt.Errorf("testserver: ReplicaOf %q: %w", r.opts.ReplicaOf, err)
		}
		args = append(args, "--replicaof", host, port)
	}
	args = append(args, r.opts.Args...)
	return r.run("redis-server on port "+strconv.Itoa(r.Port), exec.Command(bin, args...),
		func() error { return ping(r.Addr) }, 15*time.Second, r.logTail)
}

// command sends one inline command and expects a +OK or +PONG reply.
func command(addr, cmd string) error {
	reply, err := query(addr, cmd)
	if err != nil {
		return err
	}
	if reply != "OK" && reply != "PONG" {
		return fmt.Errorf("testserver: %s answered %q", cmd, reply)
	}
	return nil
}

// ping sends PING and expects +PONG.
func ping(addr string) error { return command(addr, "PING") }

func (r *Redis) logTail() string { return logTail(filepath.Join(r.Dir, "redis.log")) }

// Restart kills the server (like a crash) and starts it again on the same
// port and directory. Without AOF, it comes back empty.
func (r *Redis) Restart() error {
	if err := r.Kill(); err != nil {
		return err
	}
	return r.Start()
}

// CPU returns the CPU time the server has used since it started, user and
// system (INFO cpu).
func (r *Redis) CPU() (time.Duration, error) {
	info, err := query(r.Addr, "INFO cpu")
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("testserver: INFO cpu %s: %w", k, err)
			}
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second)), nil
}

// startTimeout bounds how long a helper waits for a server to be ready.
const startTimeout = 15 * time.Second

// eventually polls cond every 10ms until it holds, for up to startTimeout,
// and reports whether it did.
func eventually(cond func() bool) bool { return eventuallyWithin(startTimeout, cond) }

// eventuallyWithin polls cond every 10ms until it holds, for up to d, and
// reports whether it did.
func eventuallyWithin(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
