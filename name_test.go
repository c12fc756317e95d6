package leash_test

import (
	"errors"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/leash-go/leash"
)

func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"orders:42", "", "a\nb", "\xff", "{tag}", "ünï ✓"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := leash.ValidateName(name)
		valid := name != "" && len(name) <= leash.MaxNameLen && utf8.ValidString(name)
		for _, r := range name {
			if unicode.IsControl(r) {
				valid = false
			}
		}
		if valid != (err == nil) {
			t.Errorf("ValidateName(%q) = %v, want valid=%v", name, err, valid)
		}
		if err != nil && (!errors.Is(err, leash.ErrInvalidName) || !errors.Is(err, leash.ErrInvalidArgument)) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName", name, err)
		}
	})
}
