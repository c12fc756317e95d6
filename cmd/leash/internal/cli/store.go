package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// storeEnv names the environment variable that gives the store URL.
const storeEnv = "LEASH_STORE"

const (
	// dialTimeout bounds each connection attempt unless the URL sets dial_timeout.
	dialTimeout = 3 * time.Second
	// dialerRetries is how many times go-redis dials before a command fails,
	// unless the URL sets dialer_retries: a refused connection is reported
	// in a fraction of a second, not after go-redis's five tries per retry.
	dialerRetries = 1
	// pingTimeout bounds the first round trip, which proves the store answers.
	pingTimeout = 5 * time.Second
)

// storeHelp is the part of every store command's help that explains the
// connection flags and URLs.
const storeHelp = `
The store is given by --store URL or the LEASH_STORE environment variable:

  redis://[user[:password]@]host[:port][/db]          one server
  rediss://…                                          the same over TLS
  redis+sentinel://[user[:password]@]host[:port][,host[:port]…]/master[/db]
                                                      a Sentinel deployment
  redis+cluster://[user[:password]@]host[:port][,host[:port]…]
                                                      a Redis Cluster

The user and password are those of a Redis ACL user (or just a password for
requirepass). rediss+sentinel:// and rediss+cluster:// use TLS throughout.
Sentinels that need a password of their own take it as the query parameters
sentinel_username and sentinel_password. go-redis's URL options (such as
?dial_timeout=1s) are accepted too. Passwords are never printed.

  --store URL        the store; default $LEASH_STORE
  --ca-file FILE     PEM file of the CAs that sign the server's TLS certificate
                     (default: the system's)
  --cert-file FILE   PEM client certificate, for servers that verify clients
  --key-file FILE    its PEM private key
  --key-prefix P     the prefix of every key leash writes, as the services
                     using the locks set it (redisstore.Options.KeyPrefix):
                     the lock NAME is the key P+NAME; default none`

// aclHelp says what a Redis ACL user needs for leash.
const aclHelp = `
A Redis ACL user for leash needs the lock and companion keys, the release
channels, the commands its scripts run, and INFO, by which it tells a
restarted server (the restart grace, below) and one that may evict keys.
For example:

  ACL SETUSER leash on >PASSWORD ~* &redisson_lock__channel:* &leash_*__channel:* \
      +@read +@write +@scripting +@pubsub +@connection +@keyspace +time -@dangerous \
      +info +cluster|slots +cluster|shards

Without a permission, leash exits 77 and prints the NOPERM error from Redis.`

// storeFlags are the connection flags of every command that uses a store.
type storeFlags struct {
	url, caFile, certFile, keyFile string
	// keyPrefix is redisstore.Options.KeyPrefix.
	keyPrefix string
	// replicas is run's --replicas: the replication guard
	// (redisstore.Options.Replicas); the other commands grant nothing.
	replicas int
}

func (sf *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&sf.url, "store", "", "store `URL`; default $"+storeEnv)
	fs.StringVar(&sf.caFile, "ca-file", "", "PEM `file` of the CAs of the store's TLS certificate")
	fs.StringVar(&sf.certFile, "cert-file", "", "PEM `file` of a TLS client certificate")
	fs.StringVar(&sf.keyFile, "key-file", "", "PEM `file` of the client certificate's key")
	fs.StringVar(&sf.keyPrefix, "key-prefix", "", "`prefix` of every key leash writes (redisstore.Options.KeyPrefix)")
}

// storeKind says how a Redis deployment is reached.
type storeKind int

const (
	kindSingle storeKind = iota
	kindSentinel
	kindCluster
)

// storeConfig is a parsed store URL: all that is needed to connect, made
// without any network call.
type storeConfig struct {
	kind     storeKind
	single   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
	// desc is the URL for messages, without passwords.
	desc string
}

// parseStore parses and checks the store flags, falling back to $LEASH_STORE
// for the URL. Every error it returns is a usage error (exitUsage).
func parseStore(sf storeFlags) (*storeConfig, error) {
	raw := sf.url
	if raw == "" {
		raw = os.Getenv(storeEnv)
	}
	cfg, err := parseStoreURL(raw)
	if err != nil {
		return nil, withStatus(exitUsage, err)
	}
	if err := cfg.setTLS(sf); err != nil {
		return nil, withStatus(exitUsage, err)
	}
	return cfg, nil
}

// parseStoreURL parses a store URL; see storeHelp.
func parseStoreURL(raw string) (*storeConfig, error) {
	if raw == "" {
		return nil, fmt.Errorf("no store given: pass --store URL or set %s, such as redis://127.0.0.1:6379/0", storeEnv)
	}
	desc := redact(raw)
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fmt.Errorf("store URL %q has no scheme: write redis://host:port (or rediss://, redis+sentinel://, redis+cluster://)", desc)
	}
	base, variant, _ := strings.Cut(scheme, "+")
	if base != "redis" && base != "rediss" || variant != "" && variant != "sentinel" && variant != "cluster" {
		return nil, fmt.Errorf("store URL %q: unsupported scheme %q: use redis://, rediss://, redis+sentinel://, rediss+sentinel://, redis+cluster:// or rediss+cluster://", desc, scheme)
	}
	// Split the host list off the authority: url.Parse takes one host only.
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	authority, tail := rest[:end], rest[end:]
	userinfo, hostlist := "", authority
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo, hostlist = authority[:at+1], authority[at+1:]
	}
	defPort := "6379"
	if variant == "sentinel" {
		defPort = "26379"
	}
	var hosts []string
	for _, h := range strings.Split(hostlist, ",") {
		hp, err := hostPort(h, defPort)
		if err != nil {
			return nil, fmt.Errorf("store URL %q: %v", desc, err)
		}
		hosts = append(hosts, hp)
	}
	u, err := url.Parse(base + "://" + userinfo + hosts[0] + tail)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password and all
		}
		return nil, fmt.Errorf("store URL %q: %v", desc, err)
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("store URL %q: unexpected #fragment", desc)
	}
	q := u.Query()
	cfg := &storeConfig{desc: desc}
	switch variant {
	case "":
		if len(hosts) > 1 {
			return nil, fmt.Errorf("store URL %q names %d servers: use redis+cluster:// for a Cluster or redis+sentinel://…/master for Sentinel", desc, len(hosts))
		}
		cfg.kind = kindSingle
		cfg.single, err = redis.ParseURL(u.String())
		if err == nil {
			dialDefaults(&cfg.single.DialTimeout, &cfg.single.DialerRetries, &cfg.single.ContextTimeoutEnabled)
		}
	case "sentinel":
		master, db, _ := strings.Cut(strings.Trim(u.Path, "/"), "/")
		if master == "" {
			return nil, fmt.Errorf("store URL %q: a Sentinel URL needs the master name as its path, such as redis+sentinel://127.0.0.1:26379/mymaster", desc)
		}
		user, pass := q.Get("sentinel_username"), q.Get("sentinel_password")
		q.Del("sentinel_username")
		q.Del("sentinel_password")
		q.Set("master_name", master)
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		fu := *u
		fu.User, fu.Path, fu.RawQuery = nil, "/"+db, q.Encode()
		cfg.kind = kindSentinel
		cfg.failover, err = redis.ParseFailoverURL(fu.String())
		if err == nil {
			cfg.failover.SentinelUsername, cfg.failover.SentinelPassword = user, pass
			cfg.failover.Username, cfg.failover.Password = userPassword(u)
			dialDefaults(&cfg.failover.DialTimeout, &cfg.failover.DialerRetries, &cfg.failover.ContextTimeoutEnabled)
		}
	case "cluster":
		if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
			return nil, fmt.Errorf("store URL %q: a Cluster has only database 0, not %q", desc, p)
		}
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		cu := *u
		cu.Path, cu.RawQuery = "", q.Encode()
		cfg.kind = kindCluster
		cfg.cluster, err = redis.ParseClusterURL(cu.String())
		if err == nil {
			dialDefaults(&cfg.cluster.DialTimeout, &cfg.cluster.DialerRetries, &cfg.cluster.ContextTimeoutEnabled)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("store URL %q: %s", desc, strings.TrimPrefix(err.Error(), "redis: "))
	}
	return cfg, nil
}

// dialDefaults applies leash's dial defaults to the fields of a go-redis
// options struct (single, failover and cluster ones share them but no type):
// dialTimeout unless the URL set dial_timeout, at least dialerRetries dials,
// and contexts bounding each command.
func dialDefaults(timeout *time.Duration, retries *int, contextTimeout *bool) {
	if *timeout == 0 {
		*timeout = dialTimeout
	}
	*retries = max(*retries, dialerRetries)
	*contextTimeout = true
}

// hostPort checks one host of a URL's host list and adds the default port.
func hostPort(h, defPort string) (string, error) {
	if h == "" {
		return "", errors.New("empty host in the host list")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port: "host" or "[::1]".
		host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), defPort
		if strings.ContainsAny(host, "[]") || strings.Contains(host, ":") && !strings.HasPrefix(h, "[") {
			return "", fmt.Errorf("bad host %q: write host:port, or [ipv6]:port", h)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("bad port %q in host %q", port, h)
	}
	if host == "" || strings.ContainsAny(host, " /\\@") {
		return "", fmt.Errorf("bad host %q", h)
	}
	return net.JoinHostPort(host, port), nil
}

func userPassword(u *url.URL) (string, string) {
	if u.User == nil {
		return "", ""
	}
	p, _ := u.User.Password()
	return u.User.Username(), p
}

// tlsConfig returns the TLS configuration of the URL, nil for plain TCP.
func (cfg *storeConfig) tlsConfig() *tls.Config {
	switch cfg.kind {
	case kindSentinel:
		return cfg.failover.TLSConfig
	case kindCluster:
		return cfg.cluster.TLSConfig
	}
	return cfg.single.TLSConfig
}

// setTLS applies the certificate flags to a TLS URL.
func (cfg *storeConfig) setTLS(sf storeFlags) error {
	if sf.caFile == "" && sf.certFile == "" && sf.keyFile == "" {
		return nil
	}
	tc := cfg.tlsConfig()
	if tc == nil {
		return fmt.Errorf("--ca-file, --cert-file and --key-file are for TLS, but %q is plain TCP: use rediss://", cfg.desc)
	}
	if sf.caFile != "" {
		pem, err := os.ReadFile(sf.caFile)
		if err != nil {
			return fmt.Errorf("--ca-file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--ca-file %s: no PEM certificate in it", sf.caFile)
		}
		tc.RootCAs = pool
	}
	if (sf.certFile == "") != (sf.keyFile == "") {
		return errors.New("--cert-file and --key-file go together: give both or neither")
	}
	if sf.certFile != "" {
		cert, err := tls.LoadX509KeyPair(sf.certFile, sf.keyFile)
		if err != nil {
			return fmt.Errorf("--cert-file/--key-file: %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return nil
}

// client returns a go-redis client for the configuration. It makes no
// network call: go-redis connects on first use.
func (cfg *storeConfig) client() redis.UniversalClient {
	switch cfg.kind {
	case kindSentinel:
		return redis.NewFailoverClient(cfg.failover)
	case kindCluster:
		return redis.NewClusterClient(cfg.cluster)
	}
	return redis.NewClient(cfg.single)
}

// passwordParam finds the values of password query parameters.
var passwordParam = regexp.MustCompile(`(?i)(password=)[^&#]*`)

// redact hides the passwords of a store URL, well-formed or not, for messages.
func redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	} else {
		scheme += "://"
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	authority, tail := rest[:end], rest[end:]
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		if user, _, hasPass := strings.Cut(authority[:at], ":"); hasPass {
			authority = user + ":xxxxx" + authority[at:]
		}
	}
	return scheme + authority + passwordParam.ReplaceAllString(tail, "${1}xxxxx")
}

// conn is an open store: the leash Store and what must be closed after it.
type conn struct {
	rdb   redis.UniversalClient
	store *redisstore.Store
	desc  string
}

// newConn makes a connection to the store from the flags and checks the lock
// names against the store's rules, without any network call. Its errors are
// usage errors.
func newConn(sf storeFlags, names ...string) (*conn, error) {
	cfg, err := parseStore(sf)
	if err != nil {
		return nil, err
	}
	if sf.replicas > 0 && cfg.kind == kindCluster {
		return nil, usageErrorf("--replicas is not supported on Redis Cluster (%s): WAIT must follow the grant on its node's connection", cfg.desc)
	}
	rdb := cfg.client()
	c := &conn{rdb: rdb, store: redisstore.New(rdb, &redisstore.Options{Replicas: sf.replicas, KeyPrefix: sf.keyPrefix}), desc: cfg.desc}
	if err := c.store.Validate(); err != nil {
		c.Close()
		return nil, withStatus(exitUsage, err)
	}
	for _, name := range names {
		if err := checkName(c.store, name); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// checkName checks a lock name without any network call.
func checkName(s *redisstore.Store, name string) error {
	err := leash.ValidateName(name)
	if err == nil {
		if err = s.CheckName(name); err != nil {
			err = fmt.Errorf("lock name %q %w", name, err)
		}
	}
	if err != nil {
		return withStatus(exitUsage, errors.New(strings.TrimPrefix(err.Error(), "leash: invalid argument: ")))
	}
	return nil
}

// ping checks that the store answers and accepts the credentials.
func (c *conn) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		return c.fail(err)
	}
	return nil
}

// Close closes the go-redis client.
func (c *conn) Close() { c.rdb.Close() }

// fail turns an error from the store into one line that says what went wrong
// and what to do, with its exit status.
func (c *conn) fail(err error) error {
	var (
		unknownCA x509.UnknownAuthorityError
		badHost   x509.HostnameError
		badCert   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		notTLS    tls.RecordHeaderError
		opErr     *net.OpError
		replyErr  redis.Error
		dnsErr    *net.DNSError
		netErr    net.Error
		msg       = strings.TrimPrefix(err.Error(), "leash: ")
		status    = exitStore
		whatToDo  string
		format    = "cannot reach the store at %s: %s"
		notALock  *leash.NotALockError
	)
	switch {
	case errors.As(err, &notALock):
		// Not a store failure: the store answered, about the name.
		return withStatus(exitNotALock, errors.New(oneLine(strings.TrimPrefix(notALock.Error(), "leash: ")+
			" (use a lock name that no application data uses)")))
	case errors.Is(err, redisstore.ErrNoServerInfo):
		status, format = exitAuth, "the store at %s denied a command to this user: %s"
		whatToDo = "see 'leash help store'"
	case errors.Is(err, redisstore.ErrEvictable), errors.Is(err, redisstore.ErrNotDurable):
		format = "the store at %s is not safe for locks: %s"
	case errors.Is(err, redisstore.ErrNotReplicated):
		format = "the store at %s did not replicate the lock in time: %s"
		whatToDo = "check, with INFO replication on the primary, that enough replicas are connected and keeping up"
	case redis.IsAuthError(err) || redis.HasErrorPrefix(err, "ERR AUTH") || redis.HasErrorPrefix(err, "ERR invalid password"):
		status, format = exitAuth, "the store at %s refused the credentials: %s"
		whatToDo = "check the user and password in the URL"
	case redis.IsPermissionError(err) || strings.Contains(msg, "user executing the script can't run"):
		status, format = exitAuth, "the store at %s denied a command to this user: %s"
		whatToDo = "the ACL user needs the commands and channels in 'leash help store'"
	case errors.As(err, &unknownCA), errors.As(err, &badHost), errors.As(err, &badCert), errors.As(err, &verify):
		status, format = exitAuth, "cannot verify the TLS certificate of the store at %s: %s"
		whatToDo = "pass --ca-file with the CA that signed it, and connect by a name the certificate carries"
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		status, format = exitAuth, "the store at %s refused the TLS handshake: %s"
		whatToDo = "if it verifies clients, pass --cert-file and --key-file"
	case errors.As(err, &notTLS):
		whatToDo = "the server does not speak TLS on this port: use redis://, or the server's tls-port"
	case errors.As(err, &dnsErr):
		whatToDo = "check the host name"
	case errors.Is(err, syscall.ECONNREFUSED):
		whatToDo = "is the server running, on this host and port?"
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		whatToDo = "the server closed the connection; if it serves TLS on this port, use rediss://"
	case errors.As(err, &replyErr):
		format = "the store at %s answered with an error: %s"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		format = "the store at %s did not answer in time: %s"
		if strings.HasPrefix(c.desc, "rediss") {
			whatToDo = "if the server does not serve TLS on this port, use redis://"
		}
	}
	line := fmt.Sprintf(format, c.desc, msg)
	if whatToDo != "" {
		line += " (" + whatToDo + ")"
	}
	return withStatus(status, errors.New(oneLine(line)))
}

// oneLine folds a message onto one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// openStore makes a connection from the flags, checks the names, and checks
// that the store answers.
func openStore(ctx context.Context, sf storeFlags, names ...string) (*conn, error) {
	c, err := newConn(sf, names...)
	if err != nil {
		return nil, err
	}
	if err := c.ping(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// newClient returns a leash Client on the connection.
func (c *conn) newClient(opts *leash.Options) (*leash.Client, error) {
	return leash.New(c.store, opts)
}

func storeURLFromEnv() string { return os.Getenv(storeEnv) }
