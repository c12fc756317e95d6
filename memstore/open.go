package memstore

import (
	"context"
	"fmt"
	"net/url"
	"sync"

	"github.com/leash-go/leash/driver"
)

// Importing memstore registers the "mem" URL scheme (see driver.Open):
// "mem://" and "mem://<name>" open the process's in-memory store of that
// name, created on first use and shared by every Open of the same URL in the
// process. It locks nothing across processes; the leash CLI accepts it for
// trying commands without a server.
func init() { driver.Register("mem", openURL) }

var named struct {
	sync.Mutex
	stores map[string]*Store
}

// openURL is the "mem" scheme's driver.Opener. Its errors match
// driver.ErrBadURL.
func openURL(_ context.Context, rawURL string) (driver.StoreCloser, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Opaque != "" || u.User != nil || u.Port() != "" || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, badURLError{driver.Redact(rawURL)}
	}
	named.Lock()
	defer named.Unlock()
	if named.stores == nil {
		named.stores = make(map[string]*Store)
	}
	s := named.stores[u.Host]
	if s == nil {
		s = New()
		named.stores[u.Host] = s
	}
	return opened{s}, nil
}

// badURLError is the error for a URL that is not mem:// or mem://<name>.
type badURLError struct{ url string }

func (e badURLError) Error() string {
	return fmt.Sprintf("memstore: URL %q: want mem:// or mem://<name>, with no user, port, path, query or fragment", e.url)
}

// Is reports whether target is driver.ErrBadURL.
func (e badURLError) Is(target error) bool { return target == driver.ErrBadURL }

// opened is a named Store as Open returns it: closing it keeps the locks,
// which other Opens of the same URL share.
type opened struct{ *Store }

func (opened) Close() error { return nil }
