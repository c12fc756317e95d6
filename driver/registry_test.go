package driver_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
)

// opened records the URLs the test scheme's opener was given.
var opened []string

func init() {
	driver.Register("Test+Reg.v1", func(_ context.Context, rawURL string) (driver.StoreCloser, error) {
		opened = append(opened, rawURL)
		return nopCloser{memstore.New()}, nil
	})
}

type nopCloser struct{ *memstore.Store }

func (nopCloser) Close() error { return nil }

// TestOpenHandsTheURLAsWritten: the opener of the scheme gets the URL as
// written, whatever net/url thinks of it, and the scheme matches without
// regard to case.
func TestOpenHandsTheURLAsWritten(t *testing.T) {
	for _, raw := range []string{
		"test+reg.v1://a:1,[::1]:2/m",
		"TEST+Reg.V1://u:p@[::1],b/m?x=%zz",
		"test+reg.v1:opaque",
	} {
		opened = nil
		s, err := driver.Open(context.Background(), raw)
		if err != nil {
			t.Fatalf("Open(%q) = %v", raw, err)
		}
		s.Close()
		if !slices.Equal(opened, []string{raw}) {
			t.Errorf("Open(%q) gave the opener %q, want the URL as written", raw, opened)
		}
	}
	if !slices.Contains(driver.Schemes(), "test+reg.v1") {
		t.Errorf("Schemes() = %q, want test+reg.v1 (lower case) among them", driver.Schemes())
	}
}

// TestOpenRefuses: a URL without a scheme or with one no store registered
// is an ErrBadURL that lists the registered schemes, and no opener sees it.
func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", "has no scheme"},
		{"127.0.0.1:6379", "has no scheme"},
		{"//h:1", "has no scheme"},
		{"1redis://h", "has no scheme"},
		{"re dis://h", "has no scheme"},
		{"://h", "has no scheme"},
		{"etcd://h:2379", `no store for "etcd" URLs`},
		{"test+reg://h", `no store for "test+reg" URLs`},
	} {
		opened = nil
		s, err := driver.Open(context.Background(), tc.url)
		if err == nil {
			s.Close()
			t.Fatalf("Open(%q) opened a store", tc.url)
		}
		if !errors.Is(err, driver.ErrBadURL) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "test+reg.v1") {
			t.Errorf("Open(%q) = %v; want an ErrBadURL with %q that lists test+reg.v1", tc.url, err, tc.want)
		}
		if opened != nil {
			t.Errorf("Open(%q) called an opener", tc.url)
		}
	}
}

func TestRegisterPanics(t *testing.T) {
	open := func(context.Context, string) (driver.StoreCloser, error) { return nil, nil }
	for name, f := range map[string]func(){
		"twice":            func() { driver.Register("TEST+reg.v1", open) },
		"nil opener":       func() { driver.Register("test-nil", nil) },
		"not a scheme":     func() { driver.Register("a/b", open) },
		"digit first":      func() { driver.Register("9p", open) },
		"empty":            func() { driver.Register("", open) },
		"with the colon":   func() { driver.Register("redis:", open) },
		"with the slashes": func() { driver.Register("redis://", open) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Register did not panic")
				}
			}()
			f()
		})
	}
}

// secret is a password no message may show.
const secret = "Pa55w0rd"

// withSecret are URLs, malformed ones among them, whose password is secret.
var withSecret = []string{
	"redis://u:" + secret + "@h:1/0",
	"redis://:" + secret + "@h",
	"redis://u:" + secret + "@a:1,[::1]:2/m",
	"redis://u:" + secret + "@@h",
	"redis://u:" + secret + "@h:x",
	"redis://u:" + secret + "@h%zz/0",
	"redis://u:" + secret + "/x@h",
	"redis://u:" + secret + "?x@h",
	"redis://u:" + secret + "#x@h",
	"redis://u:" + secret + "@h?password=" + secret,
	"redis://h/m?a=1&sentinel_password=" + secret + "&b=2",
	"redis://h?PASSWORD=" + secret + "#f",
	"redis:u:" + secret + "@h",
	"u:" + secret + "@h:1",
	"1redis://u:" + secret + "@h",
	"re dis://u:" + secret + "@h",
	"etcd://u:" + secret + "@h:2379",
	"etcd://u:" + secret + "/@h:2379",
	"://u:" + secret + "@h",
}

// TestNoPasswordInErrors: no error of Open shows a password, whatever the
// URL, and Redact hides every one.
func TestNoPasswordInErrors(t *testing.T) {
	for _, raw := range withSecret {
		if got := driver.Redact(raw); strings.Contains(got, secret) {
			t.Errorf("Redact(%q) = %q, which shows the password", raw, got)
		}
		if _, err := driver.Open(context.Background(), raw); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%q) = %v; want an error without the password", raw, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:secret@h:1/0":                               "redis://u:xxxxx@h:1/0",
		"redis://:secret@h":                                    "redis://:xxxxx@h",
		"redis://u@h":                                          "redis://u@h",
		"redis://u:p@ss@h":                                     "redis://u:xxxxx@h",
		"redis://u:p@a:1,[::1]:2/m":                            "redis://u:xxxxx@a:1,[::1]:2/m",
		"redis://u:p/q@h/0":                                    "redis://u:xxxxx@h/0",
		"redis://a:1,[::1]/m?k=a@b":                            "redis://a:1,[::1]/m?k=a@b",
		"redis+sentinel://h/m?sentinel_password=x&a=1":         "redis+sentinel://h/m?sentinel_password=xxxxx&a=1",
		"redis://h?a=1&password=x&notpassword=y&passwords=z":   "redis://h?a=1&password=xxxxx&notpassword=xxxxx&passwords=z",
		"redis+cluster://u:p@a:1,b:2?sentinel_username=me&x=y": "redis+cluster://u:xxxxx@a:1,b:2?sentinel_username=me&x=y",
		"mem://":        "mem://",
		"no url at all": "no url at all",
	} {
		if got := driver.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzRedact(f *testing.F) {
	for _, s := range withSecret {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		// A password of the user information, as a parser that knows where
		// the authority ends would see it, is never shown.
		_, rest, ok := strings.Cut(raw, "://")
		if !ok {
			return
		}
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			rest = rest[:i]
		}
		at := strings.LastIndexByte(rest, '@')
		if at < 0 {
			return
		}
		_, pass, ok := strings.Cut(rest[:at], ":")
		if ok && len(pass) >= 4 && strings.Count(raw, pass) == 1 && strings.Contains(driver.Redact(raw), pass) {
			t.Errorf("Redact(%q) = %q shows the password %q", raw, driver.Redact(raw), pass)
		}
	})
}
