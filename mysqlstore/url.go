package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/leash-go/leash/driver"
)

// init registers the "mysql" URL scheme (see "Opening by URL" in the
// package doc).
func init() { driver.Register(URLScheme, openURL) }

// URLScheme is the URL scheme importing the package registers with
// driver.Register.
const URLScheme = "mysql"

// The Store's own URL query parameters; every other parameter goes to
// go-sql-driver/mysql as its DSN spells it.
const (
	paramTable   = "leash_table"
	paramMigrate = "leash_migrate"
)

// URLParams returns the query parameters of the Store's own that its URLs
// accept beside go-sql-driver/mysql's: leash_table and leash_migrate.
func URLParams() []string { return []string{paramTable, paramMigrate} }

// paramName is what a parameter's name must look like: every parameter
// that is neither leash's nor go-sql-driver's is sent to the server as a
// session variable (SET name=value), so it must be able to name one.
var paramName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// urlDialTimeout bounds each connection attempt unless the URL sets timeout.
const urlDialTimeout = 3 * time.Second

// urlError is a URL that cannot name a Store: it matches driver.ErrBadURL
// and shows the URL without its password.
type urlError struct{ desc, msg string }

func (e *urlError) Error() string { return fmt.Sprintf("mysqlstore: URL %q: %s", e.desc, e.msg) }

// Is reports whether target is driver.ErrBadURL.
func (e *urlError) Is(target error) bool { return target == driver.ErrBadURL }

// urlStore is a Store opened from a URL, with the *sql.DB it owns.
type urlStore struct {
	*Store
	db   *sql.DB
	desc string
}

// String is the URL without its password.
func (s *urlStore) String() string { return s.desc }

// Close closes the Store and its *sql.DB.
func (s *urlStore) Close() error {
	s.Store.Close()
	return s.db.Close()
}

// Ping checks that the server answers and accepts the credentials, and
// that the schema is usable.
func (s *urlStore) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return err
	}
	_, err := s.ready(ctx)
	return err
}

// openURL opens a Store from a mysql:// URL. It makes no network call
// unless the URL asks for leash_migrate.
func openURL(ctx context.Context, rawURL string) (driver.StoreCloser, error) {
	cfg, opts, migrate, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, &urlError{driver.Redact(rawURL), err.Error()}
	}
	db := sql.OpenDB(conn)
	s := &urlStore{Store: New(db, opts), db: db, desc: driver.Redact(rawURL)}
	if err := s.Validate(); err != nil {
		db.Close()
		return nil, &urlError{s.desc, err.Error()}
	}
	if migrate {
		if err := s.Migrate(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// parseURL turns mysql://[user[:password]@]host[:port]/dbname[?params] into
// a go-sql-driver configuration and the Store's Options.
func parseURL(raw string) (*mysql.Config, *Options, bool, error) {
	desc := driver.Redact(raw)
	bad := func(format string, args ...any) (*mysql.Config, *Options, bool, error) {
		return nil, nil, false, &urlError{desc, fmt.Sprintf(format, args...)}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("not a URL")
	}
	if !strings.EqualFold(u.Scheme, URLScheme) {
		return bad("scheme %q: want %s://", u.Scheme, URLScheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("no host: write it as mysql://[user[:password]@]host[:port]/dbname")
	}
	if u.Fragment != "" {
		return bad("a fragment (#…) means nothing here")
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return bad("no host: write it as mysql://[user[:password]@]host[:port]/dbname")
	}
	if port == "" {
		port = "3306"
	} else if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return bad("port %q is not a TCP port", port)
	}
	dbname := strings.TrimPrefix(u.Path, "/")
	if dbname == "" || strings.Contains(dbname, "/") {
		return bad("the path must be the database: mysql://host/dbname")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("query: %v", err)
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case len(q[k]) > 1:
			return bad("parameter %s is given %d times: want it once", k, len(q[k]))
		case !paramName.MatchString(k):
			// Unknown parameters go to the server as session variables
			// (SET name=value): this one cannot name one.
			return bad("parameter %q is neither leash's, the driver's nor a possible system variable name", k)
		}
	}
	opts := &Options{Table: q.Get(paramTable)}
	if q.Has(paramTable) && opts.Table == "" {
		return bad("%s is empty", paramTable)
	}
	var migrate bool
	if v := q.Get(paramMigrate); q.Has(paramMigrate) {
		if migrate, err = strconv.ParseBool(v); err != nil {
			return bad("%s=%q: want true or false", paramMigrate, v)
		}
	}
	q.Del(paramTable)
	q.Del(paramMigrate)
	// go-sql-driver parses its own parameters (tls, charset, timeout,
	// readTimeout, …, and session variables such as time_zone) from the
	// DSN; the credentials are set apart, so that no character of a
	// password can confuse the DSN's syntax.
	dsn := "tcp(" + net.JoinHostPort(host, port) + ")/"
	if len(q) > 0 {
		dsn += "?" + q.Encode()
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return bad("%v", err)
	}
	cfg.DBName = dbname
	if !q.Has("timeout") {
		cfg.Timeout = urlDialTimeout
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	if err := checkTable("leash_table", opts.Table); opts.Table != "" && err != nil {
		return bad("%v", err)
	}
	return cfg, opts, migrate, nil
}
