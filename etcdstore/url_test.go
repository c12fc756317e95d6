package etcdstore

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url       string
		endpoints []string
		check     func(*urlConfig) bool
	}{
		{"etcd://127.0.0.1:2379", []string{"http://127.0.0.1:2379"}, func(c *urlConfig) bool {
			return c.opts.Prefix == "" && c.client.TLS == nil && c.client.DialTimeout == urlDialTimeout
		}},
		{"etcd://a,b:2380,[::1],[fe80::1]:23", []string{"http://a:2379", "http://b:2380", "http://[::1]:2379", "http://[fe80::1]:23"}, nil},
		{"ETCD://bob:s%2Fcret@h/?prefix=app%2Flocks%2F&dial_timeout=1s", []string{"http://h:2379"}, func(c *urlConfig) bool {
			return c.client.Username == "bob" && c.client.Password == "s/cret" && c.opts.Prefix == "app/locks/" &&
				c.client.DialTimeout == time.Second && !strings.Contains(c.desc, "cret")
		}},
		{"etcds://h1:2379,h2:2379", []string{"https://h1:2379", "https://h2:2379"}, func(c *urlConfig) bool { return c.client.TLS != nil }},
	} {
		c, err := parseURL(tc.url)
		if err != nil {
			t.Errorf("parseURL(%q): %v", tc.url, err)
			continue
		}
		if !slices.Equal(c.client.Endpoints, tc.endpoints) {
			t.Errorf("parseURL(%q) endpoints = %q, want %q", tc.url, c.client.Endpoints, tc.endpoints)
		}
		if tc.check != nil && !tc.check(c) {
			t.Errorf("parseURL(%q) = %+v, %+v", tc.url, c.client, c.opts)
		}
	}
}

func TestParseURLRefuses(t *testing.T) {
	const secret = "Pa55w0rd"
	for _, raw := range []string{
		"etcd://",
		"etcd://h,",
		"etcd://u:" + secret + "@h/path",
		"etcd://u:" + secret + "@h?nope=1",
		"etcd://h?prefix=a&prefix=b",
		"etcd://h?prefix=",
		"etcd://h?dial_timeout=soon",
		"etcd://h?ca_file=/etc/ssl/ca.pem",
		"etcds://h?ca_file=/no/such/file",
		"etcds://h?cert_file=/no/such/file",
		"etcd://::1",
		"etcd://u:" + secret + "@h#frag",
		"etcd://only-user@h",
		"redis://h",
	} {
		_, err := parseURL(raw)
		if !errors.Is(err, driver.ErrBadURL) {
			t.Errorf("parseURL(%q) = %v, want an error matching ErrBadURL", raw, err)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("parseURL(%q) = %v: shows the password", raw, err)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"etcd://h", "etcds://u:p@a,b:1/?prefix=x", "etcd://[::1]:2379?dial_timeout=1s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := parseURL(raw)
		if err == nil && len(c.client.Endpoints) == 0 {
			t.Errorf("parseURL(%q) gave no endpoint", raw)
		}
		if err != nil && !errors.Is(err, driver.ErrBadURL) {
			t.Errorf("parseURL(%q) = %v, not ErrBadURL", raw, err)
		}
	})
}
