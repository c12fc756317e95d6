package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/pgstore"
)

// payload builds a notification payload as the Table+"_notify" function
// does.
func payload(group, wake byte, head, name string) string {
	return fmt.Sprintf("%c%c%d:%s%s", group, wake, len(head), head, name)
}

// FuzzPayload: any payload decodes without panicking, and one the server
// builds decodes to what it was built from, whatever the name and owner
// hold (':' and digits included).
func FuzzPayload(f *testing.F) {
	for _, s := range []string{"m10:job", "fh5:ownerjob/1", "*a0:x", "w", "pa99:short", "fh-1:x", "m1:"} {
		f.Add(s, "owner:1@x", "name:2")
	}
	f.Fuzz(func(t *testing.T, raw, head, name string) {
		pgstore.ParsePayload(raw) // must not panic
		for _, tc := range []struct {
			group, wake byte
			head        string
			want        driver.Wake
		}{
			{'m', '1', "", driver.Wake{To: driver.WakeOne}},
			{'*', 'a', "", driver.Wake{To: driver.WakeAll}},
			{'w', 'r', "", driver.Wake{To: driver.WakeReaders}},
			{'w', 'w', "", driver.Wake{To: driver.WakeWriter}},
			{'f', 'h', head, driver.Wake{To: driver.WakeHead, Head: head}},
		} {
			g, n, w, ok := pgstore.ParsePayload(payload(tc.group, tc.wake, tc.head, name))
			if !ok || g != tc.group || n != name || w != tc.want {
				t.Fatalf("ParsePayload(%q) = %c %q %+v %v, want %c %q %+v", payload(tc.group, tc.wake, tc.head, name), g, n, w, ok, tc.group, name, tc.want)
			}
		}
	})
}

// likeMatch matches s against a LIKE pattern with escape '\', as
// PostgreSQL does, for checking LikePattern.
func likeMatch(pattern, s string) bool {
	var re strings.Builder
	re.WriteString("^(?s:")
	for i := 0; i < len(pattern); {
		r, size := utf8.DecodeRuneInString(pattern[i:])
		i += size
		switch r {
		case '\\':
			r, size = utf8.DecodeRuneInString(pattern[i:])
			i += size
			re.WriteString(regexp.QuoteMeta(string(r)))
		case '%':
			re.WriteString(".*")
		case '_':
			re.WriteString(".")
		default:
			re.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	re.WriteString(")$")
	return regexp.MustCompile(re.String()).MatchString(s)
}

// FuzzLikePattern: the LIKE pattern List sends to the server matches a name
// whenever driver.Glob's pattern does (List then filters with Glob), so no
// listed lock is left out.
func FuzzLikePattern(f *testing.F) {
	for _, s := range [][2]string{{"a*", "abc"}, {`a\*b`, "a*b"}, {"?%_", "x%_"}, {`100\%`, "100%"}, {"*_*", "a_b"}, {`\\`, `\`}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, glob, name string) {
		if !utf8.ValidString(glob) || !utf8.ValidString(name) {
			return
		}
		re, err := driver.Glob(glob)
		if err != nil {
			return
		}
		if re.MatchString(name) && !likeMatch(pgstore.LikePattern(glob), name) {
			t.Fatalf("glob %q matches %q, its LIKE pattern %q does not", glob, name, pgstore.LikePattern(glob))
		}
	})
}

// FuzzURL: no URL makes the opener panic; one it refuses is ErrBadURL
// (opening makes no network call) and never shows the password.
func FuzzURL(f *testing.F) {
	for _, s := range []string{"db?sslmode=disable", "db?leash_table=x&leash_table=y", "db?leash_batch_size=-1", "?#x", "%zz", "db?leash_x=1"} {
		f.Add("S3cretPassw0rd", s)
	}
	f.Fuzz(func(t *testing.T, password, rest string) {
		if len(password) < 8 || strings.ContainsAny(password, "/?#@:%[]") {
			return
		}
		raw := "postgres://user:" + password + "@127.0.0.1:1/" + rest
		s, err := driver.Open(context.Background(), raw)
		if err == nil {
			s.Close()
			return
		}
		if !errors.Is(err, driver.ErrBadURL) && !strings.Contains(err.Error(), "pgstore: open") {
			t.Fatalf("Open(%q) = %v, want ErrBadURL", raw, err)
		}
		if strings.Contains(rest, password) {
			return // the password is elsewhere in the URL too
		}
		if strings.Contains(err.Error(), password) {
			t.Fatalf("Open(%q) = %v: shows the password", raw, err)
		}
	})
}
