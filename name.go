package leash

import (
	"fmt"

	"github.com/leash-go/leash/driver"
)

// MaxNameLen is the longest lock name leash accepts, in bytes.
const MaxNameLen = 512

// ValidateName reports whether name is a valid lock name for every store: 1
// to MaxNameLen bytes of UTF-8 without control characters. A store may accept
// fewer names (see [driver.NameChecker]). The error matches ErrInvalidName.
func ValidateName(name string) error {
	if err := validText(name, MaxNameLen); err != nil {
		return fmt.Errorf("%w %q %s", ErrInvalidName, truncate(name), err)
	}
	return nil
}

// checkName runs ValidateName and the store's own rules.
func checkName(s driver.Store, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if nc, ok := s.(driver.NameChecker); ok {
		if err := nc.CheckName(name); err != nil {
			return fmt.Errorf("%w %q: %w", ErrInvalidName, truncate(name), err)
		}
	}
	return nil
}
