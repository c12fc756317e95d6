package memstore_test

import (
	"testing"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/storetest"
)

func TestConformance(t *testing.T) {
	s := memstore.New()
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}

func TestConformanceSessions(t *testing.T) {
	s := memstore.NewSessions()
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}

// TestSessionStoreOnlyByNewSessions checks that only NewSessions makes a
// driver.SessionStore, which the core would renew by keep-alive alone.
func TestSessionStoreOnlyByNewSessions(t *testing.T) {
	for name, tc := range map[string]struct {
		store driver.Store
		want  bool
	}{
		"New":         {memstore.New(), false},
		"NewSessions": {memstore.NewSessions(), true},
	} {
		t.Run(name, func(t *testing.T) {
			if _, got := tc.store.(driver.SessionStore); got != tc.want {
				t.Errorf("%s() is a driver.SessionStore: %v, want %v", name, got, tc.want)
			}
		})
	}
}
