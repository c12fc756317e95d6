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

func openURL(_ context.Context, u *url.URL) (driver.StoreCloser, error) {
	if u.Opaque != "" || u.User != nil || u.Port() != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("memstore: URL %q: want mem:// or mem://<name>, with no user, port, path or query", u.Redacted())
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

// opened is a named Store as Open returns it: closing it keeps the locks,
// which other Opens of the same URL share.
type opened struct{ *Store }

func (opened) Close() error { return nil }
