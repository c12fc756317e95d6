package driver

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// An Opener opens a store from rawURL, a URL whose scheme it was registered
// for, exactly as the caller wrote it: the opener parses it, so that it may
// accept what net/url refuses (a host list with IPv6 addresses, say). The
// store it returns owns what it opened (connections, clients) and releases
// it on Close.
//
// An opener's errors never show the URL's passwords ([Redact] hides them).
// For a URL that cannot name a store whatever the server does — malformed,
// an unknown or repeated parameter, a bad parameter value, a file it names
// that cannot be read — it returns an error that matches [ErrBadURL]; any
// other error (a server it could not reach, say) means the URL may be right.
type Opener func(ctx context.Context, rawURL string) (StoreCloser, error)

// StoreCloser is a store opened by URL: Close releases its connections.
type StoreCloser interface {
	Store
	io.Closer
}

var registry struct {
	sync.RWMutex
	openers map[string]Opener
}

// Register makes a store openable by URLs of scheme ("redis", "mem"),
// matched without regard to case. A store module calls it from its init
// function. It panics when scheme is already registered or is not a URL
// scheme (RFC 3986: a letter, then letters, digits, "+", "-" and "."), or
// when open is nil, like database/sql.Register.
func Register(scheme string, open Opener) {
	registry.Lock()
	defer registry.Unlock()
	if !validScheme(scheme) {
		panic(fmt.Sprintf("driver: Register of %q, which is not a URL scheme", scheme))
	}
	scheme = strings.ToLower(scheme)
	if open == nil {
		panic("driver: Register of a nil Opener for " + scheme)
	}
	if _, dup := registry.openers[scheme]; dup {
		panic("driver: Register called twice for scheme " + scheme)
	}
	if registry.openers == nil {
		registry.openers = make(map[string]Opener)
	}
	registry.openers[scheme] = open
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	s := make([]string, 0, len(registry.openers))
	for k := range registry.openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open opens the store rawURL names, by its scheme: it takes the scheme (the
// text before the first ":", without regard to case) and hands rawURL, as
// written, to the Opener registered for it. A URL without a scheme, and one
// whose scheme no store registered, is an error that matches [ErrBadURL]
// and lists the registered schemes: a store module registers its schemes
// when it is imported (for example with a blank import). The opener's
// errors are returned as they are (see [Opener]). No error shows the URL's
// password.
func Open(ctx context.Context, rawURL string) (StoreCloser, error) {
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok || !validScheme(scheme) {
		return nil, &badURLError{fmt.Sprintf("driver: store URL %q has no scheme: write it as scheme://…, with a scheme of %s", Redact(rawURL), strings.Join(Schemes(), ", "))}
	}
	registry.RLock()
	open := registry.openers[strings.ToLower(scheme)]
	registry.RUnlock()
	if open == nil {
		return nil, &badURLError{fmt.Sprintf("driver: no store for %q URLs (registered: %s)", scheme, strings.Join(Schemes(), ", "))}
	}
	return open(ctx, rawURL)
}

// validScheme reports whether s is a URL scheme by RFC 3986: a letter, then
// letters, digits, "+", "-" and ".".
func validScheme(s string) bool {
	for i, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// badURLError is driver.Open's own error for a URL it cannot hand to any
// opener: it matches ErrBadURL.
type badURLError struct{ msg string }

func (e *badURLError) Error() string        { return e.msg }
func (e *badURLError) Is(target error) bool { return target == ErrBadURL }

// passwordParam finds the values of query parameters whose name ends in
// "password" (password, sentinel_password).
var passwordParam = regexp.MustCompile(`(?i)((?:^|[?&;])[^=&;?#]*password=)[^&;#]*`)

// redacted replaces a password in messages.
const redacted = "xxxxx"

// Redact returns rawURL for messages: its user information's password, and
// the value of every query parameter whose name ends in "password", replaced
// by "xxxxx". It works on any text, URL or not, and where it cannot tell
// where a password ends — in a malformed URL whose password holds "/", "?"
// or "#" — it hides too much rather than too little.
// An opener whose URLs carry other secrets (a ZooKeeper digest, a token
// parameter) hides them in its own messages.
func Redact(rawURL string) string {
	prefix, rest := "", rawURL
	if i := strings.Index(rawURL, "://"); i >= 0 {
		prefix, rest = rawURL[:i+3], rawURL[i+3:]
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	userEnd := strings.LastIndexByte(authority, '@')
	if userEnd < 0 && strings.Contains(authority, ":") && !hostList(authority) {
		// "u:pa/ss@h": "u:pa" is no host list, so the user information
		// runs to the last "@" of all.
		userEnd = strings.LastIndexByte(rest, '@')
	}
	if userEnd >= 0 {
		if colon := strings.IndexByte(rest[:userEnd], ':'); colon >= 0 {
			prefix += rest[:colon+1] + redacted
			rest = rest[userEnd:]
		}
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	return prefix + rest[:end] + passwordParam.ReplaceAllString(rest[end:], "${1}"+redacted)
}

// hostList reports whether s looks like a comma-separated list of hosts,
// each with an optional numeric port: "a", "a:1,b:2", "[::1]:6379".
func hostList(s string) bool {
	for h := range strings.SplitSeq(s, ",") {
		if strings.HasPrefix(h, "[") {
			end := strings.IndexByte(h, ']')
			if end < 0 {
				return false
			}
			h = "x" + h[end+1:]
		}
		if _, port, hasPort := strings.Cut(h, ":"); hasPort && (port == "" || strings.Trim(port, "0123456789") != "") {
			return false
		}
	}
	return true
}
