package pgstore_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/pgstore"
	"github.com/leash-go/leash/storetest"
)

// TestLeastPrivilege creates the tables as a DBA would (the superuser runs
// DDL's output), grants an application role only what the package doc says
// it needs, and runs the conformance suite as that role.
func TestLeastPrivilege(t *testing.T) {
	srv := sharedPostgres(t)
	admin := newPool(t, srv.URL())
	schema, table, role := fmt.Sprintf("dba_made_%d", rand.Uint32()), tableName(t), "leash_app"
	ctx := bg(t)
	if _, err := admin.Exec(ctx, mustDDL(t, schema, table), pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { return pgx.Identifier{s}.Sanitize() }
	var tables []string
	for _, suffix := range []string{"", "_holds", "_clients", "_version", "_jobs", "_runs"} {
		tables = append(tables, pgx.Identifier{schema, table + suffix}.Sanitize())
	}
	for _, stmt := range []string{
		"DO $$ BEGIN CREATE ROLE " + q(role) + " LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
		"GRANT USAGE ON SCHEMA " + q(schema) + " TO " + q(role),
		"GRANT SELECT, INSERT, UPDATE, DELETE ON " + strings.Join(tables, ", ") + " TO " + q(role),
		"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA " + q(schema) + " TO " + q(role),
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	app := newPool(t, strings.Replace(srv.URL(), "postgres://postgres@", "postgres://"+role+"@", 1))
	s := pgstore.New(app, &pgstore.Options{Schema: schema, Table: table})
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil { // the tables are there: nothing to create
		t.Fatalf("Migrate as the application role: %v", err)
	}
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}
