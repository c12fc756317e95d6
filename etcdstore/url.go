package etcdstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/leash-go/leash/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// init registers the package's URL schemes, etcd and etcds (see "Opening by
// URL" in the package doc).
func init() {
	for _, s := range urlSchemes {
		driver.Register(s, openURL)
	}
}

// urlSchemes are the URL schemes the package registers.
var urlSchemes = [...]string{"etcd", "etcds"}

// URLSchemes returns the URL schemes importing the package registers with
// driver.Register: etcd and etcds (TLS).
func URLSchemes() []string { return urlSchemes[:] }

// The query parameters of a store URL.
const (
	paramPrefix      = "prefix"
	paramCAFile      = "ca_file"
	paramCertFile    = "cert_file"
	paramKeyFile     = "key_file"
	paramDialTimeout = "dial_timeout"
)

// urlParams are the query parameters a store URL accepts.
var urlParams = []string{paramPrefix, paramCAFile, paramCertFile, paramKeyFile, paramDialTimeout}

// defaultPort is the port of a host given without one: etcd's client port.
const defaultPort = "2379"

// urlDialTimeout bounds the first connection unless the URL sets
// dial_timeout.
const urlDialTimeout = 3 * time.Second

// urlError is the error for a URL that cannot name a Store: it matches
// driver.ErrBadURL.
type urlError struct {
	// desc is the URL without passwords; msg says what is wrong with it.
	desc, msg string
}

func (e *urlError) Error() string { return fmt.Sprintf("etcdstore: URL %q: %s", e.desc, e.msg) }

// Is reports whether target is driver.ErrBadURL.
func (e *urlError) Is(target error) bool { return target == driver.ErrBadURL }

// urlConfig is a parsed store URL: all that is needed to connect, made
// without any network call.
type urlConfig struct {
	client clientv3.Config
	opts   Options
	desc   string // the URL for messages, without passwords
}

// parseURL parses etcd://[user:password@]host[:port][,host[:port]…][/][?params]
// (etcds:// for TLS) without any network call. Its errors are *urlError.
func parseURL(raw string) (*urlConfig, error) {
	desc := driver.Redact(raw)
	bad := func(format string, args ...any) error { return &urlError{desc, fmt.Sprintf(format, args...)} }
	scheme, rest, ok := strings.Cut(raw, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "etcd" && scheme != "etcds") {
		return nil, bad("want etcd://host[:port][,host[:port]…] or etcds://…")
	}
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		return nil, bad("a fragment (#…) means nothing here")
	}
	rest, query, _ := strings.Cut(rest, "?")
	var cfg urlConfig
	cfg.desc = desc
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		user, pass, hasPass := strings.Cut(rest[:i], ":")
		var err error
		if cfg.client.Username, err = url.PathUnescape(user); err != nil || !hasPass {
			return nil, bad("the user information must be user:password, percent-encoded")
		}
		if cfg.client.Password, err = url.PathUnescape(pass); err != nil {
			return nil, bad("the password is not percent-encoded properly")
		}
		rest = rest[i+1:]
	}
	hosts, path, _ := strings.Cut(rest, "/")
	if path != "" {
		return nil, bad("no path is expected after the hosts; the key prefix is the prefix parameter")
	}
	tlsOn := scheme == "etcds"
	sch := "http://"
	if tlsOn {
		sch = "https://"
	}
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			return nil, bad("an empty host in the host list")
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil { // no port
			host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), defaultPort
			if strings.ContainsAny(host, "[]") || (strings.Contains(host, ":") && !strings.HasPrefix(h, "[")) {
				return nil, bad("host %q: write an IPv6 address in brackets, [::1]:2379", h)
			}
		}
		if host == "" || port == "" {
			return nil, bad("host %q has no name or port", h)
		}
		cfg.client.Endpoints = append(cfg.client.Endpoints, sch+net.JoinHostPort(host, port))
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, bad("query: %v", err)
	}
	cfg.client.DialTimeout = urlDialTimeout
	var ca, cert, key string
	for name, vs := range q {
		if len(vs) != 1 {
			return nil, bad("parameter %s given %d times", name, len(vs))
		}
		v := vs[0]
		switch name {
		case paramPrefix:
			if v == "" {
				return nil, bad("prefix is empty (leave it out for the default %q)", DefaultPrefix)
			}
			cfg.opts.Prefix = v
		case paramCAFile:
			ca = v
		case paramCertFile:
			cert = v
		case paramKeyFile:
			key = v
		case paramDialTimeout:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, bad("dial_timeout %q is not a positive duration", v)
			}
			cfg.client.DialTimeout = d
		default:
			return nil, bad("unknown parameter %q (known: %s)", name, strings.Join(urlParams, ", "))
		}
	}
	if (ca != "" || cert != "" || key != "") && !tlsOn {
		return nil, bad("ca_file, cert_file and key_file are for TLS: use etcds://")
	}
	if tlsOn {
		if cfg.client.TLS, err = tlsConfig(ca, cert, key); err != nil {
			return nil, bad("%v", err)
		}
	}
	return &cfg, nil
}

// tlsConfig builds the TLS configuration of an etcds:// URL.
func tlsConfig(ca, cert, key string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %q holds no PEM certificate", ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, errors.New("cert_file and key_file go together")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("cert_file, key_file: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// openURL is the driver.Opener of the package's schemes. A URL that cannot
// name a Store is an error that matches driver.ErrBadURL. With a user and
// password, opening asks the server for an auth token: a server that cannot
// be reached, or refuses them, is an error that does not.
func openURL(_ context.Context, rawURL string) (driver.StoreCloser, error) {
	cfg, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	// The client's own logger would write its retries to stderr: the
	// Store's errors say what failed.
	cfg.client.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg.client)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: connect to %s: %w", cfg.desc, err)
	}
	return &urlStore{Store: New(cli, &cfg.opts), cli: cli, desc: cfg.desc}, nil
}

// urlStore is a Store opened by URL: it owns its etcd client.
type urlStore struct {
	*Store
	cli       *clientv3.Client
	desc      string
	closeOnce sync.Once
	closeErr  error
}

// String is the store's URL, without passwords.
func (s *urlStore) String() string { return s.desc }

// Close closes the etcd client. Calling it again returns the same result.
func (s *urlStore) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.cli.Close() })
	return s.closeErr
}

// Ping checks that the cluster answers (and accepts the credentials) with
// one linearizable read.
func (s *urlStore) Ping(ctx context.Context) error {
	_, err := s.cli.Get(ctx, s.prefix, clientv3.WithCountOnly())
	return err
}
