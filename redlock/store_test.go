package redlock_test

import (
	"errors"
	"testing"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
	"github.com/leash-go/leash/redlock"
	"github.com/leash-go/leash/storetest"
)

// newQuorum returns a Store over n fresh memstores.
func newQuorum(t *testing.T, n int, opts *redlock.Options) (*redlock.Store, []driver.Store) {
	t.Helper()
	ms := make([]driver.Store, n)
	for i := range ms {
		ms[i] = memstore.New()
	}
	s, err := redlock.New(ms, opts)
	if err != nil {
		t.Fatalf("redlock.New(%d members) = %v", n, err)
	}
	return s, ms
}

func TestConformanceMemstores(t *testing.T) {
	s, _ := newQuorum(t, 3, nil)
	storetest.Run(t, func(t *testing.T) driver.Store { return s })
}

func TestNewRefusesBadInput(t *testing.T) {
	m1, m2, m3, m4 := memstore.New(), memstore.New(), memstore.New(), memstore.New()
	for name, tc := range map[string]struct {
		members []driver.Store
		opts    *redlock.Options
		want    error
	}{
		"no members":            {nil, nil, leash.ErrInvalidArgument},
		"one member":            {[]driver.Store{m1}, nil, leash.ErrInvalidArgument},
		"two members":           {[]driver.Store{m1, m2}, nil, leash.ErrInvalidArgument},
		"an even number":        {[]driver.Store{m1, m2, m3, m4}, nil, leash.ErrInvalidArgument},
		"a member twice":        {[]driver.Store{m1, m2, m1}, nil, leash.ErrInvalidArgument},
		"a nil member":          {[]driver.Store{m1, nil, m3}, nil, leash.ErrInvalidArgument},
		"a typed nil member":    {[]driver.Store{m1, (*memstore.Store)(nil), m3}, nil, leash.ErrInvalidArgument},
		"negative drift factor": {[]driver.Store{m1, m2, m3}, &redlock.Options{DriftFactor: -0.5}, leash.ErrInvalidOptions},
		"drift factor too big":  {[]driver.Store{m1, m2, m3}, &redlock.Options{DriftFactor: 0.5}, leash.ErrInvalidOptions},
		"negative fixed drift":  {[]driver.Store{m1, m2, m3}, &redlock.Options{DriftFixed: -1}, leash.ErrInvalidOptions},
		"negative timeout":      {[]driver.Store{m1, m2, m3}, &redlock.Options{MemberTimeout: -1}, leash.ErrInvalidOptions},
	} {
		t.Run(name, func(t *testing.T) {
			if s, err := redlock.New(tc.members, tc.opts); !errors.Is(err, tc.want) || s != nil {
				t.Errorf("New = %v, %v; want an error matching %v", s, err, tc.want)
			}
		})
	}
}
