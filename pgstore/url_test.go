package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/pgstore"
)

const secret = "Pa55w0rd-never-printed"

// TestURLErrors: URLs that cannot name a store are ErrBadURL, before any
// network call, and never show the password.
func TestURLErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"postgres://u:" + secret + "@127.0.0.1:1/db?leash_table=a&leash_table=b", "leash_table given 2 times"},
		{"postgres://u:" + secret + "@127.0.0.1:1/db?leash_batch_size=0", "leash_batch_size=0"},
		{"postgres://u:" + secret + "@127.0.0.1:1/db?leash_tabel=x", "unknown parameter leash_tabel"},
		{"postgresql://u:" + secret + "@127.0.0.1:1/db?leash_table=" + strings.Repeat("t", pgstore.MaxTableLen+1), "Options.Table"},
		{"postgres://u:" + secret + "@127.0.0.1:notaport/db", "notaport"},
		{"postgres://u:" + secret + "@127.0.0.1:1/db#frag", "fragment"},
		{"postgres://u:" + secret + "@127.0.0.1:1/db?sslmode=sometimes", "sslmode"},
	} {
		s, err := driver.Open(context.Background(), tc.url)
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, driver.ErrBadURL) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%s) = %v; want ErrBadURL saying %q, without the password", driver.Redact(tc.url), err, tc.want)
		}
	}
}

// TestURLOpens: a URL with leash's and pgx's parameters opens a store on
// the tables it names; Ping says how to create missing tables, and the
// opened store does not create them itself.
func TestURLOpens(t *testing.T) {
	table := tableName(t)
	url := sharedPostgres(t).URL() + "&application_name=leash-test&leash_schema=url_tests&leash_table=" + table + "&leash_batch_size=3"
	s, err := driver.Open(bg(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.(interface{ String() string }).String(); got != driver.Redact(url) {
		t.Errorf("String() = %q, want the URL %q", got, driver.Redact(url))
	}
	p := s.(interface{ Ping(context.Context) error })
	if err := p.Ping(bg(t)); !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("Ping before the tables exist = %v, want ErrSchema saying how to create them", err)
	}
	if err := s.(interface{ Migrate(context.Context) error }).Migrate(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := p.Ping(bg(t)); err != nil {
		t.Fatal(err)
	}
	r := driver.Request{Name: "job", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: time.Minute}
	reqs := []driver.Request{r, r, r, r, r, r, r} // several batches of 3
	if g, err := s.Acquire(bg(t), r); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	for i, res := range s.Renew(bg(t), reqs) {
		if res.Err != nil || res.Status != driver.Renewed {
			t.Errorf("Renew result %d = %+v", i, res)
		}
	}
	var schema string
	if err := s.(interface{ Pool() *pgxpool.Pool }).Pool().QueryRow(bg(t), "SELECT schemaname FROM pg_tables WHERE tablename = $1", table).Scan(&schema); err != nil || schema != "url_tests" {
		t.Errorf("table %s in schema %q (%v), want \"url_tests\"", table, schema, err)
	}
}

// TestURLServerDown: a server that cannot be reached is not a bad URL.
func TestURLServerDown(t *testing.T) {
	s, err := driver.Open(bg(t), "postgres://u:"+secret+"@127.0.0.1:1/db?connect_timeout=1")
	if err != nil {
		t.Fatal(err) // opening makes no network call
	}
	defer s.Close()
	err = s.(interface{ Ping(context.Context) error }).Ping(bg(t))
	if err == nil || errors.Is(err, driver.ErrBadURL) || strings.Contains(err.Error(), secret) {
		t.Errorf("Ping of a server that is down = %v, want an error that is not ErrBadURL and shows no password", err)
	}
}

// TestURLMultiHost: pgx's host lists (for failover with
// target_session_attrs) open.
func TestURLMultiHost(t *testing.T) {
	s, err := driver.Open(bg(t), "postgres://u@127.0.0.1:1,127.0.0.1:2/db?target_session_attrs=read-write&leash_table=x")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
