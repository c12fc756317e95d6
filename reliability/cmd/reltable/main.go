// Command reltable turns the figures that the reliability suite reports
// (LEASH_RELIABILITY_REPORT, one JSON object per scenario) into the table of
// RELIABILITY.md, replacing what stands between its table markers.
//
//	go run ./cmd/reltable -in report.jsonl -doc ../RELIABILITY.md
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/leash-go/leash/reliability/check"
)

const (
	begin = "<!-- table: begin (written by reltable) -->"
	end   = "<!-- table: end -->"
)

func main() {
	in := flag.String("in", "", "the report file the suite wrote (LEASH_RELIABILITY_REPORT)")
	doc := flag.String("doc", "", "the Markdown file whose table to replace")
	header := flag.String("header", "", "a line to put above the table (how it was measured)")
	flag.Parse()
	if *in == "" || *doc == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*in, *doc, *header); err != nil {
		fmt.Fprintln(os.Stderr, "reltable:", err)
		os.Exit(1)
	}
}

func run(in, doc, header string) error {
	rows, err := read(in)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return fmt.Errorf("%s has no rows: did the suite run?", in)
	}
	old, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	i, j := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q … %q markers", doc, begin, end)
	}
	var b strings.Builder
	b.WriteString(begin + "\n")
	if header != "" {
		b.WriteString(header + "\n\n")
	}
	b.WriteString(table(rows))
	out := append(append(append([]byte{}, old[:i]...), b.String()...), old[j:]...)
	return os.WriteFile(doc, out, 0o644)
}

func read(path string) ([]check.Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []check.Row
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r check.Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

func table(rows []check.Row) string {
	var b strings.Builder
	b.WriteString("| scenario | runs | grants | double grants | stale writes accepted (of superseded attempts) | notification lead min / p50 | believed overlap | expected, and why |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---:|---|\n")
	for _, r := range rows {
		lead := "—"
		if r.Told > 0 {
			lead = fmt.Sprintf("%.0f / %.0f ms (%d told)", r.LeadMinMS, r.LeadP50MS, r.Told)
		}
		double := fmt.Sprintf("%d", r.DoubleGrants)
		if r.Verdict != "Ok" {
			double += " (porcupine: " + strings.ToLower(r.Verdict) + ")"
		}
		var notes []string
		if r.Note != "" {
			notes = append(notes, r.Note)
		}
		if r.Late > 0 {
			notes = append(notes, fmt.Sprintf("%d holders told after the server could free the lock", r.Late))
		}
		if r.LateExpected > 0 {
			notes = append(notes, fmt.Sprintf("%d told late while stopped (expected: a stopped process cannot be told)", r.LateExpected))
		}
		if r.Ambiguous > 0 {
			notes = append(notes, fmt.Sprintf("%d ambiguous store ops, checked as possibly done", r.Ambiguous))
		}
		name := r.Scenario
		if r.Control {
			name = "⚠ " + name
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %d (%d) | %s | %.0f ms | %s |\n",
			name, r.Runs, r.Grants, double, r.StaleAccepted, r.Superseded, lead, r.OverlapMS, strings.Join(notes, "; "))
	}
	return b.String()
}
