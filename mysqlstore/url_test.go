package mysqlstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/mysqlstore"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url                  string
		user, pass, addr, db string
		table                string
		migrate              bool
		check                func(t *testing.T, dsn string)
	}{
		{url: "mysql://h/app", addr: "h:3306", db: "app"},
		{url: "mysql://u:p%40ss:w%2Fo@[::1]:3307/app%3Fx", user: "u", pass: "p@ss:w/o", addr: "[::1]:3307", db: "app?x"},
		{url: "MYSQL://u@h:1/d?leash_table=jobs&leash_migrate=true", user: "u", addr: "h:1", db: "d", table: "jobs", migrate: true},
		{url: "mysql://h/d?time_zone=%27%2B05%3A00%27&charset=utf8mb4", addr: "h:3306", db: "d",
			check: func(t *testing.T, dsn string) {
				if !strings.Contains(dsn, "time_zone=%27%2B05%3A00%27") || !strings.Contains(dsn, "charset=utf8mb4") {
					t.Errorf("DSN = %q, want time_zone and charset passed through", dsn)
				}
			}},
	} {
		cfg, opts, migrate, err := mysqlstore.ParseURL(tc.url)
		if err != nil {
			t.Errorf("ParseURL(%q) error: %v", tc.url, err)
			continue
		}
		if cfg.User != tc.user || cfg.Passwd != tc.pass || cfg.Addr != tc.addr || cfg.Net != "tcp" || cfg.DBName != tc.db ||
			opts.Table != tc.table || migrate != tc.migrate {
			t.Errorf("ParseURL(%q) = user %q pass %q addr %q db %q table %q migrate %v; want %q %q %q %q %q %v", tc.url,
				cfg.User, cfg.Passwd, cfg.Addr, cfg.DBName, opts.Table, migrate, tc.user, tc.pass, tc.addr, tc.db, tc.table, tc.migrate)
		}
		if cfg.Timeout != 3*time.Second {
			t.Errorf("ParseURL(%q) dial timeout = %v, want the 3s default", tc.url, cfg.Timeout)
		}
		if tc.check != nil {
			tc.check(t, cfg.FormatDSN())
		}
		for k := range cfg.Params {
			if strings.HasPrefix(k, "leash_") {
				t.Errorf("ParseURL(%q) passes %s to the driver", tc.url, k)
			}
		}
	}
}

func TestParseURLRefuses(t *testing.T) {
	const secret = "Pa55w0rd"
	for _, raw := range []string{
		"mysql://u:" + secret + "@/app",
		"mysql://u:" + secret + "@h",
		"mysql://u:" + secret + "@h/",
		"mysql://u:" + secret + "@h/a/b",
		"mysql://u:" + secret + "@h:x/a",
		"mysql://u:" + secret + "@h:0/a",
		"mysql://u:" + secret + "@h/a#frag",
		"mysql://u:" + secret + "@h/a?leash_table=",
		"mysql://u:" + secret + "@h/a?leash_migrate=maybe",
		"mysql://u:" + secret + "@h/a?leash_table=ends+with+space+",
		"mysql://u:" + secret + "@h/a?x=%zz",
		"mysql:u:" + secret + "@h/a",
		"mysql://u:" + secret + "@h/a?leash_table=x&leash_table=y",
		"mysql://u:" + secret + "@h/a?timeout=1s&timeout=2s",
		"mysql://u:" + secret + "@h/a?time_zone=%27%2B01%3A00%27&time_zone=%27%2B02%3A00%27",
		"mysql://u:" + secret + "@h/a?leash_migrate=true&leash_migrate=false",
		"mysql://u:" + secret + "@h/a?no-such=1",
		"mysql://u:" + secret + "@h/a?1st=1",
		"mysql://u:" + secret + "@h/a?x%3Dy=1",
		"mysql://u:" + secret + "@h/a?leash_table=Orders",
		"mysql://u:" + secret + "@h/a?leash_table=a%0Ab",
	} {
		_, _, _, err := mysqlstore.ParseURL(raw)
		if !errors.Is(err, driver.ErrBadURL) || strings.Contains(err.Error(), secret) {
			t.Errorf("ParseURL(%q) = %v; want an ErrBadURL without the password", raw, err)
		}
		if s, err := driver.Open(context.Background(), raw); err == nil {
			s.Close()
			t.Errorf("Open(%q) opened a store", raw)
		} else if !errors.Is(err, driver.ErrBadURL) || strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%q) = %v; want an ErrBadURL without the password", raw, err)
		}
	}
}

// TestOpenURL opens a store from a URL with a table of its own, migrated on
// open, and takes a lock through leash on it.
func TestOpenURL(t *testing.T) {
	srv := sharedServer(t)
	raw := "mysql://root@" + srv.Addr + "/" + testDB + "?leash_table=url_locks&leash_migrate=true&time_zone=%27-07%3A00%27"
	s, err := driver.Open(bg(t), raw)
	if err != nil {
		t.Fatalf("Open(%q): %v", raw, err)
	}
	if got := s.(interface{ String() string }).String(); got != raw {
		t.Errorf("String() = %q, want the URL (it has no password)", got)
	}
	if err := s.(interface{ Ping(context.Context) error }).Ping(bg(t)); err != nil {
		t.Errorf("Ping: %v", err)
	}
	c, err := leash.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := c.Mutex(t.Name()).Lock(bg(t))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if info, err := s.(driver.Admin).Inspect(bg(t), t.Name()); err != nil || !info.Held || info.Fence != h.Fence() {
		t.Errorf("Inspect = %+v, %v; want held with fence %d", info, err, h.Fence())
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

// TestURLUnknownParameter: a parameter neither leash's nor the driver's is
// sent to the server as a session variable, so the opener accepts it and a
// misspelt one fails at connect, with the server's error.
func TestURLUnknownParameter(t *testing.T) {
	srv := sharedServer(t)
	raw := "mysql://root@" + srv.Addr + "/" + testDB + "?no_such_variable=1"
	s, err := driver.Open(bg(t), raw)
	if err != nil {
		t.Fatalf("Open(%q) = %v; want it opened (the server judges the parameter)", raw, err)
	}
	defer s.Close()
	if err := s.(interface{ Ping(context.Context) error }).Ping(bg(t)); err == nil || errors.Is(err, driver.ErrBadURL) ||
		!strings.Contains(strings.ToLower(err.Error()), "unknown system variable") {
		t.Errorf("Ping = %v; want the server's Unknown system variable", err)
	}
}
