package memstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leash-go/leash/driver"
	_ "github.com/leash-go/leash/memstore"
)

// TestOpenRefuses: a mem URL with anything but a name is an ErrBadURL that
// shows no password.
func TestOpenRefuses(t *testing.T) {
	const secret = "Pa55w0rd"
	for _, raw := range []string{
		"mem:opaque", "mem://u:" + secret + "@x", "mem://x:1", "mem://x/p", "mem://x?a=1", "mem://x?",
		"mem://x#f", "mem://x%zz", "mem://u:" + secret + "/@x", "MEM://[::1",
	} {
		s, err := driver.Open(context.Background(), raw)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) opened a store", raw)
			continue
		}
		if !errors.Is(err, driver.ErrBadURL) || !strings.Contains(err.Error(), "memstore: URL") || strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%q) = %v; want a memstore ErrBadURL without the password", raw, err)
		}
	}
}
