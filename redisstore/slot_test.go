package redisstore

import (
	"slices"
	"testing"

	"github.com/leash-go/leash"
)

func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":                        0x31C3 % 16384, // the CRC16/XMODEM check value
		"foo":                              12182,          // from the Redis Cluster specification
		"{user1000}.following":             slot("user1000"),
		"redisson_lock_token:{orders:42}":  slot("orders:42"),
		"redisson_lock__channel:{a}":       slot("a"),
		"{}.empty-tag-hashes-the-whole":    int(crc16("{}.empty-tag-hashes-the-whole") % 16384),
		"prefix:{orders}:42":               slot("orders"),
		"redisson_lock_token:x{orders}:42": slot("x{orders}:42"),
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestCompanionKeysShareSlot checks that every companion key of every name
// CheckName accepts lands in the lock's own slot.
func TestCompanionKeysShareSlot(t *testing.T) {
	s := &Store{}
	for _, name := range []string{"orders:42", "{orders}:42", "a{b}c}", "x{y}", "ünï", "{a}{b}"} {
		if err := s.CheckName(name); err != nil {
			t.Fatalf("CheckName(%q) = %v", name, err)
		}
		for _, k := range []string{tokenKey(name), channelName(name), latchKey(name, "id"), jobKey(name), jobRunsKey(name)} {
			if slot(k) != slot(name) {
				t.Errorf("name %q: companion %q in slot %d, lock in %d", name, k, slot(k), slot(name))
			}
		}
	}
}

func FuzzCompanionKeysShareSlot(f *testing.F) {
	for _, s := range []string{"orders:42", "{a}", "a}b", "a{b", "{}", "a{}b}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if leash.ValidateName(name) != nil || (&Store{}).CheckName(name) != nil {
			return // the core rejects it before any key is built
		}
		for _, k := range []string{tokenKey(name), channelName(name), latchKey(name, "id"), jobKey(name), jobRunsKey(name)} {
			if slot(k) != slot(name) {
				t.Errorf("name %q accepted, but companion %q is in slot %d, lock in %d", name, k, slot(k), slot(name))
			}
		}
	})
}

// TestCompanionsMatchPrefixName checks that the keys a script call builds in
// one allocation are those prefixName builds one by one, with and without a
// hash tag in the name.
func TestCompanionsMatchPrefixName(t *testing.T) {
	for _, name := range []string{"plain", "with{tag}", "{all}", "é/ü"} {
		prefixes := []string{tokenPrefix, fairQueuePrefix, fairPlacesPrefix, channelPrefix}
		got := companions([]string{"x"}, name, prefixes...)
		want := []string{"x"}
		for _, p := range prefixes {
			want = append(want, prefixName(p, name))
		}
		if !slices.Equal(got, want) {
			t.Errorf("companions(%q) = %q, want %q", name, got, want)
		}
		if got, want := releaseKeys(name, latchKey(name, "id")), []string{name, channelName(name), prefixName(latchPrefix, name) + ":id",
			fairQueueKey(name), fairPlacesKey(name), fairChannel(name), tokenKey(name)}; !slices.Equal(got, want) {
			t.Errorf("releaseKeys(%q) = %q, want %q", name, got, want)
		}
	}
}
