package pgstore_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/leash-go/leash/pgstore"
)

// TestDocDDL checks that the tables the package doc shows are those of
// schema.sql (which Migrate runs), so that the two cannot drift.
func TestDocDDL(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var code strings.Builder
	for _, line := range strings.Split(string(doc), "\n") {
		if l, ok := strings.CutPrefix(line, "//\t"); ok {
			code.WriteString(l + "\n")
		}
	}
	norm := func(s string) string {
		s = regexp.MustCompile(`--[^\n]*`).ReplaceAllString(s, "")
		return strings.Join(strings.Fields(s), " ")
	}
	schema := norm(mustDDL(t, pgstore.DefaultSchema, pgstore.DefaultTable))
	tables := regexp.MustCompile(`(?s)CREATE TABLE .*?;`).FindAllString(code.String(), -1)
	if len(tables) != 6 {
		t.Fatalf("the package doc shows %d CREATE TABLE statements, want 6", len(tables))
	}
	for _, tbl := range tables {
		// The doc writes the default names unquoted.
		want := regexp.MustCompile(`public\.(leash_locks\w*)`).ReplaceAllString(norm(tbl), `"public"."$1"`)
		if !strings.Contains(schema, want) {
			t.Errorf("the package doc's %q is not in schema.sql", want)
		}
	}
	if got := strings.Count(schema, "CREATE TABLE"); got != len(tables) {
		t.Errorf("schema.sql creates %d tables, the package doc shows %d", got, len(tables))
	}
}
