package mysqlstore_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leash-go/leash/mysqlstore"
)

// columnsOf returns, per CREATE TABLE of text, its columns as "name TYPE".
func columnsOf(text string) map[string][]string {
	tables := map[string][]string{}
	create := regexp.MustCompile("CREATE TABLE IF NOT EXISTS `([a-z_]+)`")
	column := regexp.MustCompile("^\\s*`([a-z_]+)`\\s+([A-Z]+(?:\\(\\d+\\))?(?: UNSIGNED)?)")
	var table string
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "//")
		if m := create.FindStringSubmatch(line); m != nil {
			table = m[1]
			continue
		}
		if m := column.FindStringSubmatch(line); m != nil && table != "" {
			tables[table] = append(tables[table], m[1]+" "+m[2])
		}
		if strings.HasPrefix(strings.TrimSpace(line), ")") {
			table = ""
		}
	}
	return tables
}

// TestDocShowsTheSchema: the DDL in the package doc has the tables and
// columns of schema.sql.
func TestDocShowsTheSchema(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	want, got := columnsOf(mysqlstore.Schema), columnsOf(string(doc))
	if len(want) == 0 {
		t.Fatal("schema.sql shows no tables")
	}
	for table, cols := range want {
		if !slices.Equal(got[table], cols) {
			t.Errorf("the package doc shows %s with %q, schema.sql with %q", table, got[table], cols)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the package doc shows %d tables, schema.sql %d", len(got), len(want))
	}
}
