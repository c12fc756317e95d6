package leash

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// MaxOwnerLen is the longest explicit owner [WithOwner] accepts, in bytes.
const MaxOwnerLen = 128

// newClientID returns 128 random bits from crypto/rand in the 8-4-4-4-12 form
// that Redisson uses for its client ids.
func newClientID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never returns an error (crypto/rand docs)
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}

// tenureOwner is the store owner of the n-th anonymous tenure of a client:
// "<client-id>:<n>", the shape of Redisson's "<uuid>:<thread id>".
func tenureOwner(clientID string, n uint64) string {
	return clientID + ":" + strconv.FormatUint(n, 10)
}

// explicitOwner is the store owner of the n-th tenure of a client, when that
// tenure is for an owner set with WithOwner: "<client-id>:<n>@<owner>". The
// number makes every tenure's store owner unique, as an anonymous one's is,
// so that nothing addressed to an ended tenure (a release still in flight or
// retried in the background, a transport retry) can touch the next tenure of
// the same owner: re-entry by owner is the Client's registry's job, never
// the store's.
func explicitOwner(clientID string, n uint64, owner string) string {
	return tenureOwner(clientID, n) + "@" + owner
}

// validText checks the rules shared by names and owners: non-empty, at most
// max bytes, valid UTF-8, no control characters.
func validText(s string, max int) error {
	switch {
	case s == "":
		return errorString("must not be empty")
	case len(s) > max:
		return errorString(fmt.Sprintf("is %d bytes long; the limit is %d", len(s), max))
	case !utf8.ValidString(s):
		return errorString("is not valid UTF-8")
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return errorString(fmt.Sprintf("has a control character %U at byte %d", r, i))
		}
	}
	return nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

// truncate shortens s for an error message.
func truncate(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	for i := n; i > n-4; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i] + "…"
		}
	}
	return s[:n] + "…"
}
