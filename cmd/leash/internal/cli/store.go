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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	_ "github.com/leash-go/leash/memstore" // registers mem://
	"github.com/leash-go/leash/redisstore" // registers redis:// and its forms
	"github.com/leash-go/leash/zkstore"    // zk:// URLs: the session timeout a lease needs
	"github.com/redis/go-redis/v9"
)

// storeEnv names the environment variable that gives the store URL.
const storeEnv = "LEASH_STORE"

// pingTimeout bounds the first round trip, which proves the store answers.
const pingTimeout = 5 * time.Second

// storeHelp is the part of every store command's help that explains the
// connection flags and URLs.
const storeHelp = `
The store is given by --store URL or the LEASH_STORE environment variable.
Its scheme picks the store:

  redis://[user[:password]@]host[:port][/db]          one Redis server
  rediss://…                                          the same over TLS
  redis+sentinel://[user[:password]@]host[:port][,host[:port]…]/master[/db]
                                                      a Sentinel deployment
  redis+cluster://[user[:password]@]host[:port][,host[:port]…]
                                                      a Redis Cluster
  postgres://[user[:password]@]host[:port][,host…]/db  a PostgreSQL database
                                                      (postgresql:// too)
  mysql://[user[:password]@]host[:port]/dbname        a MySQL 8 or MariaDB
                                                      10.6+ database
  etcd://[user:password@]host[:port][,host[:port]…][?prefix=P]
                                                      an etcd cluster;
                                                      etcds:// for TLS, with
                                                      ca_file, cert_file and
                                                      key_file parameters
  zk://[user:password@]host:port[,host:port…][/root][?session_timeout=40s&tick_time=3s]
                                                      a ZooKeeper ensemble
  mem://                                              an in-memory store in
                                                      leash's own process: it
                                                      locks nothing across
                                                      processes; for trying
                                                      the commands

The user and password are those of a Redis ACL user (or just a password for
requirepass). rediss+sentinel:// and rediss+cluster:// use TLS throughout.
Sentinels that need a password of their own take it as the query parameters
sentinel_username and sentinel_password. An IPv6 address goes in brackets,
in a host list too (redis+sentinel://[::1]:26379,[::2]/mymaster); hosts may
also be added as ?addr=host:port parameters. go-redis's URL options (such as
?dial_timeout=1s) are accepted too. Passwords are never printed.

A postgres:// URL takes pgx's parameters (sslmode=, connect_timeout=,
target_session_attrs=, …) and leash's own: leash_schema=S (default public),
leash_table=T (default leash_locks) and leash_batch_size=N. Its tables must
exist (pgstore's Migrate, or the DDL in pgstore/schema.sql): a missing one
is reported with how to create it, and tables of schema version 1 (made by
a leash before job records) are refused until Migrate brings them to 2.

A mysql:// URL takes go-sql-driver/mysql's DSN parameters (tls=, charset=,
timeout=, session variables such as time_zone=) and leash's own:
leash_table=NAME (default leash_locks) and leash_migrate=true, which creates
the schema if it is missing (or brings a version-1 schema to 2). Any other parameter is sent to the server as a
session variable (SET name=value), so a misspelt one is not a usage error:
it fails at connect with the server's error (Unknown system variable, 69).
A parameter given twice, or whose name cannot be a variable's, is refused.

A malformed URL, an unknown scheme or parameter, or a bad parameter value
is a usage error (64); a store that cannot be reached exits 69.

  --store URL        the store; default $LEASH_STORE
  --ca-file FILE     PEM file of the CAs that sign the server's TLS certificate
                     (default: the system's)
  --cert-file FILE   PEM client certificate, for servers that verify clients
  --key-file FILE    its PEM private key
  --key-prefix P     the prefix of every key leash writes, as the services
                     using the locks set it (redisstore.Options.KeyPrefix):
                     the lock NAME is the key P+NAME; default none

These flags, and run's --replicas, are for Redis stores: each sets a query
parameter of the URL (ca_file, cert_file, key_file, key_prefix, replicas),
which a Redis URL may carry itself instead; a flag and its parameter
together, or a flag with a store that takes none (mem://), is a usage error
(64).

Each command needs some of a store's capabilities: run needs only locks;
ls, show and unlock need administration (inspect, list, force release);
cron and jobs need job records, which every store but etcd:// keeps;
mark-fresh and the restart grace are Redis's. A command the store cannot
serve exits 64 before any network call, naming the store and what it lacks.`

// aclHelp says what a Redis ACL user needs for leash.
const aclHelp = `
A Redis ACL user for leash needs the lock and companion keys, the release
channels, the commands its scripts run, and INFO, by which it tells a
restarted server (the restart grace, below) and one that may evict keys;
on Cluster also CLUSTER MYID, by which the grace tells which node a script
ran on after a slot moved (without it leash works, logs a warning once, and
cannot tell a slot's marker that a migration brought from another node).
For example:

  ACL SETUSER leash on >PASSWORD ~* &redisson_lock__channel:* &leash_*__channel:* \
      +@read +@write +@scripting +@pubsub +@connection +@keyspace +time -@dangerous \
      +info +cluster|slots +cluster|shards +cluster|myid

Without a permission, leash exits 77 and prints the NOPERM error from Redis.`

// storeFlags are the connection flags of every command that uses a store.
type storeFlags struct {
	url string
	// caFile, certFile, keyFile and keyPrefix are Redis URL parameters.
	caFile, certFile, keyFile, keyPrefix string
	// replicas is run's --replicas: the replication guard (the replicas URL
	// parameter, redisstore.Options.Replicas); the other commands grant
	// nothing.
	replicas int
}

func (sf *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&sf.url, "store", "", "store `URL`; default $"+storeEnv)
	fs.StringVar(&sf.caFile, "ca-file", "", "PEM `file` of the CAs of the store's TLS certificate (Redis: ca_file)")
	fs.StringVar(&sf.certFile, "cert-file", "", "PEM `file` of a TLS client certificate (Redis: cert_file)")
	fs.StringVar(&sf.keyFile, "key-file", "", "PEM `file` of the client certificate's key (Redis: key_file)")
	fs.StringVar(&sf.keyPrefix, "key-prefix", "", "`prefix` of every key leash writes (Redis: key_prefix)")
}

// A urlParam is a store flag given on the command line, and the store URL
// query parameter that carries it to the store.
type urlParam struct {
	flag, name, value string
}

// params returns the store flags given, as URL query parameters.
func (sf storeFlags) params() []urlParam {
	var ps []urlParam
	add := func(flag, name, value string) {
		if value != "" {
			ps = append(ps, urlParam{flag, name, value})
		}
	}
	add("--ca-file", "ca_file", sf.caFile)
	add("--cert-file", "cert_file", sf.certFile)
	add("--key-file", "key_file", sf.keyFile)
	add("--key-prefix", "key_prefix", sf.keyPrefix)
	if sf.replicas != 0 {
		add("--replicas", "replicas", strconv.Itoa(sf.replicas))
	}
	return ps
}

// storeURL returns the store URL of the flags (or $LEASH_STORE), with the
// store flags set as its query parameters. Its errors are usage errors.
func storeURL(sf storeFlags) (string, error) {
	raw := sf.url
	if raw == "" {
		raw = os.Getenv(storeEnv)
	}
	if raw == "" {
		return "", usageErrorf("no store given: pass --store URL or set %s, such as redis://127.0.0.1:6379/0 (or mem:// to try leash without a server)", storeEnv)
	}
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		// Not quoted: a password in it may be where no parser finds it.
		return "", usageErrorf("the store URL has no scheme: write it as redis://host:port, or with another scheme of %s", knownSchemes())
	}
	ps := sf.params()
	if len(ps) == 0 {
		return raw, nil
	}
	scheme = strings.ToLower(scheme)
	if !slices.Contains(redisstore.URLSchemes(), scheme) {
		if !slices.Contains(driver.Schemes(), scheme) {
			return raw, nil // driver.Open says the scheme is unknown
		}
		return "", usageErrorf("%s is for Redis stores (the %s URL parameter): %s:// stores take no such flag", ps[0].flag, ps[0].name, scheme)
	}
	// Only the query is parsed: the store's opener says what else is wrong,
	// and url.Parse refuses host lists that the Redis store accepts.
	base, frag, hasFrag := strings.Cut(raw, "#")
	_, query, _ := strings.Cut(base, "?")
	q, _ := url.ParseQuery(query)
	add := url.Values{}
	for _, p := range ps {
		if q.Has(p.name) {
			return "", usageErrorf("%s and the store URL's %s parameter say the same thing: give one", p.flag, p.name)
		}
		add.Set(p.name, p.value)
	}
	// Appended as text: the URL may hold a host list that url.URL.String
	// does not give back as written.
	switch {
	case !strings.Contains(base, "?"):
		base += "?"
	case !strings.HasSuffix(base, "?") && !strings.HasSuffix(base, "&"):
		base += "&"
	}
	base += add.Encode()
	if hasFrag {
		base += "#" + frag
	}
	return base, nil
}

// knownSchemes lists the registered store URL schemes for messages.
func knownSchemes() string {
	s := driver.Schemes()
	for i := range s {
		s[i] += "://"
	}
	return strings.Join(s, ", ")
}

// conn is an open store and the name that messages give it.
type conn struct {
	store driver.StoreCloser
	desc  string
}

// newConn opens the store from the flags and checks the lock names against
// the store's rules. Its errors are usage errors, but for a store whose
// opener connects and fails (exitStore, or exitAuth when the store refused
// the credentials): the Redis and memory stores open without any network
// call.
func newConn(ctx context.Context, sf storeFlags, names ...string) (*conn, error) {
	raw, err := storeURL(sf)
	if err != nil {
		return nil, err
	}
	s, err := driver.Open(ctx, raw)
	if err != nil {
		if errors.Is(err, driver.ErrBadURL) {
			msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "driver: "), "redisstore: ")
			return nil, withStatus(exitUsage, errors.New(oneLine(msg)))
		}
		return nil, (&conn{desc: driver.Redact(raw)}).fail(err)
	}
	c := &conn{store: s, desc: driver.Describe(s)}
	if v, ok := s.(driver.Validator); ok {
		if err := v.Validate(); err != nil {
			c.Close()
			return nil, withStatus(exitUsage, err)
		}
	}
	for _, name := range names {
		if err := checkName(s, name); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// sessionLeaseErr is the usage error, found without any network call, for
// a lease longer than the session timeout a zk:// store URL asks for (its
// session_timeout, or zkstore's default): ZooKeeper ends every lock with its
// session, so zkstore refuses such a lease. Nil for every other store, and
// for a URL newConn refuses. The server may still grant a shorter timeout
// than asked (its maxSessionTimeout); zkstore's refusal then comes with the
// first acquire, and conn.fail makes it a usage error too.
func sessionLeaseErr(sf storeFlags, lease time.Duration) error {
	raw, err := storeURL(sf)
	if err != nil || !strings.HasPrefix(strings.ToLower(raw), "zk://") {
		return nil
	}
	_, opts, _, err := zkstore.ParseURL(raw)
	if err != nil {
		return nil
	}
	t := opts.SessionTimeout
	if t == 0 {
		t = zkstore.DefaultSessionTimeout
	}
	if lease <= t {
		return nil
	}
	return usageErrorf("--lease %v is longer than the ZooKeeper session timeout the store URL asks for (%v), and a lock ends with its session: pass --lease %v or less, or session_timeout=%v or more in the URL (the server grants at most its maxSessionTimeout)",
		lease, t, t, lease)
}

// checkName checks a lock name without any network call.
func checkName(s driver.Store, name string) error {
	err := leash.ValidateName(name)
	if nc, ok := s.(driver.NameChecker); ok && err == nil {
		if err = nc.CheckName(name); err != nil {
			err = fmt.Errorf("lock name %q %w", name, err)
		}
	}
	if err != nil {
		return withStatus(exitUsage, errors.New(strings.TrimPrefix(err.Error(), "leash: invalid argument: ")))
	}
	return nil
}

// lacks returns the usage error for a command that needs a capability the
// store lacks, what being the capability in words.
func (c *conn) lacks(cmd, what string) error {
	return withStatus(exitUsage, fmt.Errorf("%w; leash %s needs it", driver.Unsupported(c.store, what), cmd))
}

// admin returns the store's administration, which ls, show and unlock
// need, or the error that says the store has none.
func (c *conn) admin(cmd string) (driver.Admin, error) {
	if a, ok := c.store.(driver.Admin); ok {
		return a, nil
	}
	return nil, c.lacks(cmd, "administration (inspect, list and force release: driver.Admin)")
}

// redisStore is what a Redis store opened by URL offers beyond the
// contract: the Redis-only commands and notes need it.
type redisStore interface {
	driver.Store
	MarkFresh(ctx context.Context) error
	GraceLeft(ctx context.Context, name string, lease time.Duration) (time.Duration, error)
	Redis() redis.UniversalClient
}

// redisOnly returns the store as a Redis store, or the error that says the
// command cmd is for Redis stores.
func (c *conn) redisOnly(cmd string) (redisStore, error) {
	if r, ok := c.store.(redisStore); ok {
		return r, nil
	}
	return nil, c.lacks(cmd, "Redis server (the restart grace, leash:epoch, fenced writes)")
}

// ping checks that the store answers and accepts the credentials, when the
// store can tell (a Redis store opened by URL can).
func (c *conn) ping(ctx context.Context) error {
	p, ok := c.store.(interface{ Ping(context.Context) error })
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		return c.fail(err)
	}
	return nil
}

// Close closes the store (a Redis store's go-redis client too). A leash
// Client on the store closes it as well; the second Close does nothing.
func (c *conn) Close() { _ = c.store.Close() }

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
	case errors.Is(err, driver.ErrUnsupported):
		// Not a store failure: the store answered that it cannot do what
		// was asked (a ZooKeeper session timeout, granted by the server,
		// shorter than the lease); retrying cannot help.
		return withStatus(exitUsage, errors.New(oneLine(msg)))
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

// openStore opens the store from the flags, checks the names, runs need
// (the command's capability checks, nil for none) and then checks that the
// store answers: need fails before any network call.
func openStore(ctx context.Context, sf storeFlags, need func(*conn) error, names ...string) (*conn, error) {
	c, err := newConn(ctx, sf, names...)
	if err != nil {
		return nil, err
	}
	if need != nil {
		if err := need(c); err != nil {
			c.Close()
			return nil, err
		}
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
