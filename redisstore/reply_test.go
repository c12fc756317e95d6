package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
)

func TestParseGrant(t *testing.T) {
	for name, tc := range map[string]struct {
		in      any
		want    leash.Grant
		wantErr bool
	}{
		"fresh grant":        {[]any{int64(1), int64(1700000000000001), int64(1)}, leash.Grant{Acquired: true, Fence: 1700000000000001, Holds: 1}, false},
		"re-entry":           {[]any{int64(1), int64(9), int64(3)}, leash.Grant{Acquired: true, Fence: 9, Holds: 3}, false},
		"held with pttl":     {[]any{int64(0), int64(2500)}, leash.Grant{Remaining: 2500 * time.Millisecond}, false},
		"held without ttl":   {[]any{int64(0), int64(-1)}, leash.Grant{Remaining: -1}, false},
		"not an array":       {int64(1), leash.Grant{}, true},
		"empty":              {[]any{}, leash.Grant{}, true},
		"string element":     {[]any{int64(1), "9", int64(1)}, leash.Grant{}, true},
		"zero token":         {[]any{int64(1), int64(0), int64(1)}, leash.Grant{}, true},
		"acquired too short": {[]any{int64(1), int64(5)}, leash.Grant{}, true},
		"unknown status":     {[]any{int64(7), int64(5)}, leash.Grant{}, true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseGrant(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseGrant(%#v) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestParseInfo(t *testing.T) {
	in := []any{[]any{"uuid:1", "2"}, int64(1500), "1234"}
	got, err := parseInfo("x", in)
	if err != nil || !got.Held || len(got.Owners) != 1 || got.Owners[0] != (leash.OwnerHolds{Owner: "uuid:1", Holds: 2}) ||
		got.Remaining != 1500*time.Millisecond || got.Fence != 1234 {
		t.Errorf("parseInfo = %+v, %v", got, err)
	}
	for name, bad := range map[string]any{
		"not a hash":      []any{[]any{"mode", "write", "uuid:1:write", "x"}, int64(1), nil},
		"odd fields":      []any{[]any{"uuid:1"}, int64(1), nil},
		"bad token":       []any{[]any{}, int64(-2), "abc"},
		"missing pttl":    []any{[]any{}},
		"pttl not an int": []any{[]any{}, "1", nil},
	} {
		if _, err := parseInfo("x", bad); err == nil {
			t.Errorf("parseInfo(%s) = nil error", name)
		}
	}
}

// FuzzParseGrant feeds the parser arbitrary replies of the shapes Redis can
// produce; it must never panic, and anything it accepts must be coherent.
func FuzzParseGrant(f *testing.F) {
	f.Add(uint8(3), int64(1), int64(5), int64(1), "")
	f.Add(uint8(2), int64(0), int64(100), int64(0), "")
	f.Add(uint8(3), int64(1), int64(-5), int64(0), "x")
	f.Fuzz(func(t *testing.T, n uint8, a, b, c int64, s string) {
		elems := []any{a, b, c, s}
		var in any = elems[:int(n)%5]
		if n > 200 {
			in = s
		}
		g, err := parseGrant(in)
		if err != nil {
			return
		}
		if g.Acquired && (g.Fence <= 0 || g.Holds <= 0) {
			t.Errorf("accepted incoherent grant %+v from %#v", g, in)
		}
		if !g.Acquired && g.Remaining < -1 {
			t.Errorf("accepted negative remaining %v from %#v", g.Remaining, in)
		}
	})
}

func FuzzParseInfo(f *testing.F) {
	f.Add("uuid:1\x002", int64(1500), "12", true)
	f.Add("", int64(-2), "", false)
	f.Fuzz(func(t *testing.T, fields string, pttl int64, token string, hasToken bool) {
		var fs []any
		if fields != "" {
			for _, p := range strings.Split(fields, "\x00") {
				fs = append(fs, p)
			}
		}
		var tok any
		if hasToken {
			tok = token
		}
		info, err := parseInfo("x", []any{fs, pttl, tok})
		if err != nil {
			return
		}
		if info.Held != (len(info.Owners) > 0) {
			t.Errorf("Held %v with owners %v", info.Held, info.Owners)
		}
		if !info.Held && info.Remaining != -1 {
			t.Errorf("free lock with remaining %v", info.Remaining)
		}
	})
}

func FuzzParseRenew(f *testing.F) {
	f.Add(uint8(3), int64(1), int64(0), int64(2))
	f.Fuzz(func(t *testing.T, n uint8, a, b, c int64) {
		in := []any{a, b, c}[:int(n)%4]
		st, err := parseRenew(in, len(in))
		if err != nil {
			return
		}
		for _, s := range st {
			if s != leash.Renewed && s != leash.RenewGone && s != leash.RenewTaken {
				t.Errorf("accepted status %d", s)
			}
		}
		if _, err := parseRenew(in, len(in)+1); err == nil {
			t.Errorf("accepted a reply of the wrong length")
		}
	})
}
