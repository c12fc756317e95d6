package testserver

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// PostgresOptions configures a PostgreSQL server.
type PostgresOptions struct {
	// Durable keeps PostgreSQL's durable defaults (fsync, synchronous_commit,
	// full_page_writes on), for tests that crash the server and count on what
	// it acknowledged. Default: all three off, for speed.
	Durable bool
	// Args are extra server settings, each "name=value" (passed as -c).
	Args []string
}

// Postgres is a PostgreSQL server (its postmaster and backends) on a loopback
// port, with its own data directory. The superuser is "postgres", with trust
// authentication on 127.0.0.1 and on the server's own unix socket.
type Postgres struct {
	// Addr is "127.0.0.1:<port>".
	Addr string
	// Port is the TCP port, kept across restarts.
	Port int
	// Dir holds the data directory (Dir/data), the unix socket and the server
	// log (Dir/postgres.log). It is removed by Close.
	Dir string

	opts PostgresOptions
	bin  string
	cred *syscall.Credential // the postgres user's, when running as root

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// PostgresBinDir returns the directory of the newest PostgreSQL server
// binaries (initdb, postgres): the newest /usr/lib/postgresql/*/bin (Debian
// and Ubuntu keep them there, off PATH), else pg_config --bindir, else the
// directory of postgres on PATH. It returns ErrNotInstalled when none has
// them.
func PostgresBinDir() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: PostgreSQL server binaries (initdb, postgres) not found in /usr/lib/postgresql/*/bin, pg_config --bindir or PATH (apt-get install postgresql)", ErrNotInstalled)
}

// pgMajor is the major version in a /usr/lib/postgresql/<major>/bin path.
func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// StartPostgres creates a database cluster in a new directory and starts
// PostgreSQL on a free loopback port, and returns once it accepts a
// connection (probed over the wire protocol). As root, the server runs as the
// "postgres" user (PostgreSQL refuses root), in a directory that user owns.
func StartPostgres(opts PostgresOptions) (*Postgres, error) {
	bin, err := PostgresBinDir()
	if err != nil {
		return nil, err
	}
	p := &Postgres{opts: opts, bin: bin}
	if os.Geteuid() == 0 {
		if p.cred, err = postgresCredential(); err != nil {
			return nil, err
		}
	}
	if p.Dir, err = os.MkdirTemp("", "leash-pg-"); err != nil {
		return nil, err
	}
	if p.cred != nil {
		if err := os.Chown(p.Dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			p.Close()
			return nil, err
		}
	}
	initdb := p.command(filepath.Join(bin, "initdb"), "-D", p.dataDir(), "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		p.Close()
		return nil, fmt.Errorf("testserver: initdb: %v: %s", err, out)
	}
	var lastErr error
	for range 5 { // another process may take the free port before postgres binds it
		if p.Port, err = FreePort(); err != nil {
			p.Close()
			return nil, err
		}
		p.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port))
		if lastErr = p.Start(); lastErr == nil {
			return p, nil
		}
	}
	p.Close()
	return nil, lastErr
}

// postgresCredential returns the credential of the "postgres" system user.
func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("testserver: running as root, and PostgreSQL refuses to: no postgres user to run it as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("testserver: postgres user has uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (p *Postgres) dataDir() string { return filepath.Join(p.Dir, "data") }

// command returns a command that runs as the postgres user when we are root,
// in its own process group, and dies with this process.
func (p *Postgres) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	attr := serverProcAttr()
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Credential = p.cred
	// A group of its own: a signal to the test's group (a terminal's ^C)
	// is for the test, which kills its servers itself.
	attr.Setpgid = true
	cmd.SysProcAttr = attr
	cmd.Dir = p.Dir
	return cmd
}

// URL returns a postgres:// URL for the server's "postgres" database as the
// superuser.
func (p *Postgres) URL() string {
	return "postgres://postgres@" + p.Addr + "/postgres?sslmode=disable"
}

// Start starts the server on its port and directory, if it is not running,
// and waits until it accepts connections.
func (p *Postgres) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(filepath.Join(p.Dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"-D", p.dataDir(), "-p", strconv.Itoa(p.Port), "-k", p.Dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "shared_buffers=32MB",
		"-c", "logging_collector=off", "-c", "log_min_messages=warning"}
	if !p.opts.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for _, a := range p.opts.Args {
		args = append(args, "-c", a)
	}
	cmd := p.command(filepath.Join(p.bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testserver: start postgres: %w", err)
	}
	exited := make(chan struct{})
	// Owner: this Postgres. Stops when the postmaster exits.
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(startTimeout)
	for {
		if err := pgReady(p.Addr); err == nil {
			break
		}
		select {
		case <-exited:
			return fmt.Errorf("testserver: postgres exited at start on port %d: %s", p.Port, p.logTail())
		default:
		}
		if time.Now().After(deadline) {
			pids, _ := signalFamily(cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			eventually(func() bool { return !alive(pids) })
			return fmt.Errorf("testserver: postgres not accepting connections on %s after %v: %s", p.Addr, startTimeout, p.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.cmd, p.exited = cmd, exited
	return nil
}

// pgReady connects to addr and completes a PostgreSQL startup as the
// postgres user (trust authentication): the server is ready when it answers
// ReadyForQuery.
func pgReady(addr string) error {
	c, _, err := pgConnect(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_, _ = c.Write([]byte{'X', 0, 0, 0, 4}) // Terminate
	return nil
}

// pgConnect opens a connection to addr and completes a startup as the
// postgres user (trust authentication), up to ReadyForQuery. The returned
// reader holds what the server sends next.
func pgConnect(addr string) (net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, nil, err
	}
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var body []byte
	body = binary.BigEndian.AppendUint32(body, 3<<16) // protocol 3.0
	for _, kv := range []string{"user", "postgres", "database", "postgres"} {
		body = append(append(body, kv...), 0)
	}
	body = append(body, 0)
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(body)+4))
	if _, err := c.Write(append(msg, body...)); err != nil {
		c.Close()
		return nil, nil, err
	}
	r := bufio.NewReader(c)
	if err := pgAwaitReady(r); err != nil {
		c.Close()
		return nil, nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, r, nil
}

// pgAwaitReady reads messages up to ReadyForQuery, failing on an
// ErrorResponse or a request for a password.
func pgAwaitReady(r *bufio.Reader) error {
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr[1:])) - 4
		if n < 0 || n > 1<<20 {
			return fmt.Errorf("testserver: postgres sent a message of %d bytes", n)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return err
		}
		switch hdr[0] {
		case 'Z':
			return nil
		case 'E':
			return fmt.Errorf("testserver: postgres: %s", strings.ReplaceAll(string(payload), "\x00", " "))
		case 'R':
			if n < 4 || binary.BigEndian.Uint32(payload) != 0 {
				return errors.New("testserver: postgres asks for a password: trust authentication is off")
			}
		}
	}
}

func (p *Postgres) logTail() string { return logTail(filepath.Join(p.Dir, "postgres.log")) }

// PID returns the postmaster's process id, or 0 when it is not running.
func (p *Postgres) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// family returns the postmaster's pid and those of its live children (the
// backends and auxiliary processes), which run in process groups of their
// own, from ps.
func family(postmaster int) ([]int, error) {
	out, err := exec.Command("ps", "-A", "-o", "pid=", "-o", "ppid=", "-o", "stat=").Output()
	if err != nil {
		return nil, fmt.Errorf("testserver: ps: %w", err)
	}
	pids := []int{postmaster}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(f[2], "Z") {
			continue
		}
		pid, err1 := strconv.Atoi(f[0])
		ppid, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil && ppid == postmaster {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// alive reports whether any of pids is a live process (not a zombie).
func alive(pids []int) bool {
	out, err := exec.Command("ps", "-A", "-o", "pid=", "-o", "stat=").Output()
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[1], "Z") {
			continue
		}
		if pid, err := strconv.Atoi(f[0]); err == nil && slices.Contains(pids, pid) {
			return true
		}
	}
	return false
}

// signalAll sends sig to the running server's postmaster and every child
// it has (see signalFamily), and returns their pids.
func (p *Postgres) signalAll(sig syscall.Signal) ([]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil, errors.New("testserver: postgres is not running")
	}
	return signalFamily(p.cmd.Process.Pid, sig)
}

// signalFamily stops the postmaster pm (so that it starts no new process),
// sends sig to it and every child it has, and returns their pids. Each
// PostgreSQL child makes itself a process group leader, so a signal to the
// postmaster's group would not reach it.
func signalFamily(pm int, sig syscall.Signal) ([]int, error) {
	if err := syscall.Kill(pm, syscall.SIGSTOP); err != nil {
		return nil, err
	}
	pids, err := family(pm)
	if err != nil {
		_ = syscall.Kill(pm, syscall.SIGCONT)
		return nil, err
	}
	for _, pid := range pids[1:] {
		_ = syscall.Kill(pid, sig) // a child may have just exited
	}
	return pids, syscall.Kill(pm, sig)
}

// Pause freezes the server, its postmaster and every backend, with SIGSTOP.
// Clients can still connect (the kernel accepts), but nothing is answered
// until Resume.
func (p *Postgres) Pause() error {
	_, err := p.signalAll(syscall.SIGSTOP)
	return err
}

// Resume continues a paused server with SIGCONT.
func (p *Postgres) Resume() error {
	_, err := p.signalAll(syscall.SIGCONT)
	return err
}

// Kill ends the server, its postmaster and every backend, with SIGKILL, as
// a crash would, and waits until none is left, so that a restart finds no
// one attached to the old shared memory.
func (p *Postgres) Kill() error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	pids, err := p.signalAll(syscall.SIGKILL)
	<-exited
	p.mu.Lock()
	p.cmd, p.exited = nil, nil
	p.mu.Unlock()
	if !eventually(func() bool { return !alive(pids) }) {
		return fmt.Errorf("testserver: postgres processes %v still alive %v after SIGKILL", pids, startTimeout)
	}
	if err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

// Restart kills the server (like a crash) and starts it again on the same
// port and data directory: PostgreSQL recovers from its WAL. Without
// PostgresOptions.Durable, what it acknowledged last may be lost only if the
// machine crashes, not the server: the OS still has the unsynced writes.
func (p *Postgres) Restart() error {
	if err := p.Kill(); err != nil {
		return err
	}
	return p.Start()
}

// Close kills the server and removes its directory. It is safe to call more
// than once.
func (p *Postgres) Close() {
	_ = p.Kill()
	if p.Dir != "" {
		_ = os.RemoveAll(p.Dir)
	}
}

// NewPostgres starts a PostgreSQL server for the test and kills it at
// cleanup. When PostgreSQL is not installed it skips the test, or fails it
// under LEASH_REQUIRE_SERVERS=1.
func NewPostgres(t TB, opts PostgresOptions) *Postgres {
	t.Helper()
	p, err := StartPostgres(opts)
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(p.Close)
	return p
}

// SharedPostgres is a PostgreSQL server that a test package starts on first
// use and stops in TestMain, for the tests that inject no faults into the
// server itself. The zero value is ready to use.
type SharedPostgres struct{ shared[*Postgres] }

// Postgres returns the server, starting it on the first call. When
// PostgreSQL is not installed it skips the test, or fails it under
// LEASH_REQUIRE_SERVERS=1, like NewPostgres.
func (s *SharedPostgres) Postgres(t TB) *Postgres {
	t.Helper()
	return s.get(t, func() (*Postgres, error) { return StartPostgres(PostgresOptions{}) })
}
