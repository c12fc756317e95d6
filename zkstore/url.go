package zkstore

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/leash-go/leash/driver"
)

// init registers the zk:// URL scheme (see "Opening by URL" in the package
// documentation).
func init() { driver.Register("zk", openURL) }

// The query parameters of a zk:// URL: Options.SessionTimeout and
// Options.TickTime.
const (
	paramSessionTimeout = "session_timeout"
	paramTickTime       = "tick_time"
)

// ParseURL parses a zk:// URL into the servers, Options and digest
// credentials ("user:password", empty for none) Dial takes, without any
// network call. An error matches driver.ErrBadURL and shows no password.
func ParseURL(rawURL string) (servers []string, opts Options, digest string, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("zkstore: %q: %w: %s", driver.Redact(rawURL), driver.ErrBadURL, fmt.Sprintf(format, args...))
	}
	rest, ok := cutPrefixFold(rawURL, "zk://")
	if !ok {
		return nil, Options{}, "", bad("want zk://[user:password@]host:port[,host:port…][/root][?session_timeout=40s&tick_time=3s]")
	}
	rest, query, _ := strings.Cut(rest, "?")
	authority, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		user, err := url.PathUnescape(authority[:i])
		if err != nil || !strings.Contains(user, ":") || strings.HasPrefix(user, ":") {
			return nil, Options{}, "", bad("digest credentials must be user:password")
		}
		digest, authority = user, authority[i+1:]
	}
	if authority == "" {
		return nil, Options{}, "", bad("no server")
	}
	for _, hp := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || host == "" || port == "" {
			return nil, Options{}, "", bad("server %q is not host:port", hp)
		}
		servers = append(servers, hp)
	}
	if path != "" {
		opts.Root = "/" + strings.TrimSuffix(path, "/")
		if s := newStore(&opts); s.checkOptions() != nil {
			return nil, Options{}, "", bad("root %q is not a ZooKeeper path", opts.Root)
		}
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, Options{}, "", bad("query: %v", err)
	}
	for k, v := range q {
		if k != paramSessionTimeout && k != paramTickTime {
			return nil, Options{}, "", bad("unknown parameter %q (the parameters are %s and %s)", k, paramSessionTimeout, paramTickTime)
		}
		if len(v) != 1 {
			return nil, Options{}, "", bad("parameter %q given %d times", k, len(v))
		}
		d, err := time.ParseDuration(v[0])
		if err != nil || d <= 0 {
			return nil, Options{}, "", bad("%s=%q is not a positive duration", k, v[0])
		}
		if k == paramTickTime {
			opts.TickTime = d
		} else {
			opts.SessionTimeout = d
		}
	}
	return servers, opts, digest, nil
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}

// openURL is the zk:// Opener: a Store from Dial, with digest credentials
// when the URL has user information.
func openURL(ctx context.Context, rawURL string) (driver.StoreCloser, error) {
	servers, opts, digest, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	s, err := Dial(servers, &opts)
	if err != nil {
		return nil, fmt.Errorf("zkstore: open %q: %w", driver.Redact(rawURL), err)
	}
	if digest != "" {
		s.digest = digest // for every Client's session too
		// Sent first, once the session is established; go-zookeeper sends
		// it again after every reconnect.
		if err := call0(ctx, func() error { return s.conn.AddAuth("digest", []byte(digest)) }); err != nil {
			s.Close()
			return nil, fmt.Errorf("zkstore: open %q: digest credentials: %w", driver.Redact(rawURL), err)
		}
	}
	return s, nil
}
