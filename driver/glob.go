package driver

import (
	"fmt"
	"regexp"
	"strings"
)

// Glob compiles an Admin.List pattern into a regular expression matching the
// whole of a name: '*' matches any run of characters ('/' and ':'
// included), '?' any one character, and '\' quotes the next character.
// The empty pattern matches every name, as Admin.List and JobStore.Jobs
// read it. A store that cannot hand the pattern to its server uses it to
// filter.
func Glob(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		pattern = "*"
	}
	var b strings.Builder
	b.WriteString(`^(?s:`)
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '\\':
			if i+1 == len(pattern) {
				return nil, fmt.Errorf("pattern %q ends with a lone '\\'", pattern)
			}
			i++
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		default:
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		}
	}
	b.WriteString(`)$`)
	return regexp.Compile(b.String())
}
