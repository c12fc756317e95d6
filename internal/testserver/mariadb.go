package testserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MariaDB is a mariadbd process with its own data directory, serving on a
// loopback port. Its root user has no password on loopback.
type MariaDB struct {
	// Addr is "127.0.0.1:<port>".
	Addr string
	// Port is the TCP port, kept across restarts.
	Port int
	// Dir holds the data directory (Dir/data), the server's temporary files
	// (Dir/tmp), the socket and the error log (Dir/mariadb.err).
	Dir string

	process
}

// MariaDBBinaries returns the paths of mariadbd and mariadb-install-db, or
// ErrNotInstalled. Debian puts mariadbd in /usr/sbin, which a user's PATH
// may lack, so that directory is searched too.
func MariaDBBinaries() (server, install string, err error) {
	find := func(name string) (string, error) {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/bin"} {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
		return "", fmt.Errorf("%w: %s not found on PATH or in /usr/sbin (apt-get install mariadb-server)", ErrNotInstalled, name)
	}
	if server, err = find("mariadbd"); err != nil {
		return "", "", err
	}
	if install, err = find("mariadb-install-db"); err != nil {
		return "", "", err
	}
	return server, install, nil
}

// StartMariaDB creates a data directory in dir (a new temporary directory,
// removed by Close, when dir is empty), starts mariadbd on a free loopback
// port and waits until it greets clients.
func StartMariaDB(dir string) (*MariaDB, error) {
	_, install, err := MariaDBBinaries()
	if err != nil {
		return nil, err
	}
	m := &MariaDB{Dir: dir}
	if m.Dir == "" {
		d, err := os.MkdirTemp("", "leash-mariadb-")
		if err != nil {
			return nil, err
		}
		m.Dir, m.removeDir = d, d
	}
	out, err := exec.Command(install, "--no-defaults", "--datadir="+m.dataDir(), "--user="+serverUser(),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve").CombinedOutput()
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("testserver: mariadb-install-db: %w: %s", err, strings.TrimSpace(string(out)))
	}
	var lastErr error
	for range 5 { // another process may take the free port before mariadbd binds it
		port, err := FreePort()
		if err != nil {
			m.Close()
			return nil, err
		}
		m.Port = port
		m.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = m.Start(); lastErr == nil {
			return m, nil
		}
	}
	m.Close()
	return nil, lastErr
}

// serverUser is the user mariadbd runs as: the current one (root may run it
// when named explicitly, and then owns the files it made).
func serverUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}

func (m *MariaDB) dataDir() string { return filepath.Join(m.Dir, "data") }

// DSN returns a go-sql-driver/mysql data source name for root on database
// db ("" for none), with params appended ("parseTime=true&loc=UTC", say).
func (m *MariaDB) DSN(db, params string) string {
	dsn := "root@tcp(" + m.Addr + ")/" + db
	if params != "" {
		dsn += "?" + params
	}
	return dsn
}

// Start starts the server on its port and directory, if it is not running.
func (m *MariaDB) Start() error {
	if m.running() {
		return nil
	}
	server, _, err := MariaDBBinaries()
	if err != nil {
		return err
	}
	tmp := filepath.Join(m.Dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	cmd := exec.Command(server, "--no-defaults",
		"--datadir="+m.dataDir(), "--tmpdir="+tmp, "--port="+strconv.Itoa(m.Port), "--bind-address=127.0.0.1",
		"--socket="+filepath.Join(m.Dir, "sock"), "--pid-file="+filepath.Join(m.Dir, "mariadb.pid"),
		"--log-error="+filepath.Join(m.Dir, "mariadb.err"), "--user="+serverUser(),
		// Quick to start, small, and fast enough for tests; a crash of the
		// machine may lose the last second of commits
		// (innodb-flush-log-at-trx-commit=2), a crash of the server does not.
		"--skip-name-resolve", "--skip-log-bin", "--innodb-buffer-pool-size=32M",
		"--innodb-log-file-size=16M", "--innodb-flush-log-at-trx-commit=2",
		"--max-connections=500", "--skip-performance-schema")
	return m.run("mariadbd on port "+strconv.Itoa(m.Port), cmd, func() error { return greets(m.Addr) }, 30*time.Second, m.logTail)
}

// greets connects to addr and reads the server's first packet: a MySQL
// protocol version 10 handshake means it serves clients (an error packet,
// 0xff, is what a server that is still starting may send).
func greets(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	var hdr [5]byte // 3-byte length, sequence id, first payload byte
	if _, err := io.ReadFull(bufio.NewReader(conn), hdr[:]); err != nil {
		return err
	}
	if hdr[4] != 10 {
		return fmt.Errorf("testserver: %s greeted with packet type %#x, not a handshake", addr, hdr[4])
	}
	return nil
}

func (m *MariaDB) logTail() string { return logTail(filepath.Join(m.Dir, "mariadb.err")) }

// Restart kills the server (like a crash) and starts it again on the same
// port and directory; InnoDB recovers the committed data.
func (m *MariaDB) Restart() error {
	if err := m.Kill(); err != nil {
		return err
	}
	return m.Start()
}

// NewMariaDB starts a mariadbd for the test in a directory of its own and
// kills it at cleanup. When MariaDB is not installed it skips the test, or
// fails it under LEASH_REQUIRE_SERVERS=1.
func NewMariaDB(t TB) *MariaDB {
	t.Helper()
	m, err := StartMariaDB(t.TempDir())
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(m.Close)
	return m
}

// SharedMariaDB is a mariadbd that a test package starts on first use and
// stops in TestMain, for the tests that inject no faults into the server
// itself. The zero value is ready to use.
type SharedMariaDB struct{ shared[*MariaDB] }

// MariaDB returns the server, starting it on the first call. When MariaDB
// is not installed it skips the test, or fails it under
// LEASH_REQUIRE_SERVERS=1, like NewMariaDB.
func (s *SharedMariaDB) MariaDB(t TB) *MariaDB {
	t.Helper()
	return s.get(t, func() (*MariaDB, error) { return StartMariaDB("") })
}
