package leash_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/memstore"
)

func TestNewRejectsBadOptions(t *testing.T) {
	for name, tc := range map[string]struct {
		opts  leash.Options
		field string
	}{
		"lease below the minimum":            {leash.Options{Lease: time.Millisecond}, "Options.Lease"},
		"negative lease":                     {leash.Options{Lease: -time.Second}, "Options.Lease"},
		"lease above the maximum":            {leash.Options{Lease: leash.MaxLease + time.Second}, "Options.Lease"},
		"interval equal to the lease":        {leash.Options{Lease: time.Second, RenewInterval: time.Second}, "Options.RenewInterval"},
		"interval past lease minus margin":   {leash.Options{Lease: time.Second, RenewInterval: 960 * time.Millisecond}, "Options.RenewInterval"},
		"negative interval other than off":   {leash.Options{RenewInterval: -2}, "Options.RenewInterval"},
		"margin equal to the lease":          {leash.Options{Lease: time.Second, SafetyMargin: time.Second}, "Options.SafetyMargin"},
		"negative margin":                    {leash.Options{SafetyMargin: -time.Second}, "Options.SafetyMargin"},
		"negative max hold":                  {leash.Options{MaxHold: -2}, "Options.MaxHold"},
		"NoLimit max hold on the client":     {leash.Options{MaxHold: leash.NoLimit}, "NoLimit"},
		"negative liveness":                  {leash.Options{Liveness: -2}, "Options.Liveness"},
		"negative release timeout":           {leash.Options{ReleaseTimeout: -time.Second}, "Options.ReleaseTimeout"},
		"negative starvation other than off": {leash.Options{Starvation: -2}, "Options.Starvation"},
		"margin leaves no room for renewals": {leash.Options{Lease: time.Second, SafetyMargin: 700 * time.Millisecond}, "Options.RenewInterval"},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := leash.New(memstore.New(), &tc.opts)
			if err == nil {
				c.Close()
				t.Fatalf("New(%+v) = nil error, want ErrInvalidOptions", tc.opts)
			}
			if !errors.Is(err, leash.ErrInvalidOptions) || !errors.Is(err, leash.ErrInvalidArgument) {
				t.Errorf("New(%+v) = %v, want ErrInvalidOptions and ErrInvalidArgument", tc.opts, err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("New(%+v) = %q, want the message to name %s", tc.opts, err, tc.field)
			}
		})
	}
}

func TestNewAcceptsGoodOptions(t *testing.T) {
	for name, opts := range map[string]*leash.Options{
		"nil":           nil,
		"zero":          {},
		"fixed lease":   {Lease: time.Second, RenewInterval: leash.NoRenewal},
		"no starvation": {Starvation: leash.NoStarvation},
		"all set": {Lease: 2 * time.Second, RenewInterval: 500 * time.Millisecond, SafetyMargin: 100 * time.Millisecond,
			MaxHold: time.Minute, Liveness: 10 * time.Second, ReleaseTimeout: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, memstore.New(), opts)
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func TestNewRejectsNilStore(t *testing.T) {
	var typedNil *memstore.Store
	for name, s := range map[string]driver.Store{"nil": nil, "typed nil": typedNil} {
		t.Run(name, func(t *testing.T) {
			if _, err := leash.New(s, nil); !errors.Is(err, leash.ErrInvalidArgument) {
				t.Errorf("New(%s store) = %v, want ErrInvalidArgument", name, err)
			}
		})
	}
}

// TestBadInputMakesNoRoundTrip checks that names, owners and lock options
// are rejected with a typed error before the store is called.
func TestBadInputMakesNoRoundTrip(t *testing.T) {
	s := newFaultStore(t)
	c := newClient(t, s, nil)
	defer c.Close()
	s.noStore = true
	ctx := context.Background()
	for name, tc := range map[string]struct {
		m    *leash.Mutex
		ctx  context.Context
		want error
	}{
		"empty name":             {c.Mutex(""), ctx, leash.ErrInvalidName},
		"name too long":          {c.Mutex(strings.Repeat("n", leash.MaxNameLen+1)), ctx, leash.ErrInvalidName},
		"name not UTF-8":         {c.Mutex("bad\xff"), ctx, leash.ErrInvalidName},
		"name with a newline":    {c.Mutex("a\nb"), ctx, leash.ErrInvalidName},
		"name with a NUL":        {c.Mutex("a\x00b"), ctx, leash.ErrInvalidName},
		"empty owner":            {c.Mutex("ok"), leash.WithOwner(ctx, ""), leash.ErrInvalidArgument},
		"owner too long":         {c.Mutex("ok"), leash.WithOwner(ctx, strings.Repeat("o", leash.MaxOwnerLen+1)), leash.ErrInvalidArgument},
		"owner with a tab":       {c.Mutex("ok"), leash.WithOwner(ctx, "a\tb"), leash.ErrInvalidArgument},
		"lease too short":        {c.Mutex("ok", &leash.LockOptions{Lease: time.Millisecond}), ctx, leash.ErrInvalidOptions},
		"interval past lease":    {c.Mutex("ok", &leash.LockOptions{Lease: time.Second, RenewInterval: 2 * time.Second}), ctx, leash.ErrInvalidOptions},
		"two option structs":     {c.Mutex("ok", &leash.LockOptions{}, &leash.LockOptions{}), ctx, leash.ErrInvalidOptions},
		"negative liveness lock": {c.Mutex("ok", &leash.LockOptions{Liveness: -5}), ctx, leash.ErrInvalidOptions},
	} {
		t.Run(name, func(t *testing.T) {
			for _, op := range []func(context.Context) (*leash.Hold, error){tc.m.Lock, tc.m.TryLock} {
				h, err := op(tc.ctx)
				if h != nil || !errors.Is(err, tc.want) || !errors.Is(err, leash.ErrInvalidArgument) {
					t.Errorf("got %v, %v; want nil, %v", h, err, tc.want)
				}
			}
		})
	}
	for _, name := range []string{"", "a\nb"} {
		if _, err := c.Inspect(ctx, name); !errors.Is(err, leash.ErrInvalidName) {
			t.Errorf("Inspect(%q) = %v, want ErrInvalidName", name, err)
		}
		if _, err := c.ForceUnlock(ctx, name); !errors.Is(err, leash.ErrInvalidName) {
			t.Errorf("ForceUnlock(%q) = %v, want ErrInvalidName", name, err)
		}
	}
}

func TestLockOptionsInheritMode(t *testing.T) {
	// A client of fixed leases keeps fixed leases for a lock with its own lease.
	synctestRun(t, func(t *testing.T) {
		s := newFaultStore(t)
		c := newClient(t, s, &leash.Options{Lease: time.Second, RenewInterval: leash.NoRenewal})
		defer c.Close()
		h := mustLock(t, c.Mutex("fixed", &leash.LockOptions{Lease: 2 * time.Second}), context.Background())
		wantLost(t, h, leash.ReasonExpired)
		if n := s.renewCalls.Load(); n != 0 {
			t.Errorf("renewals of a fixed lease = %d, want 0", n)
		}
	})
}

// drifting is memstore with a drift allowance (a driver.Drifter), as a
// quorum of servers has.
type drifting struct {
	*memstore.Store
	frac float64
}

func (d drifting) Drift(lease time.Duration) time.Duration {
	return time.Duration(d.frac * float64(lease))
}

// A store's drift allowance raises the safety margin: the hold's validity
// ends that much before its lease; a renew interval the raised margin
// leaves no room for is refused, naming the store's allowance.
func TestDrifterRaisesTheMargin(t *testing.T) {
	const lease = 10 * time.Second
	c, err := leash.New(drifting{memstore.New(), 0.2}, &leash.Options{Lease: lease, SafetyMargin: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := time.Now()
	h, err := c.Mutex("x").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if v, most := h.ValidUntil(), time.Now().Add(lease-2*time.Second); v.After(most) {
		t.Errorf("ValidUntil = %v after the call began, want at most lease - drift (8s)", v.Sub(before))
	}
	_, err = leash.New(drifting{memstore.New(), 0.5}, &leash.Options{Lease: lease, RenewInterval: 6 * time.Second})
	if !errors.Is(err, leash.ErrInvalidOptions) || !strings.Contains(err.Error(), "drift allowance") {
		t.Errorf("New with an interval past lease - drift = %v, want ErrInvalidOptions naming the drift allowance", err)
	}
	_, err = c.Mutex("y", &leash.LockOptions{Lease: time.Second, RenewInterval: 900 * time.Millisecond}).Lock(t.Context())
	if !errors.Is(err, leash.ErrInvalidOptions) || !strings.Contains(err.Error(), "LockOptions.RenewInterval") {
		t.Errorf("Lock with a per-lock interval past lease - drift = %v, want ErrInvalidOptions naming LockOptions.RenewInterval", err)
	}
}
