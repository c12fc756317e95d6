package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/redis/go-redis/v9"
)

// init registers the package's URL schemes (see "Opening by URL" in the
// package doc).
func init() {
	for _, s := range urlSchemes {
		driver.Register(s, openURL)
	}
}

// urlSchemes are the URL schemes the package registers.
var urlSchemes = [...]string{"redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster"}

// URLSchemes returns the URL schemes importing the package registers with
// driver.Register: redis, rediss and their +sentinel and +cluster forms.
func URLSchemes() []string { return urlSchemes[:] }

// URLParams returns the query parameters of the Store's own that its URLs
// accept beside go-redis's: ca_file, cert_file, key_file, key_prefix and
// replicas (see "Opening by URL" in the package doc).
func URLParams() []string {
	return []string{paramCAFile, paramCertFile, paramKeyFile, paramKeyPrefix, paramReplicas}
}

// The Store's own URL query parameters.
const (
	paramCAFile    = "ca_file"
	paramCertFile  = "cert_file"
	paramKeyFile   = "key_file"
	paramKeyPrefix = "key_prefix"
	paramReplicas  = "replicas"
)

// Dial defaults of a Store opened by URL.
const (
	// urlDialTimeout bounds each connection attempt unless the URL sets
	// dial_timeout.
	urlDialTimeout = 3 * time.Second
	// urlDialerRetries is how many times go-redis dials before a command
	// fails, unless the URL sets dialer_retries: a refused connection is
	// reported in a fraction of a second, not after go-redis's five tries.
	urlDialerRetries = 1
)

// urlKind says how a Redis deployment is reached.
type urlKind int

const (
	kindSingle urlKind = iota
	kindSentinel
	kindCluster
)

// urlConfig is a parsed store URL: all that is needed to connect, made
// without any network call.
type urlConfig struct {
	kind     urlKind
	single   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
	opts     Options
	// desc is the URL for messages, without passwords.
	desc string
}

// openURL is the driver.Opener of the package's schemes. A URL that cannot
// name a Store is an error that matches driver.ErrBadURL.
func openURL(_ context.Context, rawURL string) (driver.StoreCloser, error) {
	cfg, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	rdb := cfg.client()
	s := &urlStore{Store: New(rdb, &cfg.opts), rdb: rdb, desc: cfg.desc}
	if err := s.Validate(); err != nil {
		s.Close()
		return nil, &urlError{cfg.desc, strings.TrimPrefix(err.Error(), "redisstore: ")}
	}
	return s, nil
}

// urlError is the error for a URL that cannot name a Store: it matches
// driver.ErrBadURL.
type urlError struct {
	// desc is the URL without passwords; msg says what is wrong with it.
	desc, msg string
}

func (e *urlError) Error() string { return fmt.Sprintf("redisstore: URL %q: %s", e.desc, e.msg) }

// Is reports whether target is driver.ErrBadURL.
func (e *urlError) Is(target error) bool { return target == driver.ErrBadURL }

// urlStore is a Store opened by URL: it owns its go-redis client.
type urlStore struct {
	*Store
	rdb       redis.UniversalClient
	desc      string
	closeOnce sync.Once
	closeErr  error
}

// String is the store's URL, without passwords.
func (s *urlStore) String() string { return s.desc }

// Close closes the Store and then its go-redis client. Calling it again
// returns the same result.
func (s *urlStore) Close() error {
	s.closeOnce.Do(func() { s.closeErr = errors.Join(s.Store.Close(), s.rdb.Close()) })
	return s.closeErr
}

// Ping checks that the server answers and accepts the credentials.
func (s *urlStore) Ping(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }

// parseURL parses a store URL (see the package doc) without any network
// call. Its errors are *urlError.
func parseURL(raw string) (*urlConfig, error) {
	desc := driver.Redact(raw)
	// muddled says that the user information may run past the first "/",
	// "?" or "#" ("u:pa/ss@h"), where messages about hosts, paths or
	// parameters would show pieces of the password.
	muddled := false
	bad := func(format string, args ...any) error {
		if muddled {
			return &urlError{desc, `cannot tell the password from the host: percent-encode "/", "?", "#" and "@" in the user name and password`}
		}
		return &urlError{desc, fmt.Sprintf(format, args...)}
	}
	rawScheme, _, _ := strings.Cut(raw, ":")
	scheme := strings.ToLower(rawScheme)
	base, variant, _ := strings.Cut(scheme, "+")
	if base != "redis" && base != "rediss" || variant != "" && variant != "sentinel" && variant != "cluster" {
		return nil, bad("unsupported scheme %q: use redis://, rediss://, redis+sentinel://, rediss+sentinel://, redis+cluster:// or rediss+cluster://", rawScheme)
	}
	rest, ok := strings.CutPrefix(raw[len(rawScheme):], "://")
	if !ok {
		return nil, bad("write %s://host:port", scheme)
	}
	// Split the host list off the authority: url.Parse takes one host, and
	// refuses a list with an IPv6 address in it.
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	authority, tail := rest[:end], rest[end:]
	userinfo, hostlist := "", authority
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo, hostlist = authority[:at+1], authority[at+1:]
	} else if at := strings.IndexByte(tail, '@'); at >= 0 && strings.Contains(authority, ":") {
		eq := strings.IndexByte(tail, '=')
		muddled = eq < 0 || at < eq
	}
	defPort := "6379"
	if variant == "sentinel" {
		defPort = "26379"
	}
	var hosts []string
	for _, h := range strings.Split(hostlist, ",") {
		hp, err := hostPort(h, defPort)
		if err != nil {
			return nil, bad("%v", err)
		}
		hosts = append(hosts, hp)
	}
	u, err := url.Parse(base + "://" + userinfo + hosts[0] + tail)
	if err != nil {
		// A url.Error repeats the URL, password and all, and an escape
		// error shows a piece of it: say what is wrong without the user
		// information when it is wrong there.
		_, err = url.Parse(base + "://" + hosts[0] + tail)
		if err == nil {
			return nil, bad("bad user information: percent-encode the reserved characters of the user name and password")
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, bad("%v", err)
	}
	if u.Fragment != "" || strings.Contains(tail, "#") {
		return nil, bad("unexpected #fragment")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, bad("query: %v", err)
	}
	cfg := &urlConfig{desc: desc}
	tlsFiles, err := cfg.takeParams(q)
	if err != nil {
		return nil, bad("%v", err)
	}
	// The URL go-redis parses: one host, and the query without the Store's
	// own parameters.
	gu := url.URL{Scheme: base, User: u.User, Host: u.Host, Path: u.Path, RawQuery: q.Encode()}
	switch variant {
	case "":
		if len(hosts) > 1 {
			return nil, bad("names %d servers: use redis+cluster:// for a Cluster or redis+sentinel://…/master for Sentinel", len(hosts))
		}
		if db := strings.Trim(u.Path, "/"); db != "" && q.Has("db") {
			return nil, bad("the database is given twice, as the path's /%s and as db=: give it once", db)
		}
		cfg.kind = kindSingle
		cfg.single, err = redis.ParseURL(gu.String())
		if err == nil {
			dialDefaults(&cfg.single.DialTimeout, &cfg.single.DialerRetries, &cfg.single.ContextTimeoutEnabled)
		}
	case "sentinel":
		master, db, _ := strings.Cut(strings.Trim(u.Path, "/"), "/")
		if master == "" {
			return nil, bad("a Sentinel URL needs the master name as its path, such as redis+sentinel://127.0.0.1:26379/mymaster")
		}
		if q.Has("master_name") {
			return nil, bad("master_name=: the master is named by the path (%q); remove the parameter", master)
		}
		if q.Has("username") || q.Has("password") {
			return nil, bad("username= and password= are not read on a Sentinel URL: give the master's in the user information (redis+sentinel://user:password@host/%s), and the Sentinels' as sentinel_username= and sentinel_password=", master)
		}
		if db != "" && q.Has("db") {
			return nil, bad("the database is given twice, as the path's /%s and as db=: give it once", db)
		}
		user, pass := q.Get("sentinel_username"), q.Get("sentinel_password")
		q.Del("sentinel_username")
		q.Del("sentinel_password")
		q.Set("master_name", master)
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		gu.User, gu.Path, gu.RawQuery = nil, "/"+db, q.Encode()
		cfg.kind = kindSentinel
		cfg.failover, err = redis.ParseFailoverURL(gu.String())
		if err == nil {
			cfg.failover.SentinelUsername, cfg.failover.SentinelPassword = user, pass
			cfg.failover.Username, cfg.failover.Password = userPassword(u)
			dialDefaults(&cfg.failover.DialTimeout, &cfg.failover.DialerRetries, &cfg.failover.ContextTimeoutEnabled)
		}
	case "cluster":
		if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
			return nil, bad("a Cluster has only database 0, not %q", p)
		}
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		gu.Path, gu.RawQuery = "", q.Encode()
		cfg.kind = kindCluster
		cfg.cluster, err = redis.ParseClusterURL(gu.String())
		if err == nil {
			dialDefaults(&cfg.cluster.DialTimeout, &cfg.cluster.DialerRetries, &cfg.cluster.ContextTimeoutEnabled)
		}
	}
	if err != nil {
		return nil, bad("%s", strings.TrimPrefix(err.Error(), "redis: "))
	}
	if cfg.kind == kindCluster && cfg.opts.Replicas > 0 {
		return nil, bad("replicas is not supported on Redis Cluster: WAIT must follow the grant on its node's connection")
	}
	if err := cfg.setTLS(tlsFiles); err != nil {
		return nil, bad("%v", err)
	}
	return cfg, nil
}

// tlsFiles are the ca_file, cert_file and key_file parameters.
type tlsFiles struct{ ca, cert, key string }

// takeParams moves the Store's own query parameters from q into cfg.opts,
// and returns the TLS files.
func (cfg *urlConfig) takeParams(q url.Values) (tlsFiles, error) {
	var (
		f    tlsFiles
		errs []error
	)
	take := func(name string) string {
		vs := q[name]
		q.Del(name)
		if len(vs) > 1 {
			errs = append(errs, fmt.Errorf("%s given %d times: give it once", name, len(vs)))
		}
		if len(vs) == 0 {
			return ""
		}
		return vs[0]
	}
	f.ca, f.cert, f.key = take(paramCAFile), take(paramCertFile), take(paramKeyFile)
	cfg.opts.KeyPrefix = take(paramKeyPrefix)
	if r := take(paramReplicas); r != "" {
		n, err := strconv.Atoi(r)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%s: want a count, 0 (off) or more", paramReplicas, r))
		}
		cfg.opts.Replicas = n
	}
	return f, errors.Join(errs...)
}

// dialDefaults applies the dial defaults of a Store opened by URL to the
// fields of a go-redis options struct (single, failover and cluster ones
// share them but no type): urlDialTimeout unless the URL set dial_timeout,
// at least urlDialerRetries dials, and contexts bounding each command.
func dialDefaults(timeout *time.Duration, retries *int, contextTimeout *bool) {
	if *timeout == 0 {
		*timeout = urlDialTimeout
	}
	*retries = max(*retries, urlDialerRetries)
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
		bracketed := strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]")
		if strings.ContainsAny(host, "[]") || strings.Contains(host, ":") && !bracketed || strings.HasPrefix(h, "[") != bracketed {
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
func (cfg *urlConfig) tlsConfig() *tls.Config {
	switch cfg.kind {
	case kindSentinel:
		return cfg.failover.TLSConfig
	case kindCluster:
		return cfg.cluster.TLSConfig
	}
	return cfg.single.TLSConfig
}

// setTLS applies the certificate files to a TLS URL.
func (cfg *urlConfig) setTLS(f tlsFiles) error {
	if f == (tlsFiles{}) {
		return nil
	}
	tc := cfg.tlsConfig()
	if tc == nil {
		return errors.New("ca_file, cert_file and key_file are for TLS, but the URL is plain TCP: use rediss://")
	}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return fmt.Errorf("ca_file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("ca_file %s: no PEM certificate in it", f.ca)
		}
		tc.RootCAs = pool
	}
	if (f.cert == "") != (f.key == "") {
		return errors.New("cert_file and key_file go together: give both or neither")
	}
	if f.cert != "" {
		cert, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return fmt.Errorf("cert_file/key_file: %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return nil
}

// client returns a go-redis client for the configuration. It makes no
// network call: go-redis connects on first use.
func (cfg *urlConfig) client() redis.UniversalClient {
	switch cfg.kind {
	case kindSentinel:
		return redis.NewFailoverClient(cfg.failover)
	case kindCluster:
		return redis.NewClusterClient(cfg.cluster)
	}
	return redis.NewClient(cfg.single)
}
