package driver

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// An Opener opens a store from a URL whose scheme it was registered for.
// The store it returns owns what it opened (connections, clients) and
// releases it on Close.
type Opener func(ctx context.Context, u *url.URL) (StoreCloser, error)

// StoreCloser is a store opened by URL: Close releases its connections.
type StoreCloser interface {
	Store
	io.Closer
}

var registry struct {
	sync.RWMutex
	openers map[string]Opener
}

// Register makes a store openable by URLs of scheme ("redis", "mem"). A
// store module calls it from its init function. It panics when scheme is
// already registered or open is nil, like database/sql.Register.
func Register(scheme string, open Opener) {
	registry.Lock()
	defer registry.Unlock()
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

// Open opens the store rawURL names, by its scheme. An unknown scheme is an
// error that lists the registered ones: a store module registers its scheme
// when it is imported (for example with a blank import).
func Open(ctx context.Context, rawURL string) (StoreCloser, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("driver: store URL: %w", err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("driver: store URL %q has no scheme (want one of %s)", redact(u), strings.Join(Schemes(), ", "))
	}
	registry.RLock()
	open := registry.openers[strings.ToLower(u.Scheme)]
	registry.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("driver: no store for %q URLs (registered: %s)", u.Scheme, strings.Join(Schemes(), ", "))
	}
	return open(ctx, u)
}

// redact is u without its password, for messages.
func redact(u *url.URL) string { return u.Redacted() }
