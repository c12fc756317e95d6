package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leash-go/leash/driver"
)

// init registers the package's URL schemes (see "Opening by URL" in the
// package doc).
func init() {
	for _, s := range urlSchemes {
		driver.Register(s, openURL)
	}
}

// urlSchemes are the URL schemes the package registers, pgx's own.
var urlSchemes = [...]string{"postgres", "postgresql"}

// URLSchemes returns the URL schemes importing the package registers with
// driver.Register: postgres and postgresql.
func URLSchemes() []string { return urlSchemes[:] }

// The Store's own URL query parameters, taken out before pgx parses the URL
// (pgx would send an unknown parameter to the server as a setting, which
// the server refuses).
const (
	paramSchema = "leash_schema"
	paramTable  = "leash_table"
	paramBatch  = "leash_batch_size"
)

// URLParams returns the query parameters of the Store's own that its URLs
// accept beside pgx's: leash_schema, leash_table and leash_batch_size.
func URLParams() []string { return []string{paramSchema, paramTable, paramBatch} }

// urlConnectTimeout bounds each connection attempt of a Store opened by URL
// unless the URL sets connect_timeout.
const urlConnectTimeout = 5 * time.Second

// openURL is the driver.Opener of the package's schemes. It creates a pool
// (which connects on first use) and a Store on it; a URL that cannot name a
// Store is an error that matches driver.ErrBadURL.
func openURL(ctx context.Context, rawURL string) (driver.StoreCloser, error) {
	cfg, opts, desc, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open %s: %s", desc, redactIn(err.Error(), cfg.ConnConfig.Password))
	}
	s := &urlStore{Store: New(pool, opts), desc: desc}
	if err := s.Validate(); err != nil {
		s.Close()
		return nil, &urlError{desc, strings.TrimPrefix(err.Error(), "pgstore: ")}
	}
	return s, nil
}

// parseURL splits the Store's own parameters from a postgres:// URL and
// has pgx parse the rest. It makes no network call.
func parseURL(raw string) (*pgxpool.Config, *Options, string, error) {
	desc := driver.Redact(raw)
	scheme, _, _ := strings.Cut(raw, ":")
	if !strings.EqualFold(scheme, "postgres") && !strings.EqualFold(scheme, "postgresql") {
		return nil, nil, desc, &urlError{desc, fmt.Sprintf("unsupported scheme %q: use postgres:// or postgresql://", scheme)}
	}
	u, err := url.Parse(raw)
	if err != nil {
		if _, err2 := url.Parse(strings.Replace(raw, userInfo(raw), "", 1)); err2 == nil {
			return nil, nil, desc, &urlError{desc, "bad user information: percent-encode the reserved characters of the user name and password"}
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, nil, desc, &urlError{desc, err.Error()}
	}
	if u.Fragment != "" {
		return nil, nil, desc, &urlError{desc, "unexpected #fragment"}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, nil, desc, &urlError{desc, "query: " + err.Error()}
	}
	opts := &Options{}
	var problems []string
	take := func(name string) string {
		vs := q[name]
		q.Del(name)
		if len(vs) > 1 {
			problems = append(problems, fmt.Sprintf("%s given %d times: give it once", name, len(vs)))
		}
		if len(vs) == 0 {
			return ""
		}
		return vs[0]
	}
	opts.Schema, opts.Table = take(paramSchema), take(paramTable)
	if b := take(paramBatch); b != "" {
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 || n > MaxBatchSize {
			problems = append(problems, fmt.Sprintf("%s=%s: want a count from 1 to %d", paramBatch, b, MaxBatchSize))
		}
		opts.BatchSize = n
	}
	for name := range q {
		if strings.HasPrefix(name, "leash_") {
			problems = append(problems, fmt.Sprintf("unknown parameter %s: the store's own are %s", name, strings.Join(URLParams(), ", ")))
		}
	}
	if len(problems) > 0 {
		return nil, nil, desc, &urlError{desc, strings.Join(problems, "; ")}
	}
	_, hasTimeout := q["connect_timeout"]
	u.RawQuery = q.Encode()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		pw, _ := u.User.Password()
		msg := redactIn(err.Error(), pw)
		// pgx says "cannot parse `URL`: reason": keep the reason.
		if i := strings.Index(msg, "`: "); i >= 0 {
			msg = msg[i+3:]
		}
		return nil, nil, desc, &urlError{desc, msg}
	}
	if !hasTimeout {
		cfg.ConnConfig.ConnectTimeout = urlConnectTimeout
	}
	return cfg, opts, desc, nil
}

// userInfo returns the user information of a URL with its "@", or "".
func userInfo(raw string) string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		return authority[:at+1]
	}
	return ""
}

// redactIn hides password in a message, as well as what driver.Redact hides.
func redactIn(msg, password string) string {
	if password != "" {
		msg = strings.ReplaceAll(msg, password, "xxxxx")
		msg = strings.ReplaceAll(msg, url.QueryEscape(password), "xxxxx")
		msg = strings.ReplaceAll(msg, url.PathEscape(password), "xxxxx")
	}
	return driver.Redact(msg)
}

// urlError is the error for a URL that cannot name a Store: it matches
// driver.ErrBadURL.
type urlError struct {
	// desc is the URL without passwords; msg says what is wrong with it.
	desc, msg string
}

func (e *urlError) Error() string { return fmt.Sprintf("pgstore: URL %q: %s", e.desc, e.msg) }

// Is reports whether target is driver.ErrBadURL.
func (e *urlError) Is(target error) bool { return target == driver.ErrBadURL }

// urlStore is a Store opened by URL: it owns its pool.
type urlStore struct {
	*Store
	desc      string
	closeOnce sync.Once
}

// String is the store's URL, without passwords.
func (s *urlStore) String() string { return s.desc }

// Close closes the Store and then its pool.
func (s *urlStore) Close() error {
	s.closeOnce.Do(func() {
		_ = s.Store.Close()
		s.pool.Close()
	})
	return nil
}

// Ping checks that the server answers and accepts the credentials, and that
// the tables are ready (Check): a Store opened by URL does not create them;
// the error says how.
func (s *urlStore) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return s.Check(ctx)
}
