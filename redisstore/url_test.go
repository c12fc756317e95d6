package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/redis/go-redis/v9"
)

// parse parses raw as the opener does.
func parse(raw string) (*urlConfig, error) { return parseURL(raw) }

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url   string
		check func(*urlConfig) string // returns what is wrong, or ""
	}{
		{"redis://127.0.0.1:6379/2", func(c *urlConfig) string {
			return expect(c.kind == kindSingle && c.single.Addr == "127.0.0.1:6379" && c.single.DB == 2 && c.single.TLSConfig == nil, c.single)
		}},
		{"redis://bob:s3cret@127.0.0.1:6380", func(c *urlConfig) string {
			return expect(c.single.Username == "bob" && c.single.Password == "s3cret" && c.desc == "redis://bob:xxxxx@127.0.0.1:6380", c.single)
		}},
		{"redis://:onlypass@h", func(c *urlConfig) string {
			return expect(c.single.Username == "" && c.single.Password == "onlypass" && c.single.Addr == "h:6379", c.single)
		}},
		{"rediss://cache.internal:6380", func(c *urlConfig) string {
			return expect(c.single.TLSConfig != nil && c.single.TLSConfig.ServerName == "cache.internal", c.single)
		}},
		{"redis://[::1]:7000", func(c *urlConfig) string { return expect(c.single.Addr == "[::1]:7000", c.single) }},
		{"redis://h", func(c *urlConfig) string {
			return expect(c.single.DialTimeout == urlDialTimeout && c.single.DialerRetries == urlDialerRetries && c.single.ContextTimeoutEnabled, c.single)
		}},
		{"redis://h?dial_timeout=1s", func(c *urlConfig) string {
			return expect(c.single.DialTimeout == time.Second && c.single.ContextTimeoutEnabled, c.single)
		}},
		{"redis://h?key_prefix=app1%3A&replicas=2&read_timeout=3s", func(c *urlConfig) string {
			return expect(c.opts.KeyPrefix == "app1:" && c.opts.Replicas == 2 && c.single.ReadTimeout == 3*time.Second, c.opts)
		}},
		{"redis+sentinel://a:1,[::1]/m", func(c *urlConfig) string {
			f := c.failover
			return expect(c.kind == kindSentinel && slices.Equal(f.SentinelAddrs, []string{"a:1", "[::1]:26379"}) && f.MasterName == "m" &&
				c.desc == "redis+sentinel://a:1,[::1]/m", f)
		}},
		{"REDIS+SENTINEL://u:p@[fe80::1]:26380,[::1],b/m/2?sentinel_password=sp", func(c *urlConfig) string {
			f := c.failover
			return expect(slices.Equal(f.SentinelAddrs, []string{"[fe80::1]:26380", "[::1]:26379", "b:26379"}) && f.MasterName == "m" && f.DB == 2 &&
				f.Username == "u" && f.Password == "p" && f.SentinelPassword == "sp" &&
				c.desc == "REDIS+SENTINEL://u:xxxxx@[fe80::1]:26380,[::1],b/m/2?sentinel_password=xxxxx", f)
		}},
		{"redis+cluster://[::1]:7000,[::1]:7001,h:7002?key_prefix=p", func(c *urlConfig) string {
			o := c.cluster
			return expect(c.kind == kindCluster && slices.Equal(o.Addrs, []string{"[::1]:7000", "[::1]:7001", "h:7002"}) && c.opts.KeyPrefix == "p", o)
		}},
		{"redis+cluster://u:p@a:1,[::1]:2?addr=[::2]:3", func(c *urlConfig) string {
			o := c.cluster
			return expect(slices.Equal(o.Addrs, []string{"a:1", "[::2]:3", "[::1]:2"}) && o.Username == "u" && o.Password == "p", o)
		}},
		{"redis+sentinel://u:p@a:1,b:2/mymaster/3?sentinel_password=sp&addr=[::1]:26379", func(c *urlConfig) string {
			f := c.failover
			return expect(c.kind == kindSentinel && slices.Equal(f.SentinelAddrs, []string{"a:1", "[::1]:26379", "b:2"}) &&
				f.MasterName == "mymaster" && f.DB == 3 && f.Username == "u" && f.Password == "p" &&
				f.SentinelPassword == "sp" && !strings.Contains(c.desc, "sp") && !strings.Contains(c.desc, ":p@"), f)
		}},
		{"rediss+sentinel://s1/m", func(c *urlConfig) string {
			f := c.failover
			return expect(f.TLSConfig != nil && slices.Equal(f.SentinelAddrs, []string{"s1:26379"}) && f.MasterName == "m", f)
		}},
		{"redis+cluster://a:7000,b:7001?read_timeout=2s&key_prefix=p", func(c *urlConfig) string {
			o := c.cluster
			return expect(c.kind == kindCluster && slices.Equal(o.Addrs, []string{"a:7000", "b:7001"}) && o.ReadTimeout == 2*time.Second && c.opts.KeyPrefix == "p", o)
		}},
		{"rediss+cluster://u:p@a", func(c *urlConfig) string {
			o := c.cluster
			return expect(o.TLSConfig != nil && o.Username == "u" && o.Password == "p" && slices.Equal(o.Addrs, []string{"a:6379"}), o)
		}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			cfg, err := parse(tc.url)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if wrong := tc.check(cfg); wrong != "" {
				t.Errorf("parse(%q) = %s", tc.url, wrong)
			}
		})
	}
}

func expect(ok bool, got any) string {
	if ok {
		return ""
	}
	return fmt.Sprintf("%+v", got)
}

func TestParseURLRejects(t *testing.T) {
	const secret = "Pa55w0rd-never-printed"
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ url, want string }{
		{"http://x", `unsupported scheme "http"`},
		{"redis+ring://x", "unsupported scheme"},
		{"redis:opaque", "write redis://host:port"},
		{"redis://x:70000", "bad port"},
		{"redis://u:" + secret + "@a:1,b:2", "names 2 servers"},
		{"redis+cluster://a:1,,b:2", "empty host"},
		{"redis://x/notadb", "invalid database number"},
		{"redis://u:" + secret + "@x?bogus=1", "unexpected option: bogus"},
		{"redis://x#frag", "fragment"},
		{"redis+sentinel://a:1", "master name"},
		{"redis+sentinel://a:1/m?sentinel_password=" + secret + "&bogus=1", "unexpected option"},
		{"redis+cluster://a:1/5", "only database 0"},
		{"redis+cluster://a:1?replicas=1", "replicas is not supported on Redis Cluster"},
		{"redis://h?replicas=-1", "replicas=-1: want a count"},
		{"redis://h?replicas=two", "replicas=two: want a count"},
		{"redis://h?key_prefix=a&key_prefix=b", "key_prefix given 2 times"},
		{"redis://h?key_prefix=%7Bx%7D", "KeyPrefix"},
		{"redis://u:" + secret + "@h?ca_file=" + garbage, "are for TLS"},
		{"rediss://h?ca_file=" + filepath.Join(dir, "none.pem"), "no such file"},
		{"rediss://h?ca_file=" + garbage, "no PEM certificate"},
		{"rediss://h?cert_file=" + garbage, "go together"},
		{"rediss://h?cert_file=" + garbage + "&key_file=" + garbage, "cert_file/key_file"},
		{"redis://x:y", `bad port "y"`},
		{"redis+sentinel://a:1,::1/m", `bad host "::1": write host:port, or [ipv6]:port`},
		{"redis+cluster://[::1:7000", "bad host"},
		{"redis+cluster://a,[::1]x", "bad"},
		{"redis://u:" + secret + "@h%zz/0", "invalid URL escape"},
		{"redis://u:" + secret + "%zz@h/0", "bad user information"},
		{"redis://u:" + secret + "/x@h", "cannot tell the password from the host"},
		{"redis://u:" + secret + "?x@h", "cannot tell the password from the host"},
		{"redis://u:" + secret + "#x@h", "cannot tell the password from the host"},
		{"redis://u:" + secret + "@h?a=%zz", "invalid URL escape"},
		{"redis://u:" + secret + "@h#", "fragment"},
		{"redis+sentinel://u:" + secret + "@a,[::1]/m?sentinel_password=" + secret + "&bogus=1", "unexpected option: bogus"},
		{"redis://h/1?db=0", "the database is given twice"},
		{"redis://h/1?db=1", "the database is given twice"},
		{"redis+sentinel://h/m/1?db=2", "the database is given twice"},
		{"redis+sentinel://h/m?master_name=other", "the master is named by the path"},
		{"redis+sentinel://u:" + secret + "@h/m?password=" + secret, "not read on a Sentinel URL"},
		{"redis+sentinel://h/m?username=other", "not read on a Sentinel URL"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			s, err := openURL(context.Background(), tc.url)
			if err == nil {
				s.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("openURL(%q) = %v, want an error with %q", tc.url, err, tc.want)
			}
			if !errors.Is(err, driver.ErrBadURL) {
				t.Errorf("openURL(%q) = %v, which does not match driver.ErrBadURL", tc.url, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"redis://u:p@h:1/0", "rediss://h", "redis+sentinel://u:p@a,b:2/m/1?sentinel_password=x",
		"redis+cluster://a:1,b:2?addr=c:3", "redis://@@:/", "rediss+cluster://,",
		"redis://u:p@h/0?password=zzz", "redis://h:1?dial_timeout=x", "redis://h?replicas=1&key_prefix=p",
		"redis+sentinel://u:p@[::1],a:1/m", "redis://u:p/x@h", "redis://u:p%zz@h",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		_, err := parseURL(raw) // must not panic
		if err == nil {
			return
		}
		if !errors.Is(err, driver.ErrBadURL) {
			t.Errorf("parseURL(%q) = %v, which does not match driver.ErrBadURL", raw, err)
		}
		// A password, where the URL has one that url.Parse sees, is never
		// printed.
		u, perr := url.Parse(raw)
		if perr != nil || u.User == nil {
			return
		}
		if p, ok := u.User.Password(); ok && len(p) >= 4 && strings.Count(raw, p) == 1 && strings.Contains(err.Error(), p) {
			t.Errorf("parseURL(%q) error shows the password: %v", raw, err)
		}
	})
}

// TestOpenURL: every scheme is registered, and the opened store names
// itself by its URL without the password, owns its go-redis client (Close
// closes it, and again is harmless), and makes no network call.
func TestOpenURL(t *testing.T) {
	for _, scheme := range URLSchemes() {
		if !slices.Contains(driver.Schemes(), scheme) {
			t.Errorf("driver.Schemes() = %q, want %q among them", driver.Schemes(), scheme)
		}
	}
	// A port nothing listens on: opening must not dial.
	s, err := driver.Open(context.Background(), "redis://u:secret@127.0.0.1:1/0?key_prefix=p:")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := driver.Describe(s), "redis://u:xxxxx@127.0.0.1:1/0?key_prefix=p:"; got != want {
		t.Errorf("driver.Describe = %q, want %q", got, want)
	}
	us := s.(*urlStore)
	if us.opts.KeyPrefix != "p:" {
		t.Errorf("KeyPrefix = %q, want %q", us.opts.KeyPrefix, "p:")
	}
	if _, ok := s.(driver.Admin); !ok {
		t.Error("the opened store is not a driver.Admin")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := us.rdb.Ping(context.Background()).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("Ping after Close = %v, want %v: Close must close the go-redis client", err, redis.ErrClosed)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close = %v, want nil", err)
	}
}
