package redisstore

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

func TestParseGrant(t *testing.T) {
	for name, tc := range map[string]struct {
		in      any
		want    driver.Grant
		wantErr bool
	}{
		"fresh grant":        {[]any{int64(1), int64(1700000000000001), int64(1)}, driver.Grant{Acquired: true, Fence: 1700000000000001}, false},
		"re-entry":           {[]any{int64(1), int64(9), int64(3)}, driver.Grant{Acquired: true, Fence: 9}, false},
		"held with pttl":     {[]any{int64(0), int64(2500)}, driver.Grant{Remaining: 2500 * time.Millisecond}, false},
		"held without ttl":   {[]any{int64(0), int64(-1)}, driver.Grant{Remaining: -1}, false},
		"not an array":       {int64(1), driver.Grant{}, true},
		"empty":              {[]any{}, driver.Grant{}, true},
		"string element":     {[]any{int64(1), "9", int64(1)}, driver.Grant{}, true},
		"zero token":         {[]any{int64(1), int64(0), int64(1)}, driver.Grant{}, true},
		"acquired too short": {[]any{int64(1), int64(5)}, driver.Grant{}, true},
		"unknown status":     {[]any{int64(7), int64(5)}, driver.Grant{}, true},
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
	const now = 1_000_000
	for name, tc := range map[string]struct {
		in   []any
		want driver.Info
	}{
		"mutex": {[]any{"hash", []any{"uuid:1", "2"}, int64(1500), "1234", int64(now), []any{}, int64(0), nil},
			driver.Info{Name: "x", Kind: driver.KindMutex, Held: true, Remaining: 1500 * time.Millisecond, Fence: 1234,
				Owners: []driver.OwnerHolds{{Owner: "uuid:1", Holds: 2, Kind: driver.KindMutex, Remaining: -1}}}},
		"readers and a queued writer": {[]any{"hash", []any{"mode", "read"}, int64(900), "7", int64(now),
			[]any{"r:1", "1000500", "r:2", "1000900", "r:3", "999999"}, int64(1), nil},
			driver.Info{Name: "x", Kind: driver.KindRead, Held: true, Remaining: 900 * time.Millisecond, Fence: 7, Queued: 1,
				Owners: []driver.OwnerHolds{{Owner: "r:1", Holds: 1, Kind: driver.KindRead, Remaining: 500 * time.Millisecond},
					{Owner: "r:2", Holds: 1, Kind: driver.KindRead, Remaining: 900 * time.Millisecond}}}},
		"semaphore": {[]any{"zset", []any{"p:1", "1002000"}, int64(2000), "9", int64(now), []any{}, int64(0), "3"},
			driver.Info{Name: "x", Kind: driver.KindPermit, Held: true, Remaining: 2 * time.Second, Fence: 9, Permits: 3,
				Owners: []driver.OwnerHolds{{Owner: "p:1", Holds: 1, Kind: driver.KindPermit, Remaining: 2 * time.Second}}}},
		"absent": {[]any{"none", []any{}, int64(-2), nil, int64(now), []any{}, int64(0), nil},
			driver.Info{Name: "x", Remaining: -1}},
	} {
		got, err := parseInfo("x", tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: parseInfo = %+v, %v;\nwant %+v", name, got, err, tc.want)
		}
	}
	for name, bad := range map[string][]any{
		"a Redis list":      {"list", []any{}, int64(-1), nil, int64(now), []any{}, int64(0), nil},
		"a non-lock hash":   {"hash", []any{"name", "bob"}, int64(-1), nil, int64(now), []any{}, int64(0), nil},
		"odd fields":        {"hash", []any{"uuid:1"}, int64(1), nil, int64(now), []any{}, int64(0), nil},
		"bad token":         {"none", []any{}, int64(-2), "abc", int64(now), []any{}, int64(0), nil},
		"bad mode":          {"hash", []any{"mode", "both"}, int64(1), nil, int64(now), []any{}, int64(0), nil},
		"short reply":       {"hash", []any{}},
		"pttl not a number": {"hash", []any{}, "1", nil, int64(now), []any{}, int64(0), nil},
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
		if g.Acquired && g.Fence <= 0 {
			t.Errorf("accepted incoherent grant %+v from %#v", g, in)
		}
		if !g.Acquired && g.Remaining < -1 {
			t.Errorf("accepted negative remaining %v from %#v", g.Remaining, in)
		}
	})
}

func FuzzParseInfo(f *testing.F) {
	f.Add("hash", "uuid:1\x002", int64(1500), "12", true, "r:1\x001000500", int64(1000000))
	f.Add("zset", "p:1\x001002000", int64(-1), "", false, "", int64(1000000))
	f.Add("none", "", int64(-2), "", false, "", int64(0))
	f.Fuzz(func(t *testing.T, typ, contents string, pttl int64, token string, hasToken bool, readers string, now int64) {
		split := func(s string) []any {
			var out []any
			if s != "" {
				for _, p := range strings.Split(s, "\x00") {
					out = append(out, p)
				}
			}
			return out
		}
		var tok any
		if hasToken {
			tok = token
		}
		info, err := parseInfo("x", []any{typ, split(contents), pttl, tok, now, split(readers), int64(0), nil})
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
			if s != driver.Renewed && s != driver.RenewGone && s != driver.RenewTaken {
				t.Errorf("accepted status %d", s)
			}
		}
		if _, err := parseRenew(in, len(in)+1); err == nil {
			t.Errorf("accepted a reply of the wrong length")
		}
	})
}
